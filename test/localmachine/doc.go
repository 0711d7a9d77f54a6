// Package localmachine is the local machine provider: the local landscape's equivalent of a cloud's VM API. A
// host-side service (it needs root on the machine that runs the local seed's node) that makes and removes machines
// for provider-local's Worker, as machine-controller-manager calls a cloud's API: each machine is a node of
// test/localnode in a slot of its own (its own network namespace, containerd state, cgroup and kubelet), linked
// into the network namespace of the seed's node, whose kubelet joins the shoot named by the machine's user data with
// Kubernetes' TLS bootstrap.
//
// The API is HTTP with JSON bodies and a bearer token (Config.Token):
//
//	PUT    /machines/{name}  body local.MachineSpec; makes the machine, or answers about the existing one
//	GET    /machines/{name}  local.MachineStatus
//	DELETE /machines/{name}  stops the machine and removes everything it made on this machine
//	GET    /machines         every machine's status
//
// The user data is cloud-config (what provider-local's OperatingSystemConfig renders); the machine image this
// provider stands for reads from its write_files the kubelet's bootstrap kubeconfig (BootstrapKubeconfigPath), as
// a Gardener machine image's node agent does. Machines die with the process that runs the provider (their processes
// get a parent-death signal), and Close removes them all.
package localmachine
