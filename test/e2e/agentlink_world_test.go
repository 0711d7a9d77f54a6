package e2e

// The world of TestAgentLinkSurvivesFaults: its fixtures, the hub's state as its API reports it and what each seed's
// agent must hold by Gardener's rules, the recorders that check every assignment an agent receives, and the writer.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/auth"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/agentsim"
)

// faultWorld is the hub's API as the test sees it (admin gRPC clients straight to the hub), the seeds, the writer's
// log of shoot versions and one assignment recorder per agent.
type faultWorld struct {
	t      *testing.T
	token  string
	caPool *x509.CertPool

	seeds     []string
	shootsAPI corev1beta1.ShootServiceClient
	seedsAPI  corev1beta1.SeedServiceClient
	bindAPI   corev1beta1.SecretBindingServiceClient
	profAPI   corev1beta1.CloudProfileServiceClient
	projAPI   corev1beta1.ProjectServiceClient
	secretAPI kcorev1.SecretServiceClient
	nsAPI     kcorev1.NamespaceServiceClient

	versions *versionLog
	recs     map[string]*recorder // by seed
}

// newFaultWorld connects to the hub directly (not through the proxy: the writer and the checks must not suffer the
// faults injected between agents and hub) with the admin token.
func newFaultWorld(t *testing.T, addr, dataDir, token string) *faultWorld {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(dataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no CA certificate in pki/ca.crt")
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})),
		grpc.WithPerRPCCredentials(bearerToken(token)), fastReconnect)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	w := &faultWorld{
		t: t, token: token, caPool: pool,
		shootsAPI: corev1beta1.NewShootServiceClient(conn), seedsAPI: corev1beta1.NewSeedServiceClient(conn),
		bindAPI: corev1beta1.NewSecretBindingServiceClient(conn), profAPI: corev1beta1.NewCloudProfileServiceClient(conn),
		projAPI: corev1beta1.NewProjectServiceClient(conn), secretAPI: kcorev1.NewSecretServiceClient(conn),
		nsAPI: kcorev1.NewNamespaceServiceClient(conn), versions: newVersionLog(), recs: map[string]*recorder{},
	}
	for i := range faultSeeds {
		w.seeds = append(w.seeds, faultSeedName(i))
	}
	return w
}

