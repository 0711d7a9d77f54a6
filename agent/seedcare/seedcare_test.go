package seedcare_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/agent/seedcare"
	"github.com/trellis-dev/trellis/extsdk/heartbeat"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// The tests run the controller against real parts (test/agenttest): a hub, the package's shared seed kube-apiserver
// with the extension CRDs, a real agent (controllers off) that gives the controller its mTLS connection and its
// synced cache, and extension heartbeats written with extsdk/heartbeat.
func TestMain(m *testing.M) { agenttest.Main(m) }

// watcher samples the hub's Seed and remembers, per condition type, the statuses it saw in order.
type watcher struct {
	mu   sync.Mutex
	seen map[string][]string // type → statuses, consecutive duplicates dropped
	last map[string]*metav1.Condition
}

func watch(t *testing.T, h *agenttest.Hub, seed string) *watcher {
	t.Helper()
	w := &watcher{seen: map[string][]string{}, last: map[string]*metav1.Condition{}}
	sc := corev1beta1.NewSeedServiceClient(h.Admin)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if s, err := sc.Get(ctx, &metav1.GetRequest{Name: seed}); err == nil {
				w.mu.Lock()
				for _, c := range s.GetStatus().GetConditions() {
					if h := w.seen[c.GetType()]; len(h) == 0 || h[len(h)-1] != c.GetStatus() {
						w.seen[c.GetType()] = append(h, c.GetStatus())
					}
					w.last[c.GetType()] = c
				}
				w.mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return w
}

// wait waits until condition typ has status st and reason, and returns it.
func (w *watcher) wait(t *testing.T, typ, st, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	agenttest.Eventually(t, fmt.Sprintf("%s=%s (%s)", typ, st, reason), func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		c = w.last[typ]
		return c.GetStatus() == st && c.GetReason() == reason
	})
	return c
}

// history returns the statuses typ went through and starts a new history.
func (w *watcher) history(typ string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.seen[typ]
	w.seen[typ] = h[len(h)-1:]
	return h
}

func startCare(t *testing.T, s *agenttest.Seed, mutate func(*seedcare.Config)) {
	t.Helper()
	agenttest.RunController(t, func() (agenttest.Runner, error) {
		cfg := seedcare.Config{SeedName: s.Name, Cache: s.Cache, Hub: s.Conn, Seed: s.Client, Log: agenttest.Logger(),
			SyncPeriod: 100 * time.Millisecond, StaleHeartbeatThreshold: 1500 * time.Millisecond,
			Thresholds: map[string]time.Duration{seedcare.SeedSystemComponentsHealthy: time.Second}}
		if mutate != nil {
			mutate(&cfg)
		}
		return seedcare.New(cfg)
	})
}

