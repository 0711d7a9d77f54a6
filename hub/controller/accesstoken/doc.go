// Package accesstoken owns the hub's AccessToken cleanup: a robot token (an AccessToken outside trellis-system) is
// deleted once the ServiceAccount it was issued for is gone, or was replaced by another of the same name, as
// Kubernetes' token controller deletes the token Secrets of a deleted ServiceAccount. Such tokens already fail to
// authenticate (hub/auth checks the ServiceAccount's uid); the controller keeps them from piling up. User tokens,
// revoked and expired tokens are kept: their records tell a holder why the token no longer works.
package accesstoken
