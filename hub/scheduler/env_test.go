package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// env is a real store (embedded etcd) with the hub's registry of kinds, without the hub's own controllers.
type env struct {
	t   *testing.T
	ctx context.Context
	reg *api.Registry
	c   *collections
}

func newEnv(t *testing.T) *env {
	t.Helper()
	reg := controllertest.NewRegistry(t)
	c, err := openCollections(reg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: t.Context(), reg: reg, c: c}
	controllertest.Create(t, c.cloudProfiles, &corev1beta1.CloudProfile{Metadata: &metav1.ObjectMeta{Name: "aws"}, Spec: &corev1beta1.CloudProfileSpec{Type: "aws"}})
	return e
}

// run starts the scheduler on the env's store until the test ends.
func (e *env) run(cfg Config) {
	e.t.Helper()
	cfg.Source = e.reg
	s, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	controllertest.Start(e.t, s)
}

// seed stores a seed: its spec, then its status (conditions, allocatable) as the agent would write them.
func (e *env) seed(s *corev1beta1.Seed) {
	e.t.Helper()
	status := s.Status
	s = proto.Clone(s).(*corev1beta1.Seed)
	s.Status = nil
	controllertest.Create(e.t, e.c.seeds, s)
	controllertest.Update(e.t, e.c.seeds, "", s.Metadata.Name, true, func(cur *corev1beta1.Seed) { cur.Status = status })
}

func (e *env) setCondition(seed, typ, status string) {
	e.t.Helper()
	controllertest.Update(e.t, e.c.seeds, "", seed, true, condition(typ, status))
}

// shoot stores a shoot in garden-dev.
func (e *env) shoot(name string, opts ...shootOpt) *corev1beta1.Shoot {
	e.t.Helper()
	s := testShoot(opts...)
	s.Metadata.Name = name
	return controllertest.Create(e.t, e.c.shoots, s)
}

func (e *env) getShoot(name string) *corev1beta1.Shoot {
	e.t.Helper()
	o, err := e.c.shoots.Get(e.ctx, "garden-dev", name)
	if err != nil {
		e.t.Fatal(err)
	}
	return o.(*corev1beta1.Shoot)
}

func (e *env) seedOf(name string) string { return e.getShoot(name).GetSpec().GetSeedName() }

// events returns the events about a shoot with a reason.
func (e *env) events(shoot, reason string) []*kcorev1.Event {
	e.t.Helper()
	return controllertest.Events(e.t, e.c.events, "garden-dev", shoot, reason)
}

// eventsWritten waits until the shoot has an event of reason and returns its events of reason: a running scheduler
// writes events off its workers' path (eventSink), after the write they are about.
func (e *env) eventsWritten(shoot, reason string) []*kcorev1.Event {
	e.t.Helper()
	var evs []*kcorev1.Event
	controllertest.Eventually(e.t, reason+" event of "+shoot, func() bool {
		evs = e.events(shoot, reason)
		return len(evs) > 0
	})
	return evs
}

// placed waits until every named shoot is on its seed.
func (e *env) placed(want map[string]string) {
	e.t.Helper()
	controllertest.Eventually(e.t, fmt.Sprintf("placement %v", want), func() bool {
		for shoot, seed := range want {
			if e.seedOf(shoot) != seed {
				return false
			}
		}
		return true
	})
}

// pendingWith waits until the shoot's lastOperation says it could not be scheduled, with reason in its description.
func (e *env) pendingWith(shoot, reason string) *metav1.LastOperation {
	e.t.Helper()
	var op *metav1.LastOperation
	controllertest.Eventually(e.t, "lastOperation of "+shoot+" naming "+reason, func() bool {
		op = e.getShoot(shoot).GetStatus().GetLastOperation()
		return op.GetType() == "Create" && op.GetState() == "Pending" && strings.Contains(op.GetDescription(), reason)
	})
	return op
}