// createFixtures creates, through the API (so through admission), the project and its namespace, the cloud
// profile, the seeds, each seed's secret and binding, and its shoots.
func (w *faultWorld) createFixtures(ctx context.Context) {
	t := w.t
	t.Helper()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("create %s: %v", what, err)
		}
	}
	_, err := w.nsAPI.Create(ctx, &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: faultNamespace}})
	must("namespace", err)
	_, err = w.projAPI.Create(ctx, &corev1beta1.Project{Metadata: &metav1.ObjectMeta{Name: faultProject},
		Spec: &corev1beta1.ProjectSpec{Namespace: proto.String(faultNamespace)}})
	must("project", err)
	_, err = w.profAPI.Create(ctx, &corev1beta1.CloudProfile{
		Metadata: &metav1.ObjectMeta{Name: faultProfile},
		Spec: &corev1beta1.CloudProfileSpec{
			Type:       "local",
			Kubernetes: &corev1beta1.KubernetesSettings{Versions: []*corev1beta1.ExpirableVersion{{Version: "1.35.4"}}},
			MachineImages: []*corev1beta1.MachineImage{{Name: "gardenlinux", Versions: []*corev1beta1.MachineImageVersion{{
				Version: "1.0.0", Cri: []*corev1beta1.CRI{{Name: "containerd"}}, Architectures: []string{"amd64"},
			}}}},
			MachineTypes: []*corev1beta1.MachineType{{Name: "local", Cpu: "1", Gpu: "0", Memory: "1Gi"}},
			Regions:      []*corev1beta1.Region{{Name: "local"}},
		},
	})
	must("cloud profile", err)

	// Seeds, secrets, bindings and shoots, 8 creates at a time.
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
		mu   sync.Mutex
		errs []string
	)
	do := func(what string, fn func() error) {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s: %v", what, err))
				mu.Unlock()
			}
		}()
	}
	for _, seed := range w.seeds {
		do("seed "+seed, func() error {
			_, err := w.seedsAPI.Create(ctx, &corev1beta1.Seed{
				Metadata: &metav1.ObjectMeta{Name: seed},
				Spec: &corev1beta1.SeedSpec{
					Provider: &corev1beta1.SeedProvider{Type: "local", Region: "local"},
					Networks: &corev1beta1.SeedNetworks{Pods: "10.1.0.0/16", Services: "10.2.0.0/16"},
					Dns:      &corev1beta1.SeedDNS{},
				},
			})
			return err
		})
		do("secret "+credsOf(seed), func() error {
			_, err := w.secretAPI.Create(ctx, &kcorev1.Secret{Metadata: &metav1.ObjectMeta{Namespace: faultNamespace, Name: credsOf(seed)},
				Data: map[string][]byte{"token": []byte("s3cr3t-" + seed)}})
			return err
		})
	}
	wg.Wait()
	for _, seed := range w.seeds {
		do("secret binding "+credsOf(seed), func() error {
			_, err := w.bindAPI.Create(ctx, &corev1beta1.SecretBinding{
				Metadata:  &metav1.ObjectMeta{Namespace: faultNamespace, Name: credsOf(seed)},
				SecretRef: &metav1.SecretReference{Name: credsOf(seed), Namespace: faultNamespace},
				Provider:  &corev1beta1.SecretBindingProvider{Type: "local"},
			})
			return err
		})
	}
	wg.Wait()
	for _, seed := range w.seeds {
		for k := range faultShootsPerSeed {
			name := fmt.Sprintf("%s-%d", seed, k)
			do("shoot "+name, func() error {
				minimum, maximum := int32(1), int32(2)
				s, err := w.shootsAPI.Create(ctx, &corev1beta1.Shoot{
					Metadata: &metav1.ObjectMeta{Namespace: faultNamespace, Name: name, Labels: map[string]string{genLabel: "0"}},
					Spec: &corev1beta1.ShootSpec{
						CloudProfile:      &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: faultProfile},
						SeedName:          proto.String(seed),
						SecretBindingName: proto.String(credsOf(seed)),
						Region:            "local",
						Kubernetes:        &corev1beta1.Kubernetes{Version: "1.35"},
						Provider: &corev1beta1.Provider{Type: "local", Workers: []*corev1beta1.Worker{{
							Name: "pool", Minimum: &minimum, Maximum: &maximum, Machine: &corev1beta1.Machine{Type: "local"},
						}}},
					},
				})
				if err == nil {
					w.versions.record(s)
				}
				return err
			})
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		sort.Strings(errs)
		t.Fatalf("%d creates failed, first: %s", len(errs), errs[0])
	}
}

