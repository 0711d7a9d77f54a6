// Package localnode runs a real Kubernetes node for a local seed on this machine: containerd (v2, runc, the CNI
// bridge plugin), kubelet registered to the seed's kube-apiserver, kube-proxy (iptables), kube-scheduler, CoreDNS and
// local-path-provisioner (the default StorageClass), from the binaries and images `make testbin` builds. No Docker and
// no registry: images are archives imported with ctr, those of testbin/images once per machine into an image root
// that every node's containerd root is a copy of (hard links but for containerd's databases; ImageRootCacheEnv).
//
// Every node has a slot (Reserve): an index in [0, Slots) held by a lock file under /run/trellis-node, which gives it
// networks that never overlap another node's or the machine's routes, and its own names:
//
//	pods       10.224.<4i>.0/22          (the node's pod CIDR and the CNI bridge's subnet)
//	services   10.225.<4i>.0/22          (the seed's service CIDR; cluster DNS at .10)
//	node link  10.226.<i>.0/30           (.1 on the host's veth, .2 the node's InternalIP)
//	names      netns and node trellis-node<i>, host veth trln<i>, bridge trlbr<i>, cgroup /trellis-node<i>,
//	           state /var/lib/trellis-node<i> and /run/trellis-node<i>
//
// 10.224.0.0/14 is reserved for local nodes; a slot overlapping a route of the machine is skipped. The node's
// processes run in their own network namespace, joined to the host by a veth pair: kubelet's and kube-proxy's iptables
// rules, the CNI bridge and the pods' routes stay in it, so two nodes never share a chain and the host's own tables
// are never touched. The host reaches pods and ClusterIPs through routes to the veth; the node reaches the seed's
// kube-apiserver (on host loopback) through a forwarder that listens on the host's end of the veth.
//
// Stop (or the next Reserve of a slot left behind by a killed process) removes everything a node changed: its
// processes and those of its pods (containerd's shims outlive containerd), mounts under its state directories, its
// cgroups in every hierarchy, the network namespace with its veth, bridge and iptables chains, the state
// directories, and kubelet's links in /var/log/containers. Leftovers lists what remains, for tests.
//
// The long tests that run landscapes or shoots on local nodes take turns (TakeTurn): at most Turns of them at once on
// the machine, across test processes, so that they do not starve one another's control planes.
//
// Host requirements, measured on these machines (docs/local.md): root, cgroup v1 (kubelet runs with failCgroupV1
// false and the cgroupfs driver), no CAP_SYS_RESOURCE (containerd restricts pods' oom_score_adj), br_netfilter.
package localnode
