package project_test

import (
	"context"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/componentconfig"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/controller/project"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

const day = 24 * time.Hour

// garden is the hub's real store and registry, served over in-memory gRPC with the hub's error mapping, with the
// project controllers running on a fake clock.
type garden struct {
	t        *testing.T
	reg      *api.Registry
	clk      *clocktesting.FakeClock
	conn     *grpc.ClientConn
	projects corev1beta1.ProjectServiceClient
	secrets  kcorev1.SecretServiceClient
	stop     func()
}

func newGarden(t *testing.T, cfg project.Config, quotas []componentconfig.QuotaConfiguration) *garden {
	t.Helper()
	st := storetest.NewStore(t)
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		return resp, api.ToGRPC(err)
	}))
	q, err := admission.NewProjectQuotas(quotas)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := api.NewRegistry(t.Context(), api.Config{Store: st, Services: srv, Admission: admission.Builtin(), CreateQuota: q})
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	g := &garden{t: t, reg: reg, clk: clocktesting.NewFakeClock(time.Now()), conn: conn,
		projects: corev1beta1.NewProjectServiceClient(conn), secrets: kcorev1.NewSecretServiceClient(conn)}
	g.start(cfg)
	return g
}

// start runs the controllers with cfg (on the garden's registry and clock) until the test ends or g.stop.
func (g *garden) start(cfg project.Config) {
	g.t.Helper()
	cfg.Source, cfg.Clock, cfg.Log = g.reg, g.clk, storetest.Logger(g.t)
	cs, err := project.New(cfg)
	if err != nil {
		g.t.Fatal(err)
	}
	g.stop = controllertest.Start(g.t, cs)
}

func (g *garden) coll(group, resource string) *store.Collection {
	g.t.Helper()
	return controllertest.Collection(g.t, g.reg, group, resource)
}

func (g *garden) project(name string) *corev1beta1.Project {
	g.t.Helper()
	return controllertest.Get[*corev1beta1.Project](g.t, g.coll("core.gardener.cloud", "projects"), "", name)
}

func (g *garden) namespace(name string) *kcorev1.Namespace {
	g.t.Helper()
	return controllertest.Get[*kcorev1.Namespace](g.t, g.coll("", "namespaces"), "", name)
}

func (g *garden) phase(name string) string { return g.project(name).GetStatus().GetPhase() }

// event returns the message of the project's event with reason, or "".
func (g *garden) event(projectName, reason string) string {
	g.t.Helper()
	if evs := controllertest.Events(g.t, g.coll("", "events"), "default", projectName, reason); len(evs) > 0 {
		return evs[0].GetMessage()
	}
	return ""
}

// createProject creates a project through the API, as a user does (admission defaults spec.namespace).
func (g *garden) createProject(name string, mutate ...func(*corev1beta1.Project)) {
	g.t.Helper()
	p := &corev1beta1.Project{Metadata: &metav1.ObjectMeta{Name: name}}
	for _, m := range mutate {
		m(p)
	}
	if _, err := g.projects.Create(context.Background(), p); err != nil {
		g.t.Fatal(err)
	}
}

// deleteProject confirms and deletes the project through the API.
func (g *garden) deleteProject(name string) {
	g.t.Helper()
	controllertest.Update(g.t, g.coll("core.gardener.cloud", "projects"), "", name, false, func(cur store.Object) {
		cur.GetMetadata().Annotations = map[string]string{project.AnnotationConfirmDeletion: "true"}
	})
	if _, err := g.projects.Delete(context.Background(), &metav1.DeleteRequest{Name: name}); err != nil {
		g.t.Fatal(err)
	}
}

func shoot(namespace, name string) *corev1beta1.Shoot {
	return &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: &corev1beta1.ShootSpec{Region: "r", Provider: &corev1beta1.Provider{Type: "local"}}}
}

func secret(namespace, name string) *kcorev1.Secret {
	return &kcorev1.Secret{Metadata: &metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string][]byte{"k": []byte("v")}}
}

