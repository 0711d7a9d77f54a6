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
//   - Access tokens "trl_<43 base64url characters>" are AccessTokens (auth.trellis.dev/v1alpha1), found in the watch
//     cache by the SHA-256 of the token (TokenHashIndex): user tokens in namespace trellis-system authenticate as
//     spec.user in spec.groups; robot tokens in any other namespace as its ServiceAccount spec.serviceAccountName
//     (system:serviceaccount:<ns>:<name>, groups system:serviceaccounts and system:serviceaccounts:<ns>). The hub
//     generates the token when the AccessToken is created and stores only its hash. A token stops authenticating
//     when it expires (spec.expirationTimestamp), is revoked (spec.revoked), is deleted, or its ServiceAccount is
//     deleted (a ServiceAccount recreated under the same name has another uid); each failure says which.
//   - The admin token is kept only as a SHA-256 hash in etcd, so every hub replica accepts it; it is made on first
//     start and written to the data directory. It authenticates as trellis:admin in system:masters.
//
// Every user is in system:authenticated.
//
// Authorization decisions live in package authz and with the API.
package auth
