// Package kubeconfig owns the kubeconfigs the hub issues for shoots: the shoots/adminkubeconfig and
// shoots/viewerkubeconfig subresources (Gardener's AdminKubeconfigRequest and ViewerKubeconfigRequest,
// authentication.gardener.cloud/v1alpha1), served over gRPC (ShootKubeconfigService) and REST.
//
// A request is authorized as Gardener authorizes it — verb create on shoots/adminkubeconfig (project owners and
// admins) or shoots/viewerkubeconfig (viewers too) in the shoot's namespace, asked of the hub's authorizer — and
// answered with a kubeconfig whose client certificate is new: an ECDSA P-256 key, signed by the shoot's client CA
// (the InternalSecret <shoot>.ca-client the seed's agent publishes in the project namespace, which no project member
// can read), CN the hub user's name, O system:masters (admin) or gardener.cloud:system:viewers (viewer), valid for
// spec.expirationSeconds. The kubeconfig's one cluster is the shoot's kube-apiserver through the hub's TLS-passthrough
// tunnel listener (package tunnel): its server is the listener's advertised address, its tls-server-name the shoot's
// name there (api.<shoot>.<project>.<tunnel domain>) and its certificate authority the shoot's published cluster CA
// bundle (<shoot>.ca-cluster).
//
// Nothing is stored. Private keys are neither logged nor audited: the audit log records these requests at Metadata
// at most (package audit).
package kubeconfig
