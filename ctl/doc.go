// Package ctl is trellisctl: the cobra command tree, built from the generated table of kinds (package ctl/kinds, or
// any []*resource.Kind) so that every kind gets get, list, describe, create, apply, edit, patch, delete, watch, wait
// and its subresource commands, plus the hand-written commands users need on top: login and config (contexts),
// shoot operations and their progress view, seed bootstrap tokens, access tokens, api-resources and version.
//
// Commands reach the hub over gRPC (package hubconn) with the kinds' typed services, and show objects as Gardener's
// JSON and YAML (package printer). Errors of the hub are printed as kubectl prints them, "Error from server
// (Reason): message", with the hub's own message. docs/cli.md is the user's guide.
package ctl
