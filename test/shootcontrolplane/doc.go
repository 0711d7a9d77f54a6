// Package shootcontrolplane tests shoots' control planes end to end on a seed with a real node: the agent deploys
// etcd, kube-apiserver and kube-controller-manager into the seed, publishes the shoot's client CA, and the real
// kubectl reaches the shoot's kube-apiserver through the hub's TLS-passthrough listener with a client certificate
// signed by it. Hibernation, wake-up and deletion follow, and the rotations: the CA, and the etcd encryption key (a
// Secret written before it is under the new key once Prepared and still reads back once Completed). The tests need
// root and `make testbin`.
package shootcontrolplane
