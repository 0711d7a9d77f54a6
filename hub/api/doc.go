// Package api owns the hub's typed services: one generic implementation (Server) of Get, List, Watch, Create,
// Update, Patch, Delete, UpdateStatus and UpdateBinding (a Shoot's binding subresource, spec.seedName alone) that
// every kind's generated gRPC service is instantiated with, the table of
// kinds (Kinds, generated from proto/kindgen), the Registry that wires kinds to the store and to the REST gateway,
// API discovery documents, and the mapping of errors to gRPC status codes (the one edge where errors become codes).
//
// Every call is authorized by the Registry's Authorizer (Config.Authorizer; package authz is the hub's) before
// it tells whether its object exists; lists and watches are filtered by what the caller may see.
//
// The server is Kubernetes-shaped: apiVersion and kind are checked and set, defaults, validation and admission run
// before writes (package admission), reads come from the store's watch cache, and objects handed out by the store are
// shared and never mutated here (writes work on clones).
package api
