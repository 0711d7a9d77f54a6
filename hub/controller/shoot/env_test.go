package shoot

import (
	"log/slog"
	"os"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// env is the real store behind the hub's API registry, with the controllers' collections and a fake clock, for
// calling reconcilers directly.
type env struct {
	t     *testing.T
	reg   *api.Registry
	c     *collections
	clock *clocktesting.FakeClock
}

func newEnv(t *testing.T, now time.Time) *env {
	t.Helper()
	reg := controllertest.NewRegistry(t)
	c, err := openCollections(reg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, reg: reg, c: c, clock: clocktesting.NewFakeClock(now)}
}

func testLog() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func (e *env) recorder() *controller.Recorder {
	return &controller.Recorder{Events: e.c.events, Component: eventComponent, Clock: e.clock}
}

// createShoot creates s and, when it has a status, writes that too.
func (e *env) createShoot(s *corev1beta1.Shoot) *corev1beta1.Shoot {
	e.t.Helper()
	out := controllertest.Create(e.t, e.c.shoots, s)
	if s.Status != nil {
		out.Status = s.Status
		upd, err := e.c.shoots.UpdateStatus(e.t.Context(), out)
		if err != nil {
			e.t.Fatal(err)
		}
		out = upd.(*corev1beta1.Shoot)
	}
	return out
}

func (e *env) shoot(name string) *corev1beta1.Shoot {
	e.t.Helper()
	obj, err := e.c.shoots.Get(e.t.Context(), "garden-dev", name)
	if err != nil {
		e.t.Fatal(err)
	}
	return obj.(*corev1beta1.Shoot)
}

func (e *env) updateShoot(name string, status bool, mutate func(*corev1beta1.Shoot)) {
	e.t.Helper()
	if _, err := updateShoot(e.t.Context(), e.c.shoots, controller.Key{Namespace: "garden-dev", Name: name}, status, func(s *corev1beta1.Shoot) bool {
		mutate(s)
		return true
	}); err != nil {
		e.t.Fatal(err)
	}
}

func reconcile(t *testing.T, r controller.Reconciler, name string) controller.Result {
	t.Helper()
	res, err := r.Reconcile(t.Context(), controller.Key{Namespace: "garden-dev", Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// events returns the reasons and messages of the Events recorded about shoots.
func (e *env) events() []string {
	e.t.Helper()
	var out []string
	for _, ev := range controllertest.Events(e.t, e.c.events, "", "", "") {
		out = append(out, ev.GetReason()+": "+ev.GetMessage())
	}
	return out
}

func newShoot(name string, mutate ...func(*corev1beta1.Shoot)) *corev1beta1.Shoot {
	s := &corev1beta1.Shoot{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot",
		Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name},
		Spec: &corev1beta1.ShootSpec{Region: "r", Provider: &corev1beta1.Provider{Type: "local"},
			Kubernetes: &corev1beta1.Kubernetes{Version: "1.30.1"}}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func ptr[T any](v T) *T { return &v }