// startAgents bootstraps one agent per seed through the proxy (a bootstrap token each, created with the admin
// token) and runs them until the test ends.
func (w *faultWorld) startAgents(ctx context.Context, proxyAddr string) []*agentsim.Agent {
	t := w.t
	t.Helper()
	dialer := agentsim.Dialer{Target: proxyAddr, CA: w.caPool, Options: []grpc.DialOption{fastReconnect}}
	agents := make([]*agentsim.Agent, len(w.seeds))
	start := time.Now()
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
		mu   sync.Mutex
		errs []string
	)
	for i, seed := range w.seeds {
		rec := &recorder{seed: seed, versions: w.versions}
		w.recs[seed] = rec
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fail := func(err error) {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s: %v", seed, err))
				mu.Unlock()
			}
			tok, err := auth.NewSeedBootstrapToken(seed, time.Now().Add(time.Hour))
			if err != nil {
				fail(err)
				return
			}
			if _, err := w.secretAPI.Create(ctx, tok.SecretObject()); err != nil {
				fail(fmt.Errorf("bootstrap token secret: %w", err))
				return
			}
			bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			cert, err := agentsim.Bootstrap(bctx, dialer, tok.Token(), seed, nil, nil)
			if err != nil {
				fail(fmt.Errorf("bootstrap: %w", err))
				return
			}
			agents[i] = &agentsim.Agent{Seed: seed, Dialer: dialer, Cert: cert, HeartbeatInterval: faultHeartbeat, OnAssignment: rec.observe}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		sort.Strings(errs)
		t.Fatalf("%d agents failed to bootstrap, first: %s", len(errs), errs[0])
	}
	t.Logf("bootstrapped %d agents through the proxy in %s", len(agents), time.Since(start).Round(time.Millisecond))
	runCtx, stop := context.WithCancel(context.Background())
	var done sync.WaitGroup
	for _, a := range agents {
		done.Add(1)
		go func() { defer done.Done(); _ = a.Run(runCtx) }()
	}
	t.Cleanup(func() { stop(); done.Wait() })
	return agents
}

// hubState is the hub's objects as its API lists them.
type hubState struct {
	seeds      map[string]int64
	shoots     []*corev1beta1.Shoot
	bindings   map[string]*corev1beta1.SecretBinding // namespace/name
	secrets    map[string]int64                      // namespace/name
	profiles   map[string]int64
	namespaces map[string]*kcorev1.Namespace
	projects   map[string]int64
}

func rvOf(md *metav1.ObjectMeta) int64 {
	v, _ := strconv.ParseInt(md.GetResourceVersion(), 10, 64)
	return v
}

func nsKey(md *metav1.ObjectMeta) string {
	if md.GetNamespace() == "" {
		return md.GetName()
	}
	return md.GetNamespace() + "/" + md.GetName()
}

func (w *faultWorld) read(ctx context.Context) (*hubState, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st := &hubState{seeds: map[string]int64{}, bindings: map[string]*corev1beta1.SecretBinding{}, secrets: map[string]int64{},
		profiles: map[string]int64{}, namespaces: map[string]*kcorev1.Namespace{}, projects: map[string]int64{}}
	all := &metav1.ListRequest{}
	seeds, err := w.seedsAPI.List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list seeds: %w", err)
	}
	for _, s := range seeds.GetItems() {
		st.seeds[s.GetMetadata().GetName()] = rvOf(s.GetMetadata())
	}
	shoots, err := w.shootsAPI.List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list shoots: %w", err)
	}
	st.shoots = shoots.GetItems()
	bindings, err := w.bindAPI.List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list secret bindings: %w", err)
	}
	for _, b := range bindings.GetItems() {
		st.bindings[nsKey(b.GetMetadata())] = b
	}
	secrets, err := w.secretAPI.List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	for _, s := range secrets.GetItems() {
		st.secrets[nsKey(s.GetMetadata())] = rvOf(s.GetMetadata())
	}
	profiles, err := w.profAPI.List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list cloud profiles: %w", err)
	}
	for _, p := range profiles.GetItems() {
		st.profiles[p.GetMetadata().GetName()] = rvOf(p.GetMetadata())
	}
	nss, err := w.nsAPI.List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	for _, n := range nss.GetItems() {
		st.namespaces[n.GetMetadata().GetName()] = n
	}
	projects, err := w.projAPI.List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	for _, p := range projects.GetItems() {
		st.projects[p.GetMetadata().GetName()] = rvOf(p.GetMetadata())
	}
	return st, nil
}

