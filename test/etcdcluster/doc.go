// Package etcdcluster runs a real etcd cluster of several members as child processes for tests and benchmarks (the
// etcd binary `make testbin` builds), with TLS on every client and peer connection: it makes a CA, a certificate per
// member (server and peer) and a client certificate, the files an external etcd's users (the hub's --etcd-ca,
// --etcd-cert, --etcd-key) need. It owns nothing of the hub; the hub under test connects to it as to any external
// etcd.
package etcdcluster