// TestNamespaceCreatedAndRefused: a new project gets its namespace garden-<name>, labelled and annotated as
// Gardener does, and turns Ready; a project pointing at an unlabelled namespace is Failed with an event saying why,
// until the namespace carries the project's labels.
func TestNamespaceCreatedAndRefused(t *testing.T) {
	g := newGarden(t, project.Config{}, nil)
	g.createProject("dev")
	controllertest.Eventually(t, "project dev Ready", func() bool { return g.phase("dev") == project.PhaseReady })
	p, ns := g.project("dev"), g.namespace("garden-dev")
	if ns == nil {
		t.Fatal("no namespace garden-dev")
	}
	wantLabels := map[string]string{project.LabelRole: project.RoleProject, project.LabelProjectName: "dev"}
	if !maps.Equal(ns.GetMetadata().GetLabels(), wantLabels) || ns.GetMetadata().GetAnnotations()[project.AnnotationNamespaceProject] != p.GetMetadata().GetUid() ||
		ns.GetMetadata().GetAnnotations()[project.AnnotationCreatedByProjectController] != "true" {
		t.Fatalf("namespace metadata %v", ns.GetMetadata())
	}
	if !slices.Contains(p.GetMetadata().GetFinalizers(), project.FinalizerGardener) || p.GetStatus().GetObservedGeneration() != p.GetMetadata().GetGeneration() {
		t.Fatalf("project %v", p)
	}
	if msg := g.event("dev", project.ReasonNamespaceReconcileSuccessful); msg != `Successfully reconciled namespace "garden-dev" for project` {
		t.Fatalf("event %q", msg)
	}

	controllertest.Create(t, g.coll("", "namespaces"), &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: "team-a"}})
	g.createProject("team", func(p *corev1beta1.Project) { p.Spec = &corev1beta1.ProjectSpec{Namespace: proto.String("team-a")} })
	controllertest.Eventually(t, "project team Failed", func() bool { return g.phase("team") == project.PhaseFailed })
	want := `namespace "team-a" cannot be used as it needs the project labels map[string]string{"gardener.cloud/role":"project", "project.gardener.cloud/name":"team"}`
	if msg := g.event("team", project.ReasonNamespaceReconcileFailed); msg != want {
		t.Fatalf("event %q, want %q", msg, want)
	}
	if ns := g.namespace("team-a"); len(ns.GetMetadata().GetLabels())+len(ns.GetMetadata().GetAnnotations()) != 0 {
		t.Fatalf("the refused namespace was changed: %v", ns.GetMetadata())
	}
	// Labelled by its owner, it is adopted (and kept when the project goes).
	controllertest.Update(t, g.coll("", "namespaces"), "", "team-a", false, func(cur store.Object) {
		cur.GetMetadata().Labels = map[string]string{project.LabelRole: project.RoleProject, project.LabelProjectName: "team"}
	})
	controllertest.Eventually(t, "project team Ready", func() bool { return g.phase("team") == project.PhaseReady })
	if ann := g.namespace("team-a").GetMetadata().GetAnnotations(); ann[project.AnnotationKeepAfterProjectDeletion] != "true" {
		t.Fatalf("adopted namespace annotations %v", ann)
	}
	g.deleteProject("team")
	controllertest.Eventually(t, "project team gone", func() bool { return g.project("team") == nil })
	if ns := g.namespace("team-a"); ns == nil || len(ns.GetMetadata().GetLabels()) != 0 {
		t.Fatalf("adopted namespace after the project's deletion: %v", ns)
	}
}