// expected is what the agent of seed must hold, derived from Gardener's rules and not from the hub's seed graph:
// the Seed; shoots with spec.seedName or status.seedName = seed; each such shoot's secret binding, the binding's
// secret, the shoot's cloud profile, and the project its namespace is labelled with.
func (st *hubState) expected(seed string) map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	put := func(res, key string, rv int64) {
		if out[res] == nil {
			out[res] = map[string]int64{}
		}
		out[res][key] = rv
	}
	if rv, ok := st.seeds[seed]; ok {
		put(resSeeds, seed, rv)
	}
	for _, sh := range st.shoots {
		if sh.GetSpec().GetSeedName() != seed && sh.GetStatus().GetSeedName() != seed {
			continue
		}
		md := sh.GetMetadata()
		ns := md.GetNamespace()
		put(resShoots, nsKey(md), rvOf(md))
		if name := sh.GetSpec().GetSecretBindingName(); name != "" {
			if b, ok := st.bindings[ns+"/"+name]; ok {
				put(resBindings, ns+"/"+name, rvOf(b.GetMetadata()))
				ref := b.GetSecretRef()
				refNS := ref.GetNamespace()
				if refNS == "" {
					refNS = ns
				}
				if rv, ok := st.secrets[refNS+"/"+ref.GetName()]; ok {
					put(resSecrets, refNS+"/"+ref.GetName(), rv)
				}
			}
		}
		profile := sh.GetSpec().GetCloudProfileName()
		if cp := sh.GetSpec().GetCloudProfile(); cp.GetName() != "" && (cp.GetKind() == "" || cp.GetKind() == "CloudProfile") {
			profile = cp.GetName()
		}
		if rv, ok := st.profiles[profile]; ok {
			put(resProfiles, profile, rv)
		}
		if n, ok := st.namespaces[ns]; ok {
			if p := n.GetMetadata().GetLabels()["project.gardener.cloud/name"]; p != "" {
				if rv, ok := st.projects[p]; ok {
					put(resProjects, p, rv)
				}
			}
		}
	}
	return out
}

// diffState lists, key by key, how what an agent holds differs from what it should.
func diffState(got, want map[string]map[string]int64) []string {
	var out []string
	res := map[string]bool{}
	for r := range got {
		res[r] = true
	}
	for r := range want {
		res[r] = true
	}
	for r := range res {
		keys := map[string]bool{}
		for k := range got[r] {
			keys[k] = true
		}
		for k := range want[r] {
			keys[k] = true
		}
		for k := range keys {
			g, gok := got[r][k]
			v, wok := want[r][k]
			switch {
			case gok && !wok:
				out = append(out, fmt.Sprintf("%s %s: agent holds rv %d, the hub's API says it does not belong to the seed", r, k, g))
			case !gok && wok:
				out = append(out, fmt.Sprintf("%s %s: missing at the agent (hub rv %d)", r, k, v))
			case g != v:
				out = append(out, fmt.Sprintf("%s %s: agent holds rv %d, hub has rv %d", r, k, g, v))
			}
		}
	}
	sort.Strings(out)
	return out
}

