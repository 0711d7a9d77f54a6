// Package agenttest is the harness of the agent's tests: it runs the seed agent and the controllers it starts
// against real parts, a hub (test/hubtest) and seed kube-apiservers (test/seedtest), so that the tests of package
// agent and of its controllers (agent/backupbucket, agent/backupentry, agent/bastion, agent/seedcare) share one way
// of starting them.
//
// A controller test starts a hub, then a seed on a cluster: an agent with its controllers off, which gives the
// controller under test its mTLS connection to the hub and its synced cache. It runs the controller, and an extension
// built with extsdk/controller in the test's process, until the test ends:
//
//	func TestMain(m *testing.M) { agenttest.Main(m) }
//
//	func TestX(t *testing.T) {
//		h := agenttest.StartHub(t)
//		s := h.StartSeed(t, "local", agenttest.SeedSpec, seedtest.StartShared(t))
//		agenttest.StartExtensions(t, s.Cluster.Config, agenttest.Extension(controller.AddArgs[*X]{...}))
//		agenttest.RunController(t, func() (agenttest.Runner, error) { return x.New(x.Config{Hub: s.Conn, Cache: s.Cache, ...}) })
//		agenttest.Eventually(t, "...", func() bool { ... })
//	}
//
// The harness sets up and tears down; it asserts nothing about the code under test. Its only failures are of the
// setup itself (a hub, agent, controller or extension manager that does not start or stop, or returns an error when
// stopped) and Eventually's timeout, whose condition the test states.
//
// Logs: the hub's and the controllers' are discarded, agents' are kept (LogSink) and printed when the test fails; with
// -v and TRELLIS_TEST_LOGS set, all of them go to stderr as well.
package agenttest
