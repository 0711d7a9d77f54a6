// Package auth owns authentication: who a request comes from. Nothing is anonymous. As kube-apiserver does, a
// request's client certificate is tried first and its bearer token second:
//
//   - Seed agents present client certificates issued by the hub's CA (the TLS handshake verifies them) with O exactly
//     [gardener.cloud:system:seeds] and CN gardener.cloud:system:seed:<seed>; they authenticate as that CN, in groups
//     gardener.cloud:system:seeds and system:authenticated, with User.Seed and User.CertNotAfter set. A verified
//     certificate of any other subject authenticates nobody.
//   - Bootstrap tokens "<id>.<secret>" are Kubernetes' bootstrap tokens: Secret kube-system/bootstrap-token-<id> of
//     type bootstrap.kubernetes.io/token, read from the hub's watch cache. They authenticate as
//     system:bootstrap:<id> in system:bootstrappers; what such a user may do (only the agent's bootstrap exchange)
//     is decided by package authz.
//   - Other bearer tokens are kept only as SHA-256 hashes in etcd, so every hub replica accepts the same ones. The
//     admin token is made on first start and written to the data directory.
//
// Authorization decisions live in package authz and with the API.
package auth
