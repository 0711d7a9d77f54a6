// Package machinestandin is the STAND-IN MACHINE RUNNER of the local landscape: it plays the worker machine of a
// shoot whose workers cannot run them yet, for the workloads a ManagedSeed needs in its shoot: the seed agent that the
// ManagedSeed deploys into the shoot (agent/managedseed), and the extension controllers that agent then installs into
// the shoot, its seed cluster (ControllerInstallations; provider-local in the landscape).
//
// The charts are installed into the shoot for real (Helm releases, their Deployments, ConfigMaps, Secrets and RBAC in
// the shoot's kube-apiserver), but no kubelet runs the Deployments' pods. The runner does instead, as host processes:
// it watches the agent's Deployment (garden/trellis-agent) and the Deployments of the extensions it is given in
// namespaces extension-*, writes the files of each pod's configMap, secret and emptyDir volumes where the container
// mounts them (under a directory of its own), and runs the given binary (bin/trellis-agent, bin/provider-local) with
// the container's arguments, its $(VAR) references expanded from the container's environment. While a process runs,
// the runner reports the Deployment's pods as a kubelet would (phase Running, Ready, containers running; not bound to
// a node), so that the shoot's controllers count them and the Deployment turns Available, as the agent's health check
// of a ControllerInstallation and Gardener's seed readiness expect. What differs from the pod, and why:
//
//   - the cluster is the shoot through a kubeconfig the runner is given (a pod uses the in-cluster configuration):
//     the hub's tunnel, or any route to the shoot's API; the agent gets it as seedClientConnection.kubeconfig in its
//     configuration file, an extension as --kubeconfig;
//   - paths under the volumes' mount paths point into the runner's directory;
//   - the health and metrics endpoints listen on 127.0.0.1 with ports the system picks ($(POD_IP) and the charts'
//     ports would collide between processes on one host); the downward API's pod IP is 127.0.0.1;
//   - a changed pod template (the chart's checksum annotations: configuration, bootstrap token) restarts the process,
//     as a rollout replaces the pod; a deleted Deployment, or one scaled to zero, stops it.
//
// The runner acts only while the shoot has no Nodes: a shoot with real workers (provider-local's machines,
// test/localmachine, with the kube-proxy and CoreDNS the agent deploys into shoots with workers) runs the agent's pod
// on a machine, where it reaches the shoot's API server through the kubernetes Service and the hub at the address of
// its configuration (TestManagedSeedWithRealWorker in test/e2e).
package machinestandin
