// Package audit owns the hub's audit log: Kubernetes' audit events (audit.k8s.io/v1 Event) for every REST and gRPC
// request, at the level and stages an audit.k8s.io/v1 Policy chooses, written to a rotating file and/or sent to a
// webhook in kube-apiserver's formats, configured with kube-apiserver's --audit-* flag names.
//
// The policy evaluation, the file and webhook backends and the event types are k8s.io/apiserver's. What this package
// adds is the hub's request lifecycle: an edge (the gRPC interceptors, the REST handler) begins a request's record
// with its request id as the auditID, the kinds' authorizer (Authorizer) fills in what the request is about — verb,
// object reference, the object written — and the edge finishes it with the response code and object.
//
// Secrets' data is never logged: requests about secrets, internalsecrets and shootstates are logged at Metadata
// at most, whatever the policy says; so are accesstokens, whose status carries the token, and the shoots'
// adminkubeconfig and viewerkubeconfig subresources, whose answers carry a private key.
package audit
