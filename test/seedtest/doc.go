// Package seedtest starts a seed for tests: a real kube-apiserver with its own etcd, run as separate processes on
// loopback ports through controller-runtime's envtest, and hands out an admin rest.Config, a client-go clientset and
// an admin kubeconfig (bytes and a file) that another process, such as the agent, can use.
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
// The seed has no controllers: no namespace, garbage or service account controllers run, so deleted namespaces stay
// Terminating, owner references are not followed and no service account tokens appear. The ServiceAccount admission
// plugin is off, authorization is RBAC, and the admin user is in system:masters.
//
// On Linux the processes die with the test process, even when it is killed (timeout, interrupt): they are started
// through the test binary itself, which sets a parent-death signal and then executes the real binary. Their output is
// kept in a log directory and its end is logged when the test fails; KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true
// sends it to stdout instead.
package seedtest
