// Package machinestandin is the STAND-IN MACHINE RUNNER of the local landscape: it plays the worker machine of a
// shoot whose workers cannot run it yet, for exactly one workload, the seed agent that a ManagedSeed deploys
// into the shoot (agent/managedseed).
//
// The agent chart is installed into the shoot for real (a Helm release, its Deployment, ConfigMap, Secrets and RBAC
// in the shoot's kube-apiserver), but no kubelet runs the Deployment's pod. The runner does instead, as a host
// process: it watches the Deployment in the shoot, writes the files of the pod's configMap and secret volumes where
// the container mounts them (under a directory of its own), and runs bin/trellis-agent with the container's
// arguments and that configuration. What differs from the pod, and why:
//
//   - the seed cluster is the shoot through a kubeconfig the runner is given (seedClientConnection.kubeconfig; a
//     pod uses the in-cluster configuration): the hub's tunnel, or any route to the shoot's API;
//   - paths under the volumes' mount paths point into the runner's directory;
//   - the health and metrics endpoints listen on 127.0.0.1 with ports the system picks ($(POD_IP) and the chart's
//     ports would collide between agents on one host);
//   - a changed pod template (the chart's checksum annotations: configuration, bootstrap token) restarts the process,
//     as a rollout replaces the pod; a deleted Deployment stops it.
//
// The runner acts only while the shoot has no Nodes: a shoot with real workers (provider-local's machines,
// test/localmachine, with the kube-proxy and CoreDNS the agent deploys into shoots with workers) runs the agent's pod
// on a machine, where it reaches the shoot's API server through the kubernetes Service and the hub at the address of
// its configuration (TestManagedSeedWithRealWorker in test/e2e).
package machinestandin