// TestDeletionWaitsForShoots: a project's deletion waits while its namespace holds shoots; then the namespace is
// Terminating (the API refuses new content), its content is deleted, and namespace and project go.
func TestDeletionWaitsForShoots(t *testing.T) {
	g := newGarden(t, project.Config{}, nil)
	g.createProject("dev")
	controllertest.Eventually(t, "project dev Ready", func() bool { return g.phase("dev") == project.PhaseReady })
	controllertest.Create(t, g.coll("core.gardener.cloud", "shoots"), shoot("garden-dev", "s1"))
	controllertest.Create(t, g.coll("", "secrets"), secret("garden-dev", "creds"))
	held := &kcorev1.ConfigMap{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "held", Finalizers: []string{"example.com/keep"}}}
	controllertest.Create(t, g.coll("", "configmaps"), held)

	g.deleteProject("dev")
	controllertest.Eventually(t, "project dev Terminating", func() bool { return g.phase("dev") == project.PhaseTerminating })
	if msg := g.event("dev", project.ReasonNamespaceNotEmpty); msg != `Cannot release namespace "garden-dev" because it still contains Shoots` {
		t.Fatalf("event %q", msg)
	}
	controllertest.Consistently(t, "the namespace and its content while a shoot is there", time.Second, func() bool {
		ns := g.namespace("garden-dev")
		_, err := g.coll("", "secrets").Get(context.Background(), "garden-dev", "creds")
		return ns != nil && ns.GetMetadata().GetDeletionTimestamp() == nil && err == nil && g.project("dev") != nil
	})

	controllertest.Delete(t, g.coll("core.gardener.cloud", "shoots"), "garden-dev", "s1")
	controllertest.Eventually(t, "the namespace Terminating, emptied but for the held config map", func() bool {
		ns := g.namespace("garden-dev")
		_, err := g.coll("", "secrets").Get(context.Background(), "garden-dev", "creds")
		return ns != nil && ns.GetMetadata().GetDeletionTimestamp() != nil && apierrors.IsNotFound(err)
	})
	_, err := g.secrets.Create(context.Background(), secret("garden-dev", "late"))
	if st, _ := status.FromError(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "because it is being terminated") {
		t.Fatalf("create in the terminating namespace: %v", err)
	}
	if g.project("dev") == nil {
		t.Fatal("the project went before its namespace")
	}
	// The finalizer goes; the project controller looks again after a minute.
	controllertest.Update(t, g.coll("", "configmaps"), "garden-dev", "held", false, func(cur store.Object) {
		cur.GetMetadata().Finalizers = nil
	})
	controllertest.StepUntil(t, g.clk, "the namespace and the project gone", time.Minute, func() bool { return g.namespace("garden-dev") == nil && g.project("dev") == nil })
}

// TestStaleAutoDelete: an unused project becomes stale after the minimum lifetime, gets its auto-delete time after
// the grace period, keeps it when the hub restarts with a shorter staleExpirationTimeDays, and is deleted (its
// namespace with it) once that time has passed; the stale sync period drives all of it on the fake clock.
func TestStaleAutoDelete(t *testing.T) {
	cfg := project.Config{MinimumLifetimeDays: 30, StaleGracePeriodDays: 14, StaleExpirationTimeDays: 90, StaleSyncPeriod: 12 * time.Hour}
	g := newGarden(t, cfg, nil)
	g.createProject("dev")
	controllertest.Eventually(t, "project dev Ready", func() bool { return g.phase("dev") == project.PhaseReady })
	created := g.project("dev").GetMetadata().GetCreationTimestamp().AsTime()
	current := func() *corev1beta1.ProjectStatus { return g.project("dev").GetStatus() }

	// Steps longer than the sync period fire the one timer the stale controller has per project, as often.
	controllertest.StepUntil(t, g.clk, "stale", 2*day, func() bool { return current().GetStaleSinceTimestamp() != nil })
	since := current().GetStaleSinceTimestamp().AsTime()
	if since.Before(created.Add(30 * day)) {
		t.Fatalf("stale since %v, before the minimum lifetime from %v", since, created)
	}
	if current().GetStaleAutoDeleteTimestamp() != nil {
		t.Fatal("an auto-delete time within the grace period")
	}
	controllertest.StepUntil(t, g.clk, "an auto-delete time", day, func() bool { return current().GetStaleAutoDeleteTimestamp() != nil })
	autoDelete := current().GetStaleAutoDeleteTimestamp().AsTime()
	if !autoDelete.Equal(since.Add(90*day)) || g.clk.Now().Before(since.Add(14*day)) {
		t.Fatalf("auto-delete %v at %v, want stale since (%v) + 90 days, after the grace period", autoDelete, g.clk.Now(), since)
	}

	// The hub restarts with staleExpirationTimeDays 30: since + 30 days passes, nothing moves, nothing is deleted.
	g.stop()
	cfg.StaleExpirationTimeDays = 30
	g.start(cfg)
	controllertest.StepUntil(t, g.clk, "since + 30 days", 12*time.Hour, func() bool { return g.clk.Now().After(since.Add(31 * day)) })
	controllertest.Consistently(t, "the assigned auto-delete time", 500*time.Millisecond, func() bool {
		st := current()
		return st.GetStaleAutoDeleteTimestamp().AsTime().Equal(autoDelete) && g.project("dev").GetMetadata().GetDeletionTimestamp() == nil
	})

	controllertest.StepUntil(t, g.clk, "the project deleted with its namespace", 2*day, func() bool {
		return g.project("dev") == nil && g.namespace("garden-dev") == nil
	})
	if g.clk.Now().Before(autoDelete) {
		t.Fatalf("deleted at %v, before its auto-delete time %v", g.clk.Now(), autoDelete)
	}
}

