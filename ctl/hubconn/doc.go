// Package hubconn owns trellisctl's connection to a hub: a gRPC client connection over TLS carrying the bearer token,
// and the hub's errors, which it turns into a *StatusError holding the Kubernetes Status the hub attached (its
// message, reason and code), so that the CLI shows what the hub said and nothing else.
package hubconn
