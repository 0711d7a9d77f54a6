package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/etcdcluster"
	"github.com/trellis-dev/trellis/test/timescale"
)

const (
	replicaAgents    = 300
	replicaNamespace = "garden-replicas"
	// replicaConverge bounds each wait of TestReplicasShareTheFleet: the agents of a killed replica resync on the
	// others within it (bench-agents -replicas measures the time; this test checks the outcome).
	replicaConverge = 60 * time.Second
)

// replicaFleet is the three replicas as the test's admin sees them and the agents spread over them.
type replicaFleet struct {
	t      *testing.T
	hubs   []*binproc.Hub
	grpc   []string // the replicas' --grpc-listen addresses, by replica
	shoots []corev1beta1.ShootServiceClient
	seeds  []corev1beta1.SeedServiceClient
	agents []*agentsim.Agent
}

// TestReplicasShareTheFleet runs three hub processes on a three-member etcd cluster (TLS) and 300 simulated agents,
// each connection to a replica drawn at random (as through a load balancer). A shoot updated through one replica
// reaches its agent on another; then the replica leading the loops is SIGKILLed, each of its agents' shoots is updated
// through the survivors while the agent is away, and every one of those agents syncs again on a survivor and holds
// that update. Exactly one survivor then leads, and every agent holds the current version of its Seed and Shoot.
func TestReplicasShareTheFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-member etcd cluster, three hub processes and 300 agents (1–2 min)")
	}
	lightTest(t)
	etcdBin := storetest.EtcdBinary()
	if etcdBin == "" {
		t.Fatal("no etcd binary at bin/testbin/etcd: run `make testbin`")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(5*time.Minute))
	defer cancel()
	tmp := t.TempDir()
	cluster, err := etcdcluster.Start(ctx, etcdcluster.Config{Bin: etcdBin, Dir: filepath.Join(tmp, "etcd"), NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	grpcAddrs := []string{freeLoopbackAddr(t), freeLoopbackAddr(t), freeLoopbackAddr(t)}
	hubs, err := binproc.StartReplicas(ctx, binproc.ReplicasConfig{Bin: hubBinary(t), Dir: filepath.Join(tmp, "hubs"), Replicas: 3,
		Args:        append(cluster.HubArgs(), "--heartbeat-interval", "1s"),
		ReplicaArgs: func(i int) []string { return []string{"--grpc-listen", grpcAddrs[i]} }})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hubs {
		t.Cleanup(func() { _ = h.Stop(10 * time.Second) })
	}
	registerLocalExtensions(t, hubs[0])
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range hubs {
				keepLog(t, h.LogPath())
			}
		}
	})
	w := &replicaFleet{t: t, hubs: hubs, grpc: grpcAddrs}
	var conns []*grpc.ClientConn
	for _, h := range hubs {
		conn, err := grpc.NewClient(h.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: h.Pool, MinVersion: tls.VersionTLS12})),
			grpc.WithPerRPCCredentials(bearerToken(h.Token)), fastReconnect)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conns = append(conns, conn)
		w.shoots = append(w.shoots, corev1beta1.NewShootServiceClient(conn))
		w.seeds = append(w.seeds, corev1beta1.NewSeedServiceClient(conn))
	}
	if hubs[0].Token != hubs[2].Token {
		t.Fatal("the replicas do not share the admin token")
	}
	w.startAgents(ctx, conns[0])
	on := w.replicaOf()
	t.Logf("%d agents synced; per replica %v", len(w.agents), countReplicas(on, len(hubs)))
	leaders := w.leaders()
	if len(leaders) != 1 {
		t.Fatalf("%d replicas lead the loops (%v), want 1", len(leaders), leaders)
	}

	// Assignments reach an agent whichever replica wrote the change: every shoot is updated through a replica its
	// agent is not connected to.
	var updates []update
	for i := range w.agents {
		updates = append(updates, w.update(ctx, (on[i]+1)%len(hubs), i, "cross"))
	}
	w.waitHeld(updates, "updates written through another replica than the agent's")

	// The leader is SIGKILLed; its agents' shoots change through the survivors while the agents are away.
	victim := leaders[0]
	var survivors, mine []int
	for r := range hubs {
		if r != victim {
			survivors = append(survivors, r)
		}
	}
	for i, r := range on {
		if r == victim {
			mine = append(mine, i)
		}
	}
	if len(mine) == 0 {
		t.Fatalf("no agent on replica %d", victim)
	}
	before := make([]int, len(w.agents))
	for i, a := range w.agents {
		before[i] = a.Syncs()
	}
	killed := time.Now()
	if err := hubs[victim].Kill(); err != nil {
		t.Fatal(err)
	}
	updates = updates[:0]
	for k, i := range mine {
		updates = append(updates, w.update(ctx, survivors[k%len(survivors)], i, "outage"))
	}
	deadline := time.Now().Add(replicaConverge)
	for _, i := range mine {
		for w.agents[i].Syncs() == before[i] || w.replicaOf()[i] == victim {
			if time.Now().After(deadline) {
				t.Fatalf("agent %s of the killed replica %d did not sync again on another replica within %s", w.agents[i].Seed, victim, replicaConverge)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("all %d agents of replica %d synced again on the others %s after the SIGKILL; per replica now %v", len(mine), victim,
		time.Since(killed).Round(time.Millisecond), countReplicas(w.replicaOf(), len(hubs)))
	w.waitHeld(updates, "updates written while their agents' replica was down")

	// One survivor takes over the loops once the dead leader's election lease (15 s) has run out.
	for len(w.leaders()) != 1 {
		if time.Since(killed) > replicaConverge {
			t.Fatalf("%d replicas lead %s after the kill, want 1", len(w.leaders()), replicaConverge)
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.checkCurrent(ctx, survivors[0])
}

func replicaSeed(i int) string  { return fmt.Sprintf("r%03d", i) }
func replicaShoot(i int) string { return "shoot-" + replicaSeed(i) }

// startAgents creates the project and what the shoots share, then per agent its Seed, Shoot and bootstrap token, and
// bootstraps and runs the agent (through a random replica, as all its connections); it waits until all have synced.
func (w *replicaFleet) startAgents(ctx context.Context, conn grpc.ClientConnInterface) {
	t := w.t
	t.Helper()
	secrets := kcorev1.NewSecretServiceClient(conn)
	if _, err := kcorev1.NewNamespaceServiceClient(conn).Create(ctx, &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: replicaNamespace}}); err != nil {
		t.Fatal(err)
	}
	if _, err := corev1beta1.NewProjectServiceClient(conn).Create(ctx, &corev1beta1.Project{Metadata: &metav1.ObjectMeta{Name: "replicas"},
		Spec: &corev1beta1.ProjectSpec{Namespace: proto.String(replicaNamespace)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := corev1beta1.NewCloudProfileServiceClient(conn).Create(ctx, &corev1beta1.CloudProfile{Metadata: &metav1.ObjectMeta{Name: "local"},
		Spec: &corev1beta1.CloudProfileSpec{Type: "local", Regions: []*corev1beta1.Region{{Name: "local"}},
			Kubernetes:   &corev1beta1.KubernetesSettings{Versions: []*corev1beta1.ExpirableVersion{{Version: "1.35.4"}}},
			MachineTypes: []*corev1beta1.MachineType{{Name: "local", Cpu: "1", Gpu: "0", Memory: "1Gi"}},
			MachineImages: []*corev1beta1.MachineImage{{Name: "gardenlinux", Versions: []*corev1beta1.MachineImageVersion{{
				Version: "1.0.0", Cri: []*corev1beta1.CRI{{Name: "containerd"}}, Architectures: []string{"amd64"}}}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Create(ctx, agentsim.Secret(replicaNamespace, "creds")); err != nil {
		t.Fatal(err)
	}
	if _, err := corev1beta1.NewSecretBindingServiceClient(conn).Create(ctx, agentsim.SecretBinding(replicaNamespace, "creds")); err != nil {
		t.Fatal(err)
	}
	dialer := agentsim.Dialer{Addresses: w.grpc, CA: w.hubs[0].Pool}
	w.agents = make([]*agentsim.Agent, replicaAgents)
	errs := make([]error, replicaAgents)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range replicaAgents {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = w.newAgent(ctx, secrets, conn, dialer, i)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var running sync.WaitGroup
	for _, a := range w.agents {
		running.Go(func() { _ = a.Run(ctx) })
	}
	t.Cleanup(running.Wait) // the agents end with ctx, which the test cancels before its cleanups run
	for _, a := range w.agents {
		select {
		case <-a.Synced():
		case <-time.After(replicaConverge):
			t.Fatalf("agent %s did not sync within %s", a.Seed, replicaConverge)
		}
	}
}

func (w *replicaFleet) newAgent(ctx context.Context, secrets kcorev1.SecretServiceClient, conn grpc.ClientConnInterface, dialer agentsim.Dialer, i int) error {
	seed := agentsim.Seed(replicaSeed(i))
	seed.Spec.Networks = &corev1beta1.SeedNetworks{Pods: "10.1.0.0/16", Services: "10.2.0.0/16"}
	if _, err := corev1beta1.NewSeedServiceClient(conn).Create(ctx, seed); err != nil {
		return fmt.Errorf("seed %s: %w", replicaSeed(i), err)
	}
	shoot := agentsim.Shoot(replicaNamespace, replicaShoot(i), replicaSeed(i), "creds", "local")
	shoot.Spec.CloudProfileName, shoot.Spec.CloudProfile = nil, &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: "local"}
	shoot.Spec.Kubernetes = &corev1beta1.Kubernetes{Version: "1.35.4"}
	minimum, maximum := int32(1), int32(2)
	shoot.Spec.Provider.Workers = []*corev1beta1.Worker{{Name: "pool", Minimum: &minimum, Maximum: &maximum, Machine: &corev1beta1.Machine{Type: "local"}}}
	if _, err := corev1beta1.NewShootServiceClient(conn).Create(ctx, shoot); err != nil {
		return fmt.Errorf("shoot %s: %w", replicaShoot(i), err)
	}
	tok, err := auth.NewSeedBootstrapToken(replicaSeed(i), time.Now().Add(time.Hour))
	if err != nil {
		return err
	}
	if _, err := secrets.Create(ctx, tok.SecretObject()); err != nil {
		return fmt.Errorf("bootstrap token of %s: %w", replicaSeed(i), err)
	}
	bctx, cancel := context.WithTimeout(ctx, replicaConverge)
	defer cancel()
	cert, err := agentsim.Bootstrap(bctx, dialer, tok.Token(), replicaSeed(i), nil, nil)
	if err != nil {
		return fmt.Errorf("bootstrap %s: %w", replicaSeed(i), err)
	}
	w.agents[i] = &agentsim.Agent{Seed: replicaSeed(i), Dialer: dialer, Cert: cert, HeartbeatInterval: time.Second}
	return nil
}

// replicaOf returns, per agent, the replica its current or last session went to.
func (w *replicaFleet) replicaOf() []int {
	out := make([]int, len(w.agents))
	for i, a := range w.agents {
		out[i] = -1
		for r, addr := range w.grpc {
			if a.Remote() == addr {
				out[i] = r
			}
		}
	}
	return out
}

func countReplicas(on []int, n int) []int {
	out := make([]int, n)
	for _, r := range on {
		if r >= 0 {
			out[r]++
		}
	}
	return out
}

// leaders returns the running replicas that lead the control-plane loops.
func (w *replicaFleet) leaders() []int {
	var out []int
	for r, h := range w.hubs {
		if h.IsLeader() {
			out = append(out, r)
		}
	}
	return out
}

// update is a shoot update and the resourceVersion it made.
type update struct {
	agent int
	rv    int64
}

// update relabels agent i's shoot through replica r.
func (w *replicaFleet) update(ctx context.Context, r, i int, label string) update {
	w.t.Helper()
	for attempt := 0; ; attempt++ {
		s, err := w.shoots[r].Get(ctx, &metav1.GetRequest{Namespace: replicaNamespace, Name: replicaShoot(i)})
		if err == nil {
			if s.Metadata.Labels == nil {
				s.Metadata.Labels = map[string]string{}
			}
			s.Metadata.Labels["e2e.trellis.dev/replicas"] = label
			if s, err = w.shoots[r].Update(ctx, s); err == nil {
				rv, _ := strconv.ParseInt(s.GetMetadata().GetResourceVersion(), 10, 64)
				return update{agent: i, rv: rv}
			}
		}
		if attempt == 5 {
			w.t.Fatalf("update %s through replica %d: %v", replicaShoot(i), r, err)
		}
		time.Sleep(100 * time.Millisecond) // a conflict with the hub's own writes
	}
}

// waitHeld waits until each update's agent holds its shoot at that version or later.
func (w *replicaFleet) waitHeld(updates []update, what string) {
	w.t.Helper()
	deadline := time.Now().Add(replicaConverge)
	for _, u := range updates {
		for {
			o, _ := w.agents[u.agent].Object(resShoots, replicaNamespace+"/"+replicaShoot(u.agent))
			if o.ResourceVersion >= u.rv {
				break
			}
			if time.Now().After(deadline) {
				w.t.Fatalf("%s: agent %s holds its shoot at %d, not at %d after %s", what, w.agents[u.agent].Seed, o.ResourceVersion, u.rv, replicaConverge)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	w.t.Logf("%d %s arrived", len(updates), what)
}

// checkCurrent waits until every agent holds its Seed and Shoot at the versions replica r's API reports (the new
// sessions' status writes may still be in flight).
func (w *replicaFleet) checkCurrent(ctx context.Context, r int) {
	w.t.Helper()
	deadline := time.Now().Add(replicaConverge)
	for {
		seeds, err := w.seeds[r].List(ctx, &metav1.ListRequest{})
		if err != nil {
			w.t.Fatal(err)
		}
		shoots, err := w.shoots[r].List(ctx, &metav1.ListRequest{Namespace: replicaNamespace})
		if err != nil {
			w.t.Fatal(err)
		}
		want := map[string]int64{}
		for _, s := range seeds.GetItems() {
			want[s.GetMetadata().GetName()], _ = strconv.ParseInt(s.GetMetadata().GetResourceVersion(), 10, 64)
		}
		for _, s := range shoots.GetItems() {
			want[replicaNamespace+"/"+s.GetMetadata().GetName()], _ = strconv.ParseInt(s.GetMetadata().GetResourceVersion(), 10, 64)
		}
		problem := ""
		for i, a := range w.agents {
			snap := a.Snapshot()
			seedRV, shootRV := snap[resSeeds][replicaSeed(i)], snap[resShoots][replicaNamespace+"/"+replicaShoot(i)]
			if seedRV != want[replicaSeed(i)] || shootRV != want[replicaNamespace+"/"+replicaShoot(i)] {
				problem = fmt.Sprintf("agent %s holds seed %d (hub %d), shoot %d (hub %d)", a.Seed, seedRV, want[replicaSeed(i)], shootRV, want[replicaNamespace+"/"+replicaShoot(i)])
				break
			}
		}
		if problem == "" {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatal(problem)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