// TestActivityAndSkip: a shoot created in the namespace is activity (lastActivityTimestamp), which keeps the project
// from being stale for the minimum lifetime; the skip annotation keeps it from ever being stale.
func TestActivityAndSkip(t *testing.T) {
	g := newGarden(t, project.Config{}, nil)
	g.createProject("dev")
	controllertest.Eventually(t, "project dev Ready", func() bool { return g.phase("dev") == project.PhaseReady })
	if la := g.project("dev").GetStatus().GetLastActivityTimestamp(); la != nil {
		t.Fatalf("activity %v without any", la)
	}
	g.clk.Step(40 * day)
	// Created "now" on the real clock, i.e. 40 days before the fake now: not new. Only the spec change counts.
	controllertest.Create(t, g.coll("core.gardener.cloud", "shoots"), shoot("garden-dev", "s1"))
	controllertest.Consistently(t, "no activity from an old object first seen", 300*time.Millisecond, func() bool {
		return g.project("dev").GetStatus().GetLastActivityTimestamp() == nil
	})
	controllertest.Update(t, g.coll("core.gardener.cloud", "shoots"), "garden-dev", "s1", false, func(s *corev1beta1.Shoot) {
		s.Spec.Region = "other"
	})
	now := g.clk.Now().UTC().Truncate(time.Second)
	controllertest.Eventually(t, "lastActivityTimestamp", func() bool {
		la := g.project("dev").GetStatus().GetLastActivityTimestamp()
		return la != nil && la.AsTime().Equal(now)
	})

	controllertest.Delete(t, g.coll("core.gardener.cloud", "shoots"), "garden-dev", "s1")
	controllertest.Update(t, g.coll("", "namespaces"), "", "garden-dev", false, func(cur store.Object) {
		cur.GetMetadata().Annotations[project.AnnotationSkipStaleCheck] = "true"
	})
	// Far beyond every period: never stale.
	for range 5 {
		g.clk.Step(100 * day)
		time.Sleep(50 * time.Millisecond)
	}
	controllertest.Consistently(t, "not stale", 300*time.Millisecond, func() bool { return g.project("dev").GetStatus().GetStaleSinceTimestamp() == nil })
}

// TestQuotaRefusal: the default quota of a project limits the secrets created in its namespace through the API;
// the refusal is kube-apiserver's: 403 Forbidden with the quota's usage.
func TestQuotaRefusal(t *testing.T) {
	quotas := []componentconfig.QuotaConfiguration{{ProjectSelector: &kmetav1.LabelSelector{},
		Config: componentconfig.ResourceQuota{Spec: componentconfig.ResourceQuotaSpec{Hard: map[string]string{
			"count/secrets": "2", "count/shoots.core.gardener.cloud": "10", "count/secretbindings.core.gardener.cloud": "10"}}}}}
	g := newGarden(t, project.Config{}, quotas)
	g.createProject("dev")
	controllertest.Eventually(t, "project dev Ready", func() bool { return g.phase("dev") == project.PhaseReady })
	for _, n := range []string{"a", "b"} {
		if _, err := g.secrets.Create(context.Background(), secret("garden-dev", n)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := g.secrets.Create(context.Background(), secret("garden-dev", "c"))
	st := gateway.StatusOf(err)
	want := `secrets "c" is forbidden: exceeded quota: gardener, requested: count/secrets=1, used: count/secrets=2, limited: count/secrets=2`
	if grpcCode := status.Code(err); grpcCode != codes.PermissionDenied || st.GetCode() != 403 || st.GetReason() != "Forbidden" || st.GetMessage() != want {
		t.Fatalf("third secret: code %s, status %v\nwant 403 Forbidden %q", grpcCode, st, want)
	}
	// Other namespaces have no project quota.
	controllertest.Create(t, g.coll("", "namespaces"), &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: "garden"}})
	for _, n := range []string{"a", "b", "c"} {
		if _, err := g.secrets.Create(context.Background(), secret("garden", n)); err != nil {
			t.Fatalf("a secret outside a project namespace: %v", err)
		}
	}
	// Deleting one makes room.
	if _, err := g.secrets.Delete(context.Background(), &metav1.DeleteRequest{Namespace: "garden-dev", Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.secrets.Create(context.Background(), secret("garden-dev", "c")); err != nil {
		t.Fatal(err)
	}
}