// converge waits until every agent synced again since before (nil: at all) and holds exactly its seed's state, and
// returns how long that took since from. It fails the test with the differences after faultConverge.
func (w *faultWorld) converge(ctx context.Context, agents []*agentsim.Agent, before []int, from time.Time, what string) time.Duration {
	t := w.t
	t.Helper()
	deadline := time.Now().Add(faultConverge)
	for {
		st, err := w.read(ctx)
		var pending []string
		if err != nil {
			pending = append(pending, "read the hub's state: "+err.Error())
		} else {
			for i, a := range agents {
				if before != nil && a.Syncs() <= before[i] {
					pending = append(pending, fmt.Sprintf("agent %s: no new sync yet (syncs %d)", a.Seed, a.Syncs()))
					continue
				}
				if before == nil && a.Syncs() == 0 {
					pending = append(pending, fmt.Sprintf("agent %s: not synced yet", a.Seed))
					continue
				}
				if d := diffState(a.Snapshot(), st.expected(a.Seed)); len(d) > 0 {
					pending = append(pending, fmt.Sprintf("agent %s (syncs %d, resumed %v): %d differences: %s", a.Seed, a.Syncs(), a.Resumed(), len(d), strings.Join(d, "; ")))
				}
			}
		}
		if len(pending) == 0 {
			return time.Since(from)
		}
		if time.Now().After(deadline) {
			if len(pending) > 15 {
				pending = append(pending[:15], fmt.Sprintf("... and %d more", len(pending)-15))
			}
			t.Fatalf("not converged %s after %s:\n  %s", time.Since(from).Round(time.Millisecond), what, strings.Join(pending, "\n  "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkAll asserts that every agent holds exactly its seed's state now.
func (w *faultWorld) checkAll(ctx context.Context, agents []*agentsim.Agent, when string) {
	t := w.t
	t.Helper()
	st, err := w.read(ctx)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	for _, a := range agents {
		if d := diffState(a.Snapshot(), st.expected(a.Seed)); len(d) > 0 {
			t.Errorf("%s: agent %s differs from the hub: %s", when, a.Seed, strings.Join(d, "; "))
		}
	}
}

// ---- what agents receive ----

// versionLog records the seed of every shoot version the writer saw acknowledged (created, updated or read).
type versionLog struct {
	mu   sync.Mutex
	seed map[string]map[int64]string // namespace/name → resourceVersion → spec.seedName
}

func newVersionLog() *versionLog { return &versionLog{seed: map[string]map[int64]string{}} }

func (l *versionLog) record(s *corev1beta1.Shoot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := nsKey(s.GetMetadata())
	if l.seed[k] == nil {
		l.seed[k] = map[int64]string{}
	}
	l.seed[k][rvOf(s.GetMetadata())] = s.GetSpec().GetSeedName()
}

func (l *versionLog) lookup(key string, rv int64) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.seed[key][rv]
	return s, ok
}

// recorder checks every assignment one agent receives as it arrives (OnAssignment runs under the agent's lock, so it
// only records) and keeps the shoot versions for a check against the writer's log at the end.
type recorder struct {
	seed     string
	versions *versionLog

	mu         sync.Mutex
	received   int
	removed    int
	shoots     []seenShoot
	latest     map[string]int64 // resource + " " + key → the highest resourceVersion received
	violations []string
}

type seenShoot struct {
	key               string
	rv                int64
	spec, status      string
	at                time.Time
	secretBindingName string
}

func (r *recorder) violate(format string, args ...any) {
	if len(r.violations) < 200 {
		r.violations = append(r.violations, fmt.Sprintf(format, args...))
	}
}

func (r *recorder) observe(as *agentv1.Assignment, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.received++
	key := as.GetName()
	if as.GetNamespace() != "" {
		key = as.GetNamespace() + "/" + key
	}
	if as.GetRemoved() {
		r.removed++
		return
	}
	// Objects are never deleted here, so their versions only grow: an older state after a newer one is a stale read
	// (or a write etcd lost).
	if r.latest == nil {
		r.latest = map[string]int64{}
	}
	if last := r.latest[as.GetResource()+" "+key]; as.GetResourceVersion() < last {
		r.violate("%s %s went back from rv %d to rv %d", as.GetResource(), key, last, as.GetResourceVersion())
	} else {
		r.latest[as.GetResource()+" "+key] = as.GetResourceVersion()
	}
	msg, err := as.GetObject().UnmarshalNew()
	if err != nil {
		r.violate("%s %s rv %d: cannot decode the object: %v", as.GetResource(), key, as.GetResourceVersion(), err)
		return
	}
	obj, ok := msg.(interface{ GetMetadata() *metav1.ObjectMeta })
	if !ok {
		r.violate("%s %s: object %T has no metadata", as.GetResource(), key, msg)
		return
	}
	if md := obj.GetMetadata(); nsKey(md) != key || rvOf(md) != as.GetResourceVersion() {
		r.violate("%s %s rv %d carries object %s rv %s", as.GetResource(), key, as.GetResourceVersion(), nsKey(md), md.GetResourceVersion())
	}
	own := credsOf(r.seed)
	switch as.GetResource() {
	case resSeeds:
		if key != r.seed {
			r.violate("received Seed %s (rv %d)", key, as.GetResourceVersion())
		}
	case resShoots:
		s, ok := msg.(*corev1beta1.Shoot)
		if !ok {
			r.violate("%s %s is a %T", as.GetResource(), key, msg)
			return
		}
		spec, stat := s.GetSpec().GetSeedName(), s.GetStatus().GetSeedName()
		if spec != r.seed && stat != r.seed {
			r.violate("received shoot %s rv %d of spec.seedName %q status.seedName %q", key, as.GetResourceVersion(), spec, stat)
		}
		r.shoots = append(r.shoots, seenShoot{key: key, rv: as.GetResourceVersion(), spec: spec, status: stat, at: at,
			secretBindingName: s.GetSpec().GetSecretBindingName()})
	case resBindings, resSecrets:
		if key != faultNamespace+"/"+own {
			r.violate("received %s %s rv %d; this seed's is %s/%s", as.GetResource(), key, as.GetResourceVersion(), faultNamespace, own)
		}
	case resProfiles:
		if key != faultProfile {
			r.violate("received cloud profile %s", key)
		}
	case resProjects:
		if key != faultProject {
			r.violate("received project %s", key)
		}
	default:
		r.violate("received %s %s rv %d, a resource this world does not give seeds", as.GetResource(), key, as.GetResourceVersion())
	}
}

// checkAssignments reports every violation the recorders saw, and checks each shoot version an agent received
// against the writer's log: a version the writer saw acknowledged must have had the agent's seed.
func (w *faultWorld) checkAssignments(agents []*agentsim.Agent) {
	t := w.t
	t.Helper()
	var total, removed, shoots, verified, unknown int
	for _, a := range agents {
		r := w.recs[a.Seed]
		r.mu.Lock()
		total += r.received
		removed += r.removed
		for _, v := range r.violations {
			t.Errorf("agent %s: %s", r.seed, v)
		}
		for _, s := range r.shoots {
			shoots++
			seed, ok := w.versions.lookup(s.key, s.rv)
			if !ok {
				unknown++
				continue
			}
			verified++
			if seed != r.seed && s.status != r.seed {
				t.Errorf("agent %s received shoot %s rv %d (at %s); the writer wrote that version with spec.seedName %q",
					r.seed, s.key, s.rv, s.at.Format("15:04:05.000"), seed)
			}
			if s.secretBindingName != credsOf(s.spec) {
				t.Errorf("agent %s received shoot %s rv %d with secretBindingName %q and spec.seedName %q: the writer never pairs them so",
					r.seed, s.key, s.rv, s.secretBindingName, s.spec)
			}
		}
		r.mu.Unlock()
	}
	t.Logf("assignments received: %d (%d removals); %d shoot states, %d of them versions the writer saw acknowledged and checked against its log, %d versions it did not see (answers lost to the faults)",
		total, removed, shoots, verified, unknown)
}

// ---- the writer ----

type writerStats struct {
	relabels, moves, secrets, profiles, conflicts, failures int
	// rejected is the first change admission refused: the writer only makes valid changes, so this fails the test
	// (for instance if spec.secretBindingName became immutable, which the moves rely on).
	rejected error
}

func (s writerStats) String() string {
	return fmt.Sprintf("%d relabels, %d moves, %d secret updates, %d cloud profile updates, %d conflicts, %d failed calls",
		s.relabels, s.moves, s.secrets, s.profiles, s.conflicts, s.failures)
}

type shootWriter struct {
	w      *faultWorld
	cancel context.CancelFunc
	done   chan struct{}
	stats  writerStats
}

// startWriter changes the world until stopped: 70 % of its changes relabel a shoot, 26 % move a shoot to a random
// seed (spec.seedName and, with it, spec.secretBindingName to that seed's binding, so that a binding or secret of
// seed X reaches only X's agent), 3 % update a seed's secret and 1 % the shared cloud profile. One call at a time,
// about 130 changes a second.
func (w *faultWorld) startWriter(ctx context.Context) *shootWriter {
	ctx, cancel := context.WithCancel(ctx)
	wr := &shootWriter{w: w, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(wr.done)
		wr.run(ctx)
	}()
	return wr
}

func (wr *shootWriter) stop() writerStats {
	wr.cancel()
	<-wr.done
	return wr.stats
}

var writeGeneration atomic.Int64

func (wr *shootWriter) run(ctx context.Context) {
	w := wr.w
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	cache := map[string]*corev1beta1.Shoot{}
	call := func(fn func(ctx context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		err := fn(cctx)
		switch {
		case err == nil:
		case status.Code(err) == codes.Aborted:
			wr.stats.conflicts++
		case status.Code(err) == codes.InvalidArgument:
			wr.stats.failures++
			if wr.stats.rejected == nil {
				wr.stats.rejected = err
			}
		case ctx.Err() == nil:
			wr.stats.failures++
		}
		return err
	}
	for ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
		seed := w.seeds[rng.IntN(len(w.seeds))]
		p := rng.IntN(100)
		switch {
		case p < 3: // a seed's secret: every agent holding it gets the new version
			_ = call(func(ctx context.Context) error {
				s, err := w.secretAPI.Get(ctx, &metav1.GetRequest{Namespace: faultNamespace, Name: credsOf(seed)})
				if err != nil {
					return err
				}
				s.Data["token"] = []byte(fmt.Sprintf("s3cr3t-%s-%d", seed, writeGeneration.Add(1)))
				_, err = w.secretAPI.Update(ctx, s)
				if err == nil {
					wr.stats.secrets++
				}
				return err
			})
		case p < 4: // the shared cloud profile: every agent with a shoot gets it
			_ = call(func(ctx context.Context) error {
				cp, err := w.profAPI.Get(ctx, &metav1.GetRequest{Name: faultProfile})
				if err != nil {
					return err
				}
				if cp.Metadata.Labels == nil {
					cp.Metadata.Labels = map[string]string{}
				}
				cp.Metadata.Labels[genLabel] = strconv.FormatInt(writeGeneration.Add(1), 10)
				_, err = w.profAPI.Update(ctx, cp)
				if err == nil {
					wr.stats.profiles++
				}
				return err
			})
		default:
			name := fmt.Sprintf("%s-%d", seed, rng.IntN(faultShootsPerSeed))
			move := p < 30
			_ = call(func(ctx context.Context) error {
				cur := cache[name]
				delete(cache, name) // only an acknowledged answer is known to be current
				if cur == nil {
					s, err := w.shootsAPI.Get(ctx, &metav1.GetRequest{Namespace: faultNamespace, Name: name})
					if err != nil {
						return err
					}
					w.versions.record(s)
					cur = s
				}
				next := proto.Clone(cur).(*corev1beta1.Shoot)
				if next.Metadata.Labels == nil {
					next.Metadata.Labels = map[string]string{}
				}
				next.Metadata.Labels[genLabel] = strconv.FormatInt(writeGeneration.Add(1), 10)
				if move {
					to := w.seeds[rng.IntN(len(w.seeds))]
					next.Spec.SeedName = proto.String(to)
					next.Spec.SecretBindingName = proto.String(credsOf(to))
				}
				s, err := w.shootsAPI.Update(ctx, next)
				if err != nil {
					return err
				}
				w.versions.record(s)
				cache[name] = s
				if move {
					wr.stats.moves++
				} else {
					wr.stats.relabels++
				}
				return nil
			})
		}
	}
}
