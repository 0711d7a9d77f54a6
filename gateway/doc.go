// Package gateway owns the hub's REST face: grpc-gateway's mux with Kubernetes' JSON (package kjson) as its codec,
// Kubernetes' paths and query parameters (?watch=true, labelSelector, fieldValidation, patch content types), YAML in
// and out, and errors written as Kubernetes Status bodies with the HTTP codes kube-apiserver uses.
package gateway
