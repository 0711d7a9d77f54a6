package e2e

// The world of TestAgentLinkSurvivesFaults: its fixtures, the hub's state as its API reports it and what each seed's
// agent must hold by Gardener's rules, the writer's log of shoot states, the recorders that check every assignment an
// agent receives, and the writer.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/hub/auth"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
	"github.com/trellis-dev/trellis/test/agentsim"
)

// faultWorld is the hub's API as the test sees it (admin gRPC clients straight to the hub), the seeds, the writer's
// log of shoot states and one assignment recorder per agent.
type faultWorld struct {
	t      *testing.T
	token  string
	caPool *x509.CertPool

	seeds     []string
	shootsAPI corev1beta1.ShootServiceClient
	seedsAPI  corev1beta1.SeedServiceClient
	bindAPI   securityv1alpha1.CredentialsBindingServiceClient
	entryAPI  corev1beta1.BackupEntryServiceClient
	profAPI   corev1beta1.CloudProfileServiceClient
	projAPI   corev1beta1.ProjectServiceClient
	secretAPI kcorev1.SecretServiceClient
	nsAPI     kcorev1.NamespaceServiceClient

	log  *shootLog
	recs map[string]*recorder // by seed
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
		bindAPI: securityv1alpha1.NewCredentialsBindingServiceClient(conn), entryAPI: corev1beta1.NewBackupEntryServiceClient(conn),
		profAPI: corev1beta1.NewCloudProfileServiceClient(conn), projAPI: corev1beta1.NewProjectServiceClient(conn),
		secretAPI: kcorev1.NewSecretServiceClient(conn), nsAPI: kcorev1.NewNamespaceServiceClient(conn),
		log: newShootLog(), recs: map[string]*recorder{},
	}
	for i := range faultSeeds {
		w.seeds = append(w.seeds, faultSeedName(i))
	}
	return w
}

// createFixtures creates, through the API (so through admission), the project and its namespace, the cloud
// profile, each seed's backup secret, the seeds (with spec.backup, which moving a shoot needs on both seeds), each
// seed's credentials secret and binding, and its shoots, each reconciled (status.seedName, last operation Create
// Succeeded, as the seed's agent reports it) and with a BackupEntry it owns.
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

	// Secrets, then seeds and bindings, then shoots, 8 at a time.
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
	secret := func(ns, name string) func() error {
		return func() error {
			_, err := w.secretAPI.Create(ctx, &kcorev1.Secret{Metadata: &metav1.ObjectMeta{Namespace: ns, Name: name},
				Data: map[string][]byte{"token": []byte("s3cr3t-" + name)}})
			return err
		}
	}
	for _, seed := range w.seeds {
		do("secret "+credsOf(seed), secret(faultNamespace, credsOf(seed)))
		do("secret "+backupOf(seed), secret(backupNamespace, backupOf(seed)))
	}
	wg.Wait()
	for _, seed := range w.seeds {
		do("seed "+seed, func() error {
			_, err := w.seedsAPI.Create(ctx, &corev1beta1.Seed{
				Metadata: &metav1.ObjectMeta{Name: seed},
				Spec: &corev1beta1.SeedSpec{
					Provider: &corev1beta1.SeedProvider{Type: "local", Region: "local"},
					Networks: &corev1beta1.SeedNetworks{Pods: "10.1.0.0/16", Services: "10.2.0.0/16"},
					Dns:      &corev1beta1.SeedDNS{},
					Backup:   agentsim.Backup(backupNamespace, backupOf(seed)),
				},
			})
			return err
		})
		do("credentials binding "+credsOf(seed), func() error {
			_, err := w.bindAPI.Create(ctx, agentsim.CredentialsBinding(faultNamespace, credsOf(seed)))
			return err
		})
	}
	wg.Wait()
	for _, seed := range w.seeds {
		for k := range faultShootsPerSeed {
			name := fmt.Sprintf("%s-%d", seed, k)
			do("shoot "+name, func() error { return w.createShoot(ctx, name, seed) })
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		sort.Strings(errs)
		t.Fatalf("%d creates failed, first: %s", len(errs), errs[0])
	}
}

