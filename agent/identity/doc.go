// Package identity owns the agent's client identity at the hub: the seed client certificate subject, making a key
// and a CSR, the credentials (client certificate, key and the hub's CA) and their kubeconfig form, the seed Secret
// they are kept in (Gardener: garden/gardenlet-kubeconfig, data key "kubeconfig", context/cluster/user "gardenlet"),
// the certificate in use for new TLS connections, and when to rotate it.
package identity
