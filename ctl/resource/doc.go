// Package resource owns what trellisctl knows about a kind: its names (resource, singular, kind, short names), its
// scope, the columns of its table, its subresource RPCs, and a client of its gRPC service behind one small interface
// (Client) that works on proto.Message, so that the commands are written once for every kind.
//
// The kinds themselves are generated: cmd/protoc-gen-trellisctl writes one Kind per <Kind>Service of the protos into
// package ctl/kinds, using NewClient and Call for the typed calls. Registry finds a kind by the names a user types
// (shoots, shoot, Shoot, shoots.core.gardener.cloud, shoots.v1beta1.core.gardener.cloud, short names) or by a
// manifest's apiVersion and kind.
package resource
