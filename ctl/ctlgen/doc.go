// Package ctlgen is the code generator behind cmd/protoc-gen-trellisctl: from the protos' <Kind>Service services it
// writes the table of kinds trellisctl serves (package ctl/kinds), one resource.Kind per service.
//
// A service is a kind's service when it has the standard RPCs with the shared request messages of trellis.meta.v1:
// Get(GetRequest) returns (K), List(ListRequest) returns (KList), Watch(WatchRequest) returns (stream KWatchEvent),
// Create(K), Update(K), Patch(PatchRequest) and Delete(DeleteRequest), each returning K. Other services are left out;
// a service with Get(GetRequest) that breaks the rest of that shape is an error, so that a kind cannot silently
// drop out of the CLI. From the services it reads:
//
//   - group, version, resource and scope from Get's google.api.http path (/apis/<group>/<version>[/namespaces/
//     {namespace}]/<resource>/{name}, or /api/<version>/... for the core group);
//   - the subresources Patch takes, from Patch's additional bindings (.../{subresource=status});
//   - every other unary RPC as a subresource command (UpdateStatus as update-status), with its REST subresource and
//     its comment; streaming RPCs beyond Watch are skipped;
//   - columns from trellis.cli.v1 options (proto/trellis/cli/v1/options.proto): the kind message's columns, then
//     every field marked with a column, found depth first from the kind's message, with its JSON path;
//   - short names from the kind message's trellis.cli.v1.resource option.
package ctlgen
