// Package gateway owns the hub's REST face: grpc-gateway's mux with Kubernetes' JSON (package kjson) as its codec,
// Kubernetes' paths and query parameters (?watch=true, labelSelector, fieldValidation, patch content types), YAML in
// and out, errors written as Kubernetes Status bodies with the HTTP codes kube-apiserver uses, and gzip for answers
// of 128 KiB or more to clients that take it (Compress): lists and gets from the hub's cache are joined from each
// object's memoized deflate segment (Segment) and go out as they are joined, the rest is compressed as it is written.
package gateway