// startHeartbeat renews the heartbeat Lease in namespace ns until stop is called.
func startHeartbeat(t *testing.T, s *agenttest.Seed, ns string) (stop func()) {
	t.Helper()
	hb, err := heartbeat.New(heartbeat.Config{Client: s.Client, Namespace: ns, ExtensionName: "provider-test", RenewInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = hb.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// The seed's condition follows its extensions: True while the CRDs are established and the heartbeats fresh; a
// failing check turns it Progressing and only after the threshold False; the hub's GardenletReady is left alone.
func TestSeedConditions(t *testing.T) {
	e := agenttest.StartHub(t)
	s := e.StartSeed(t, "local", agenttest.SeedSpec, seedtest.StartShared(t))
	ns := fmt.Sprintf("extension-provider-test-%d", time.Now().UnixNano()%1e9) // unique in the package's shared seed
	s.CreateNamespace(t, ns)
	stop := startHeartbeat(t, s, ns)
	w := watch(t, e, "local")
	startCare(t, s, nil)

	w.wait(t, seedcare.SeedSystemComponentsHealthy, "True", "SystemComponentsRunning")
	w.wait(t, "GardenletReady", "True", "GardenletReady")

	// The extension stops renewing its heartbeat.
	stop()
	c := w.wait(t, seedcare.SeedSystemComponentsHealthy, "False", "ExtensionHeartbeatsStale")
	if !strings.Contains(c.GetMessage(), ns) {
		t.Errorf("message %q does not name the extension's namespace", c.GetMessage())
	}
	if h := w.history(seedcare.SeedSystemComponentsHealthy); !slices.Equal(h, []string{"True", "Progressing", "False"}) {
		t.Errorf("SeedSystemComponentsHealthy went %v, want True, Progressing, False", h)
	}
	startHeartbeat(t, s, ns)
	w.wait(t, seedcare.SeedSystemComponentsHealthy, "True", "SystemComponentsRunning")

	w.wait(t, "GardenletReady", "True", "GardenletReady")
}

// A missing CRD makes the seed's system components unhealthy; with a threshold of zero at once.
func TestMissingCRD(t *testing.T) {
	e := agenttest.StartHub(t)
	s := e.StartSeed(t, "local", agenttest.SeedSpec, seedtest.StartShared(t))
	w := watch(t, e, "local")
	startCare(t, s, func(c *seedcare.Config) {
		c.CRDs = []string{"backupbuckets.extensions.gardener.cloud", "widgets.extensions.gardener.cloud"}
		c.Thresholds = map[string]time.Duration{seedcare.SeedSystemComponentsHealthy: 0}
	})
	c := w.wait(t, seedcare.SeedSystemComponentsHealthy, "False", "CRDsNotEstablished")
	if c.GetMessage() != "CRD widgets.extensions.gardener.cloud is missing" {
		t.Errorf("message %q", c.GetMessage())
	}
	if h := w.history(seedcare.SeedSystemComponentsHealthy); slices.Contains(h, "Progressing") {
		t.Errorf("SeedSystemComponentsHealthy went %v, want False without Progressing", h)
	}
}

// The agent's facts land in the Seed's status as the gardenlet writes them: status.gardener, the seed cluster's
// Kubernetes version (its /version) and identity (ConfigMap kube-system/cluster-identity, else the UID of
// kube-system), and the generation it has seen, which follows a change of the spec at once; the hub's fields stay.
func TestSeedStatusFacts(t *testing.T) {
	e := agenttest.StartHub(t)
	cluster := seedtest.StartShared(t)
	s := e.StartSeed(t, "local", agenttest.SeedSpec, cluster)
	me := &corev1beta1.Gardener{Id: "agent-test", Name: "trellis-agent", Version: "v1.2.3-test"}
	startCare(t, s, func(c *seedcare.Config) {
		c.Identity, c.Versions = me, cluster.Client.Discovery()
		c.SyncPeriod = time.Hour // the Seed's changes must trigger the syncs
	})

	ctx := context.Background()
	v, err := cluster.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	var identity string
	if cm, err := cluster.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, seedcare.ClusterIdentity, kmetav1.GetOptions{}); err == nil {
		identity = cm.Data[seedcare.ClusterIdentity]
	} else if ns, err := cluster.Client.CoreV1().Namespaces().Get(ctx, "kube-system", kmetav1.GetOptions{}); err == nil {
		identity = string(ns.UID)
	} else {
		t.Fatal(err)
	}
	if identity == "" || !strings.HasPrefix(v.GitVersion, "v1.") {
		t.Fatalf("seed cluster identity %q, version %q", identity, v.GitVersion)
	}

	seeds := corev1beta1.NewSeedServiceClient(e.Admin)
	var seed *corev1beta1.Seed
	facts := func() bool {
		var err error
		if seed, err = seeds.Get(ctx, &metav1.GetRequest{Name: "local"}); err != nil {
			return false
		}
		st := seed.GetStatus()
		return proto.Equal(st.GetGardener(), me) && st.GetKubernetesVersion() == v.GitVersion &&
			st.GetClusterIdentity() == identity && st.GetObservedGeneration() == seed.GetMetadata().GetGeneration()
	}
	agenttest.Eventually(t, "the agent's facts in the seed's status", facts)
	gen := seed.GetMetadata().GetGeneration()
	// gardenlet's seed reconciler reports its end as a lastOperation (kubectl get seeds: LAST OPERATION).
	reconciled := func(s *corev1beta1.Seed) bool {
		op := s.GetStatus().GetLastOperation()
		return op.GetType() == "Reconcile" && op.GetState() == "Succeeded" && op.GetProgress() == 100 &&
			op.GetDescription() == "Seed cluster has been successfully reconciled." && op.GetLastUpdateTime() != nil
	}
	if !reconciled(seed) {
		t.Errorf("lastOperation %v, want a succeeded Reconcile", seed.GetStatus().GetLastOperation())
	}
	first := seed.GetStatus().GetLastOperation().GetLastUpdateTime().AsTime()
	time.Sleep(1100 * time.Millisecond) // the lastOperation's time has seconds

	e.Update(t, "core.gardener.cloud", "seeds", "", "local", false, func(o store.Object) {
		sd := o.(*corev1beta1.Seed)
		sd.Spec.Provider.Zones = append(sd.Spec.Provider.Zones, "zone-x")
	})
	agenttest.Eventually(t, "status.observedGeneration following the new generation", func() bool {
		return facts() && seed.GetMetadata().GetGeneration() > gen
	})
	if !reconciled(seed) || !seed.GetStatus().GetLastOperation().GetLastUpdateTime().AsTime().After(first) {
		t.Errorf("lastOperation after the spec change %v, want a newer succeeded Reconcile", seed.GetStatus().GetLastOperation())
	}
	w := watch(t, e, "local")
	w.wait(t, "GardenletReady", "True", "GardenletReady")
	if seed.GetStatus().GetClientCertificateExpirationTimestamp() == nil {
		t.Error("the hub's status.clientCertificateExpirationTimestamp is gone")
	}
}
