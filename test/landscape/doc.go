// Package landscape owns the local landscape: a hub, seeds, their agents and provider-local, each a child process of
// a real binary, on loopback, with all their state under one directory. `make up` runs one
// (test/landscape/cmd/landscape, docs/local.md) and tests use it to exercise the binaries together.
//
// Start brings up, in order and waiting for each to be ready:
//
//   - trellis-hub on an embedded etcd in <Dir>/hub (ready: /readyz answers 200);
//   - per seed, bin/localseed (etcd, kube-apiserver, kube-controller-manager) in <Dir>/seeds/<name> (ready: it
//     logged "ready in" and wrote its kubeconfig);
//   - per seed, a trellis-agent configured in <Dir>/agents/<name> and bootstrapped with a fresh bootstrap token when
//     the seed holds no credentials of it yet (ready: the session is established and the Seed's GardenletReady
//     condition on the hub is True); with Config.Node it is the pod of the trellis-agent chart instead, installed
//     with Helm from an image of BinDir's trellis-agent (agentpod.go; ready: its Deployment is available and the Seed
//     GardenletReady);
//   - provider-local registered on the hub like any extension: the ControllerDeployment and ControllerRegistration
//     `make generate` writes (deploy/extensions), with the chart's replicaCount 0 (the seeds have no nodes to run its
//     pod); per seed, once the hub has made its ControllerInstallation and the agent installed the chart, the
//     provider-local binary in that installation's namespace extension-<installation>, with <Dir>/backups as the
//     shared "cloud" of every seed (ready: it renewed its heartbeat Lease gardener-extension-heartbeat there).
//     Without a provider-local binary the landscape runs without it and says so; with Config.ManualProviderLocal
//     the caller registers and starts it.
//
// and, with Config.Examples, applies the example resources embedded in examples/ (project local, cloud profile local,
// credentials, shoot local). Every process writes to <Dir>/logs/<process>.log, appending, with a header line per
// start. A second Start on the same Dir reuses everything: the hub's etcd, each seed's etcd, and the agents' client
// certificates stored in their seeds (Secret garden/gardenlet-kubeconfig), so agents do not bootstrap again.
//
// Children are started in their own process groups, so a terminal's Ctrl-C reaches only the parent, which stops them
// in reverse order with Stop (SIGTERM, SIGKILL after Config.StopTimeout). On Linux they also get a parent-death
// signal: they die with the parent even when it is killed. One Start at a time may use a Dir (a lock file guards
// it). The package runs on Unix systems only.
package landscape
