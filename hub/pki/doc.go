// Package pki owns the hub's certificate authority: it is created on first start and kept in etcd (sealed with the
// store's encryption at rest) so every hub replica shares it, and it issues the hub's serving certificates. Client
// certificates for agents are issued from it too (the agent link). Authority adds the CA's rotation in Gardener's
// two phases: Start (Preparing → Prepared) adds a new CA to the trust bundle and issues from it, Complete
// (Completing → Completed) drops the old CA.
package pki
