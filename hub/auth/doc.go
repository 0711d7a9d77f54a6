// Package auth owns authentication: who a request comes from. Every request carries a bearer token (nothing is
// anonymous); tokens are kept only as SHA-256 hashes in etcd, so every hub replica accepts the same ones. The admin
// token is made on first start and written to the data directory. Users, robot tokens and project roles build on
// this; authorization decisions live with the API.
package auth
