// Package seedtest starts a seed for tests: a real kube-apiserver with its own etcd, run as separate processes on
// loopback ports through controller-runtime's envtest, and a real kube-controller-manager beside them. It hands out an
// admin rest.Config, a client-go clientset and an admin kubeconfig (bytes and a file) that another process, such as
// the agent, can use.
//
// The binaries are the ones `make testbin` builds into bin/testbin (found by walking up from the test's working
// directory to the directory holding go.mod), or those in $KUBEBUILDER_ASSETS when it is set. Nothing is downloaded.
// Without them the test fails and says to run `make testbin`.
//
// One seed per test:
//
//	s := seedtest.Start(t) // stopped when the test ends
//	s.Client.CoreV1().Namespaces().Create(...)
//
// One seed shared by the tests of a package, which saves a start per test; the tests keep apart by namespace:
//
//	func TestMain(m *testing.M) { seedtest.Main(m) }
//
//	func TestX(t *testing.T) {
//		s := seedtest.StartShared(t)
//		ns := s.Namespace(t)
//		...
//	}
//
// The controller manager runs the namespace, garbage collector, deployment and replica set controllers, as the admin,
// with no leader election and no serving port, so deleted namespaces go away with their content, objects whose owners
// are deleted are collected, and Deployments report their rollout, as in a real seed. No node runs: a Deployment's
// pods stay Pending, so one with replicas is never available and one scaled to zero is. Start returns once the garbage collector has collected a probe object. The
// namespace controller waits 5 s after a namespace's deletion before it empties it (Kubernetes' fixed grace period),
// so a deleted namespace takes about 5 s to go; a finalizer on an object in it keeps it Terminating until removed.
// The garbage collector finds CRDs installed after the start only at its next discovery sync, every 30 s; WithCRDs
// installs CRDs before it starts:
//
//	func TestMain(m *testing.M) { seedtest.Main(m, seedtest.WithCRDs(crdDir)) }
//
// No service account or token controllers run: the ServiceAccount admission plugin is off, authorization is RBAC,
// and the admin user is in system:masters.
//
// On Linux the processes die with the test process, even when it is killed (timeout, interrupt): they are started
// through the test binary itself, which sets a parent-death signal and then executes the real binary. Their output is
// kept in the seed's directory (etcd.log, kube-apiserver.log, kube-controller-manager.log) and its end is logged when
// the test fails; KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true sends it to stdout instead.
package seedtest