// createShoot creates shoot name on seed with the seed's credentials binding, reports it reconciled there and creates
// its BackupEntry.
func (w *faultWorld) createShoot(ctx context.Context, name, seed string) error {
	key := faultNamespace + "/" + name
	minimum, maximum := int32(1), int32(2)
	a := w.log.begin(key, shootState{spec: seed, creds: credsOf(seed)})
	s, err := w.shootsAPI.Create(ctx, &corev1beta1.Shoot{
		Metadata: &metav1.ObjectMeta{Namespace: faultNamespace, Name: name, Labels: map[string]string{genLabel: "0"}},
		Spec: &corev1beta1.ShootSpec{
			CloudProfile:           &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: faultProfile},
			SeedName:               proto.String(seed),
			CredentialsBindingName: proto.String(credsOf(seed)),
			Region:                 "local",
			Kubernetes:             &corev1beta1.Kubernetes{Version: "1.35"},
			Provider: &corev1beta1.Provider{Type: "local", Workers: []*corev1beta1.Worker{{
				Name: "pool", Minimum: &minimum, Maximum: &maximum, Machine: &corev1beta1.Machine{Type: "local"},
			}}},
		},
	})
	w.log.finish(key, a, s, err)
	if err != nil {
		return err
	}
	owner := proto.Clone(s).(*corev1beta1.Shoot)
	// The hub's controllers write new shoots too (the status label): a conflict is retried on the current state.
	for attempt := 0; ; attempt++ {
		s.Status = &corev1beta1.ShootStatus{SeedName: proto.String(seed), LastOperation: operation(opCreate)}
		a = w.log.begin(key, stateOf(s))
		var out *corev1beta1.Shoot
		out, err = w.shootsAPI.UpdateStatus(ctx, s)
		w.log.finish(key, a, out, err)
		if status.Code(err) != codes.Aborted || attempt == 5 {
			break
		}
		if s, err = w.shootsAPI.Get(ctx, &metav1.GetRequest{Namespace: faultNamespace, Name: name}); err != nil {
			return fmt.Errorf("status: %w", err)
		}
		w.log.observe(s)
	}
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if _, err := w.entryAPI.Create(ctx, agentsim.BackupEntry(owner, faultBucket)); err != nil {
		return fmt.Errorf("backup entry: %w", err)
	}
	return nil
}

// Shoot operations (status.lastOperation.type) of the world, all reported Succeeded.
const (
	opCreate    = "Create"
	opRestore   = "Restore"
	opReconcile = "Reconcile"
)

func operation(typ string) *metav1.LastOperation {
	return &metav1.LastOperation{Type: typ, State: "Succeeded", Progress: proto.Int32(100), LastUpdateTime: timestamppb.Now(),
		Description: "Shoot cluster has been successfully " + strings.ToLower(typ) + "d"}
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
		rec := &recorder{seed: seed, seeds: w.seeds}
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
	seeds      map[string]*corev1beta1.Seed
	shoots     map[string]*corev1beta1.Shoot                   // namespace/name
	bindings   map[string]*securityv1alpha1.CredentialsBinding // namespace/name
	entries    []*corev1beta1.BackupEntry
	secrets    map[string]int64 // namespace/name
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
	st := &hubState{seeds: map[string]*corev1beta1.Seed{}, shoots: map[string]*corev1beta1.Shoot{},
		bindings: map[string]*securityv1alpha1.CredentialsBinding{}, secrets: map[string]int64{},
		profiles: map[string]int64{}, namespaces: map[string]*kcorev1.Namespace{}, projects: map[string]int64{}}
	all := &metav1.ListRequest{}
	seeds, err := w.seedsAPI.List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list seeds: %w", err)
	}
	for _, s := range seeds.GetItems() {
		st.seeds[s.GetMetadata().GetName()] = s
	}
	shoots, err := w.shootsAPI.List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list shoots: %w", err)
	}
	for _, s := range shoots.GetItems() {
		st.shoots[nsKey(s.GetMetadata())] = s
	}
	bindings, err := w.bindAPI.List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list credentials bindings: %w", err)
	}
	for _, b := range bindings.GetItems() {
		st.bindings[nsKey(b.GetMetadata())] = b
	}
	entries, err := w.entryAPI.List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list backup entries: %w", err)
	}
	st.entries = entries.GetItems()
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

