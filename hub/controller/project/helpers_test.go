package project

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// env is the hub's real store and collections, a fake clock and the reconcilers, called directly by table tests.
type env struct {
	t   *testing.T
	ctx context.Context
	c   *collections
	clk *clocktesting.FakeClock
	rec *controller.Recorder
}

// newEnv starts the fake clock at the real now: the store stamps creation timestamps with the real time, so tests
// set the clock relative to an object's creation.
func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := t.Context()
	c, err := openCollections(controllertest.NewRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	return &env{t: t, ctx: ctx, c: c, clk: clk,
		rec: &controller.Recorder{Events: c.events, Component: "project-controller", Clock: clk}}
}

func (e *env) main() *projectReconciler {
	return &projectReconciler{c: e.c, rec: e.rec, log: slog.New(slog.DiscardHandler)}
}

func (e *env) stale(cfg staleConfig) *staleReconciler {
	return &staleReconciler{c: e.c, cfg: cfg, clock: e.clk, log: slog.New(slog.DiscardHandler)}
}

func (e *env) project(name string) *corev1beta1.Project {
	e.t.Helper()
	return controllertest.Get[*corev1beta1.Project](e.t, e.c.projects, "", name)
}

func (e *env) namespace(name string) *kcorev1.Namespace {
	e.t.Helper()
	return controllertest.Get[*kcorev1.Namespace](e.t, e.c.namespaces, "", name)
}

// events returns "type reason: message" of the events recorded about the project.
func (e *env) events(project string) []string {
	e.t.Helper()
	var out []string
	for _, ev := range controllertest.Events(e.t, e.c.events, "default", project, "") {
		if ev.GetInvolvedObject().GetKind() == "Project" {
			out = append(out, ev.GetType()+" "+ev.GetReason()+": "+ev.GetMessage())
		}
	}
	slices.Sort(out)
	return out
}

func newProject(name string, mutate ...func(*corev1beta1.Project)) *corev1beta1.Project {
	p := &corev1beta1.Project{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Project",
		Metadata: &metav1.ObjectMeta{Name: name},
		Spec:     &corev1beta1.ProjectSpec{Namespace: proto.String("garden-" + name)}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func newNamespace(name string, labels, annotations map[string]string) *kcorev1.Namespace {
	return &kcorev1.Namespace{ApiVersion: "v1", Kind: "Namespace",
		Metadata: &metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
}

func projectLabels(name string) map[string]string {
	return map[string]string{LabelRole: RoleProject, LabelProjectName: name}
}

func newShoot(namespace, name string, mutate ...func(*corev1beta1.Shoot)) *corev1beta1.Shoot {
	s := &corev1beta1.Shoot{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot",
		Metadata: &metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:     &corev1beta1.ShootSpec{Region: "r", Provider: &corev1beta1.Provider{Type: "local"}}}
	for _, m := range mutate {
		if m != nil {
			m(s)
		}
	}
	return s
}

func newSecret(namespace, name string, labels map[string]string) *kcorev1.Secret {
	return &kcorev1.Secret{ApiVersion: "v1", Kind: "Secret", Metadata: &metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Data: map[string][]byte{"k": []byte("v")}}
}

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func withFinalizers(fs ...string) func(store.Object) {
	return func(o store.Object) { o.GetMetadata().Finalizers = fs }
}

// readyProject creates a project and reconciles it to Ready, with its namespace.
func (e *env) readyProject(name string, mutate ...func(*corev1beta1.Project)) *corev1beta1.Project {
	e.t.Helper()
	controllertest.Create(e.t, e.c.projects, newProject(name, mutate...))
	if _, err := e.main().Reconcile(e.ctx, controller.Key{Name: name}); err != nil {
		e.t.Fatal(err)
	}
	p := e.project(name)
	if p.GetStatus().GetPhase() != PhaseReady {
		e.t.Fatalf("project %s: phase %q, want Ready", name, p.GetStatus().GetPhase())
	}
	return p
}