// shootOnSeed reports whether a shoot belongs to seed by Gardener's rules: spec.seedName or status.seedName names it
// (during a control-plane migration, spec names the destination and status the source).
func shootOnSeed(sh *corev1beta1.Shoot, seed string) bool {
	return sh.GetSpec().GetSeedName() == seed || sh.GetStatus().GetSeedName() == seed
}

// ownerShoot returns the name of the core.gardener.cloud Shoot among an object's owner references ("" if none), as
// Gardener's GetShootNameFromOwnerReferences finds a BackupEntry's shoot.
func ownerShoot(md *metav1.ObjectMeta) string {
	for _, r := range md.GetOwnerReferences() {
		if group, _, _ := strings.Cut(r.GetApiVersion(), "/"); group == "core.gardener.cloud" && r.GetKind() == "Shoot" {
			return r.GetName()
		}
	}
	return ""
}

// expected is what the agent of seed must hold, derived from Gardener's rules and not from the hub's seed graph:
// the Seed and the secret of its spec.backup; shoots with spec.seedName or status.seedName = seed; each such shoot's
// credentials binding, the binding's secret, the shoot's cloud profile, and the project its
// namespace is labelled with; BackupEntries whose spec.seedName or status.seedName is seed or whose owner shoot
// belongs to seed (the destination of a migration takes over the source's entries).
func (st *hubState) expected(seed string) map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	put := func(res, key string, rv int64) {
		if out[res] == nil {
			out[res] = map[string]int64{}
		}
		out[res][key] = rv
	}
	secret := func(namespace, name string) {
		if rv, ok := st.secrets[namespace+"/"+name]; ok {
			put(resSecrets, namespace+"/"+name, rv)
		}
	}
	if s, ok := st.seeds[seed]; ok {
		put(resSeeds, seed, rvOf(s.GetMetadata()))
		if ref := s.GetSpec().GetBackup().GetCredentialsRef(); ref.GetKind() == "Secret" {
			secret(ref.GetNamespace(), ref.GetName())
		}
	}
	for _, sh := range st.shoots {
		if !shootOnSeed(sh, seed) {
			continue
		}
		md := sh.GetMetadata()
		ns := md.GetNamespace()
		put(resShoots, nsKey(md), rvOf(md))
		if name := sh.GetSpec().GetCredentialsBindingName(); name != "" {
			if b, ok := st.bindings[ns+"/"+name]; ok {
				put(resBindings, ns+"/"+name, rvOf(b.GetMetadata()))
				if ref := b.GetCredentialsRef(); ref.GetKind() == "Secret" {
					refNS := ref.GetNamespace()
					if refNS == "" {
						refNS = ns
					}
					secret(refNS, ref.GetName())
				}
			}
		}
		// The world has no SecretBindings: a shoot naming one is missing it here, and an agent receiving one fails
		// the recorder.
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
	// The entries' bucket does not exist: nothing more to follow.
	for _, e := range st.entries {
		md := e.GetMetadata()
		owner, ok := st.shoots[md.GetNamespace()+"/"+ownerShoot(md)]
		if e.GetSpec().GetSeedName() == seed || e.GetStatus().GetSeedName() == seed || ok && shootOnSeed(owner, seed) {
			put(resEntries, nsKey(md), rvOf(md))
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

// checkAll asserts that every agent holds exactly its seed's state now. The hub's own loops may still write (the
// seed lifecycle marks the shoots of a seed whose agent was away, for one), so a write can fall between the read of
// the hub and the agents' snapshots: an object counts as different only when it differs both in the agents' state
// before the read and in their state after it. A stale or lost assignment differs in both.
func (w *faultWorld) checkAll(ctx context.Context, agents []*agentsim.Agent, when string) {
	t := w.t
	t.Helper()
	before := make([]map[string]map[string]int64, len(agents))
	for i, a := range agents {
		before[i] = a.Snapshot()
	}
	st, err := w.read(ctx)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	for i, a := range agents {
		want := st.expected(a.Seed)
		earlier := map[string]bool{}
		for _, d := range diffState(before[i], want) {
			earlier[diffKey(d)] = true
		}
		var both []string
		for _, d := range diffState(a.Snapshot(), want) {
			if earlier[diffKey(d)] {
				both = append(both, d)
			}
		}
		if len(both) > 0 {
			t.Errorf("%s: agent %s differs from the hub: %s", when, a.Seed, strings.Join(both, "; "))
		}
	}
}

// diffKey is the resource and key a line of diffState is about.
func diffKey(line string) string {
	k, _, _ := strings.Cut(line, ":")
	return k
}

// ---- the writer's log ----

// shootState is what the world's rules look at in a version of a shoot.
type shootState struct {
	spec, status string // spec.seedName, status.seedName
	creds        string // spec.credentialsBindingName
	op           string // status.lastOperation.type
}

func stateOf(s *corev1beta1.Shoot) shootState {
	return shootState{spec: s.GetSpec().GetSeedName(), status: s.GetStatus().GetSeedName(),
		creds: s.GetSpec().GetCredentialsBindingName(), op: s.GetStatus().GetLastOperation().GetType()}
}

func (st shootState) String() string {
	return fmt.Sprintf("spec.seedName %q status.seedName %q credentialsBindingName %q lastOperation %q", st.spec, st.status, st.creds, st.op)
}

// on reports whether a shoot in this state belongs to seed.
func (st shootState) on(seed string) bool { return st.spec == seed || st.status == seed }

// unpaired says how a state breaks the writer's pairing of seeds and credentials ("" if it does not). A settled shoot
// (status.seedName unset or equal to spec.seedName, last operation not Restore) uses its seed's credentials; a shoot
// bound to another seed than its status names is migrating, its spec frozen, and still uses the source's. Only
// between the end of a migration (Restore) and the writer's switch of credentials may a shoot on its new seed use
// the old seed's: those versions are checked against the writer's log alone.
func (st shootState) unpaired() string {
	switch {
	case st.status != "" && st.status != st.spec:
		if st.creds != credsOf(st.status) {
			return fmt.Sprintf("migrating from %q but credentials %q are not the source's", st.status, st.creds)
		}
	case st.op != opRestore:
		if st.creds != credsOf(st.spec) {
			return fmt.Sprintf("settled on %q but credentials %q are not the seed's", st.spec, st.creds)
		}
	}
	return ""
}

// shootLog records, per shoot, the state of each version the writer saw acknowledged (created, written or read), and
// each write it attempted with when it started and when a later acknowledged state replaced it: the time in which a
// version with that state may have been current, and so sent to agents.
type shootLog struct {
	mu       sync.Mutex
	acked    map[string]map[int64]shootState // namespace/name → resourceVersion → state
	attempts map[string][]*attempt           // namespace/name → writes in order
}

// attempt is one write of a shoot.
type attempt struct {
	state      shootState
	start      time.Time
	superseded time.Time // zero while the state may still be current
}

func newShootLog() *shootLog {
	return &shootLog{acked: map[string]map[int64]shootState{}, attempts: map[string][]*attempt{}}
}

// begin records that a write of shoot key meant to leave it in state st starts now.
func (l *shootLog) begin(key string, st shootState) *attempt {
	a := &attempt{state: st, start: time.Now()}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts[key] = append(l.attempts[key], a)
	return a
}

// finish records the outcome of write a: an answer is a version (observe); a refusal means the write changed
// nothing; a lost answer (the hub unreachable, killed or slow) leaves it possible that the write took effect, so its
// state stays possible until a later answer shows another.
func (l *shootLog) finish(key string, a *attempt, s *corev1beta1.Shoot, err error) {
	if err == nil {
		l.mu.Lock()
		a.state = stateOf(s)
		l.mu.Unlock()
		l.observe(s)
		return
	}
	switch status.Code(err) {
	case codes.Aborted, codes.InvalidArgument, codes.FailedPrecondition, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.Unauthenticated:
		l.mu.Lock()
		defer l.mu.Unlock()
		list := l.attempts[key]
		for i, b := range list {
			if b == a {
				l.attempts[key] = append(list[:i:i], list[i+1:]...)
				break
			}
		}
	}
}

// observe records s, current now: every other state of the shoot is no longer current.
func (l *shootLog) observe(s *corev1beta1.Shoot) {
	now := time.Now()
	key, st := nsKey(s.GetMetadata()), stateOf(s)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.acked[key] == nil {
		l.acked[key] = map[int64]shootState{}
	}
	l.acked[key][rvOf(s.GetMetadata())] = st
	for _, a := range l.attempts[key] {
		if a.state != st && a.superseded.IsZero() {
			a.superseded = now
		}
	}
}

func (l *shootLog) lookup(key string, rv int64) (shootState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.acked[key][rv]
	return s, ok
}

// late judges something received at t that only a shoot state matching want justifies, among the shoots keys (all
// when nil): it returns how long after the last moment such a state could have been current t is (0 if one could be
// current at t), and ok false when no write started before t aimed at such a state.
func (l *shootLog) late(keys []string, want func(shootState) bool, t time.Time) (late time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if keys == nil {
		for k := range l.attempts {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		for _, a := range l.attempts[k] {
			if !want(a.state) || a.start.After(t) {
				continue
			}
			d := time.Duration(0)
			if !a.superseded.IsZero() && t.After(a.superseded) {
				d = t.Sub(a.superseded)
			}
			if !ok || d < late {
				late, ok = d, true
			}
		}
	}
	return late, ok
}

// ---- what agents receive ----

// recorder checks every assignment one agent receives as it arrives (OnAssignment runs under the agent's lock, so it
// only records) and keeps the shoot versions, the other seeds' credentials and the backup entries it received for
// checks against the writer's log at the end.
type recorder struct {
	seed  string
	seeds []string // the world's

	mu         sync.Mutex
	received   int
	removed    int
	shoots     []seenShoot
	borrowed   []reception // another seed's credentials binding or secret
	entries    []reception
	latest     map[string]int64 // resource + " " + key → the highest resourceVersion received
	violations []string
}

type seenShoot struct {
	key   string
	rv    int64
	state shootState
	at    time.Time
}

type reception struct {
	resource, key string
	rv            int64
	at            time.Time
	owner         string // the seed whose credentials these are (borrowed), the owner shoot's key (entries)
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
	md := obj.GetMetadata()
	if nsKey(md) != key || rvOf(md) != as.GetResourceVersion() {
		r.violate("%s %s rv %d carries object %s rv %s", as.GetResource(), key, as.GetResourceVersion(), nsKey(md), md.GetResourceVersion())
	}
	rec := reception{resource: as.GetResource(), key: key, rv: as.GetResourceVersion(), at: at}
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
		st := stateOf(s)
		if !st.on(r.seed) {
			r.violate("received shoot %s rv %d of %s", key, as.GetResourceVersion(), st)
		}
		if why := st.unpaired(); why != "" {
			r.violate("received shoot %s rv %d %s: the writer never writes such a version", key, as.GetResourceVersion(), why)
		}
		r.shoots = append(r.shoots, seenShoot{key: key, rv: as.GetResourceVersion(), state: st, at: at})
	case resBindings, resSecrets:
		// Its own seed's credentials and backup secret an agent may always receive; another seed's credentials only
		// while a shoot of its seed uses them (checked at the end against the writer's log); nothing else.
		from, isCreds := strings.CutPrefix(key, faultNamespace+"/"+credsOf(""))
		switch {
		case key == faultNamespace+"/"+credsOf(r.seed):
		case as.GetResource() == resSecrets && key == backupNamespace+"/"+backupOf(r.seed):
		case isCreds && slices.Contains(r.seeds, from):
			rec.owner = from
			r.borrowed = append(r.borrowed, rec)
		default:
			r.violate("received %s %s rv %d; this seed's are %s/%s and %s/%s", as.GetResource(), key, as.GetResourceVersion(),
				faultNamespace, credsOf(r.seed), backupNamespace, backupOf(r.seed))
		}
	case resEntries:
		owner := ownerShoot(md)
		if md.GetNamespace() != faultNamespace || owner == "" {
			r.violate("received backup entry %s rv %d (owner shoot %q); the world's are in %s and owned by shoots", key, as.GetResourceVersion(), owner, faultNamespace)
			return
		}
		rec.owner = faultNamespace + "/" + owner
		r.entries = append(r.entries, rec)
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

// checkAssignments reports every violation the recorders saw and checks what agents received against the writer's
// log: each shoot version the writer saw acknowledged must have the state it logged; another seed's credentials
// (binding or secret) may reach an agent only while a shoot of its seed uses them, and a backup entry only while its
// owner shoot belongs to the agent's seed. "While" is from the start of the write that made it so until the answer
// to the write that ended it, plus faultLateness for the hub's watch, queue and an agent slowed by the machine: an
// object sent to a seed it never belonged to, or long after it left, is a leak.
func (w *faultWorld) checkAssignments(agents []*agentsim.Agent) {
	t := w.t
	t.Helper()
	var total, removed, shoots, verified, unknown, borrowed, entries int
	var maxLate time.Duration
	judge := func(r *recorder, what string, rec reception, keys []string, want func(shootState) bool) {
		late, ok := w.log.late(keys, want, rec.at)
		switch {
		case !ok:
			t.Errorf("agent %s received %s %s rv %d at %s; no shoot was ever written so that the seed needs it", r.seed, what, rec.key, rec.rv, rec.at.Format("15:04:05.000"))
		case late > faultLateness:
			t.Errorf("agent %s received %s %s rv %d at %s, %s after the last shoot that needed it there changed", r.seed, what, rec.key, rec.rv, rec.at.Format("15:04:05.000"), late.Round(time.Millisecond))
		case late > maxLate:
			maxLate = late
		}
	}
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
			st, ok := w.log.lookup(s.key, s.rv)
			if !ok {
				unknown++
				continue
			}
			verified++
			if st != s.state {
				t.Errorf("agent %s received shoot %s rv %d (at %s) with %s; the writer saw that version with %s",
					r.seed, s.key, s.rv, s.at.Format("15:04:05.000"), s.state, st)
			}
		}
		for _, rec := range r.borrowed {
			borrowed++
			judge(r, rec.resource+" of seed "+rec.owner, rec, nil, func(st shootState) bool {
				return st.on(r.seed) && st.creds == credsOf(rec.owner)
			})
		}
		for _, rec := range r.entries {
			entries++
			judge(r, "backup entry", rec, []string{rec.owner}, func(st shootState) bool { return st.on(r.seed) })
		}
		r.mu.Unlock()
	}
	t.Logf("assignments received: %d (%d removals); %d shoot states, %d of them versions the writer saw acknowledged and checked against its log, %d versions it did not see (answers lost to the faults); %d of another seed's credentials and %d backup entries checked against the shoots' history (latest %s after the shoot that needed them changed)",
		total, removed, shoots, verified, unknown, borrowed, entries, maxLate.Round(time.Millisecond))
}

// ---- the writer ----

type writerStats struct {
	relabels, conflicts, failures, secrets, profiles int
	// The steps of moving a shoot: bound to another seed, restored there, credentials switched, reconciled.
	binds, restores, switches, reconciles int
	// rejected is the first change admission refused: the writer only makes valid changes, so this fails the test
	// (for instance if a migration step became invalid in the state the writer makes it in).
	rejected error
}

func (s writerStats) String() string {
	return fmt.Sprintf("%d relabels, moves: %d binds, %d restores, %d credential switches, %d reconciles; %d secret updates, %d cloud profile updates, %d conflicts, %d failed calls",
		s.relabels, s.binds, s.restores, s.switches, s.reconciles, s.secrets, s.profiles, s.conflicts, s.failures)
}

type shootWriter struct {
	w      *faultWorld
	cancel context.CancelFunc
	done   chan struct{}
	stats  writerStats
	rng    *rand.Rand
	// cache holds each shoot as the hub last answered; a shoot whose write got no answer is read again.
	cache map[string]*corev1beta1.Shoot
}

// startWriter changes the world until stopped: 70 % of its changes relabel a shoot, 26 % advance a shoot's move to
// another seed by up to four steps, 3 % update a seed's credentials or backup secret and 1 % the shared cloud
// profile. One call at a time, about 130 changes a second.
//
// A move goes as a control-plane migration does, since spec.seedName changes only through the binding subresource and
// the spec is frozen while the shoot migrates: (1) bind the shoot to another seed (spec.seedName; status.seedName
// still names the source, so the shoot belongs to both), (2) as the agents would at the end of the migration, set
// status.seedName to the destination with last operation Restore Succeeded, (3) switch spec.credentialsBindingName to
// the destination's binding, (4) report a reconcile. A move stops after any step with a chance of one in four (the
// next one for the shoot carries on), so shoots stay mid-move across faults. The credentials of seed X thus reach
// another seed's agent only while a shoot moves between the two.
func (w *faultWorld) startWriter(ctx context.Context) *shootWriter {
	ctx, cancel := context.WithCancel(ctx)
	wr := &shootWriter{w: w, cancel: cancel, done: make(chan struct{}), cache: map[string]*corev1beta1.Shoot{},
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))}
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

// callTimeout bounds each of the writer's calls.
const callTimeout = 2 * time.Second

// count classifies a call's error in the stats and returns it.
func (wr *shootWriter) count(ctx context.Context, err error) error {
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

func (wr *shootWriter) run(ctx context.Context) {
	w := wr.w
	call := func(fn func(ctx context.Context) error) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_ = wr.count(ctx, fn(cctx))
	}
	for ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
		seed := w.seeds[wr.rng.IntN(len(w.seeds))]
		p := wr.rng.IntN(100)
		switch {
		case p < 3: // a seed's secret: every agent holding it gets the new version
			ns, name := faultNamespace, credsOf(seed)
			if p < 1 {
				ns, name = backupNamespace, backupOf(seed)
			}
			call(func(ctx context.Context) error {
				s, err := w.secretAPI.Get(ctx, &metav1.GetRequest{Namespace: ns, Name: name})
				if err != nil {
					return err
				}
				s.Data["token"] = []byte(fmt.Sprintf("s3cr3t-%s-%d", name, writeGeneration.Add(1)))
				_, err = w.secretAPI.Update(ctx, s)
				if err == nil {
					wr.stats.secrets++
				}
				return err
			})
		case p < 4: // the shared cloud profile: every agent with a shoot gets it
			call(func(ctx context.Context) error {
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
		case p < 30:
			wr.move(ctx, fmt.Sprintf("%s-%d", seed, wr.rng.IntN(faultShootsPerSeed)))
		default:
			name := fmt.Sprintf("%s-%d", seed, wr.rng.IntN(faultShootsPerSeed))
			cur, err := wr.current(ctx, name)
			if err != nil {
				continue
			}
			next := relabelled(cur)
			if wr.write(ctx, cur, stateOf(cur), func(ctx context.Context) (*corev1beta1.Shoot, error) { return w.shootsAPI.Update(ctx, next) }) == nil {
				wr.stats.relabels++
			}
		}
	}
}

func relabelled(s *corev1beta1.Shoot) *corev1beta1.Shoot {
	next := proto.Clone(s).(*corev1beta1.Shoot)
	if next.Metadata.Labels == nil {
		next.Metadata.Labels = map[string]string{}
	}
	next.Metadata.Labels[genLabel] = strconv.FormatInt(writeGeneration.Add(1), 10)
	return next
}

// current returns shoot name as the hub last answered, reading it when that is not known.
func (wr *shootWriter) current(ctx context.Context, name string) (*corev1beta1.Shoot, error) {
	if s := wr.cache[name]; s != nil {
		return s, nil
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	s, err := wr.w.shootsAPI.Get(cctx, &metav1.GetRequest{Namespace: faultNamespace, Name: name})
	if err != nil {
		return nil, wr.count(ctx, err)
	}
	wr.w.log.observe(s)
	wr.cache[name] = s
	return s, nil
}

// write makes one write of shoot cur (do sends the request, whose resourceVersion is cur's) meant to leave the shoot
// in state want, and logs it; the answer becomes the shoot's known state.
func (wr *shootWriter) write(ctx context.Context, cur *corev1beta1.Shoot, want shootState, do func(context.Context) (*corev1beta1.Shoot, error)) error {
	name, key := cur.GetMetadata().GetName(), nsKey(cur.GetMetadata())
	delete(wr.cache, name) // only an acknowledged answer is known to be current
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	a := wr.w.log.begin(key, want)
	s, err := do(cctx)
	if status.Code(err) == codes.InvalidArgument {
		err = wr.stale(ctx, cur, err)
	}
	wr.w.log.finish(key, a, s, err)
	if err == nil {
		wr.cache[name] = s
	}
	return wr.count(ctx, err)
}

// stale turns the refusal of a write prepared on an outdated state into a conflict: admission judges a write against
// the current state before the store checks its resourceVersion, so a write prepared on a state that a write whose
// answer was lost (and which took effect late) had already changed is refused as invalid rather than as a conflict.
func (wr *shootWriter) stale(ctx context.Context, cur *corev1beta1.Shoot, err error) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	md := cur.GetMetadata()
	s, gerr := wr.w.shootsAPI.Get(cctx, &metav1.GetRequest{Namespace: md.GetNamespace(), Name: md.GetName()})
	if gerr != nil || s.GetMetadata().GetResourceVersion() == md.GetResourceVersion() {
		return err
	}
	wr.w.log.observe(s)
	wr.cache[md.GetName()] = s
	return status.Errorf(codes.Aborted, "written on the outdated rv %s (now %s): %v", md.GetResourceVersion(), s.GetMetadata().GetResourceVersion(), err)
}

// move advances the move of shoot name to another seed by one step, and by each further one with a chance of three
// in four, up to the end of the move; it carries on from wherever the shoot stands.
func (wr *shootWriter) move(ctx context.Context, name string) {
	shoots := wr.w.shootsAPI
	for ctx.Err() == nil {
		cur, err := wr.current(ctx, name)
		if err != nil {
			return
		}
		st, want := stateOf(cur), stateOf(cur)
		next := proto.Clone(cur).(*corev1beta1.Shoot)
		if next.Status == nil {
			next.Status = &corev1beta1.ShootStatus{}
		}
		var (
			counter *int
			do      func(context.Context) (*corev1beta1.Shoot, error)
		)
		switch {
		case st.status != st.spec: // (2) the destination restored the control plane
			next.Status.SeedName = proto.String(st.spec)
			next.Status.LastOperation = operation(opRestore)
			want.status, want.op, counter = st.spec, opRestore, &wr.stats.restores
			do = func(ctx context.Context) (*corev1beta1.Shoot, error) { return shoots.UpdateStatus(ctx, next) }
		case st.op == opRestore && st.creds != credsOf(st.spec): // (3) the destination's credentials
			next = relabelled(next)
			next.Spec.CredentialsBindingName = proto.String(credsOf(st.spec))
			want.creds, counter = credsOf(st.spec), &wr.stats.switches
			do = func(ctx context.Context) (*corev1beta1.Shoot, error) { return shoots.Update(ctx, next) }
		case st.op == opRestore: // (4) the change reconciled
			next.Status.LastOperation = operation(opReconcile)
			want.op, counter = opReconcile, &wr.stats.reconciles
			do = func(ctx context.Context) (*corev1beta1.Shoot, error) { return shoots.UpdateStatus(ctx, next) }
		default: // (1) bound to another seed
			seeds := wr.w.seeds
			to := seeds[wr.rng.IntN(len(seeds)-1)]
			if to == st.spec {
				to = seeds[len(seeds)-1]
			}
			next.Spec.SeedName = proto.String(to)
			want.spec, counter = to, &wr.stats.binds
			do = func(ctx context.Context) (*corev1beta1.Shoot, error) { return shoots.UpdateBinding(ctx, next) }
		}
		if wr.write(ctx, cur, want, do) != nil {
			return
		}
		*counter++
		if counter == &wr.stats.reconciles || wr.rng.IntN(4) == 0 {
			return
		}
	}
}
