package agentlink

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/seedgraph"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	coordinationv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/coordination/v1"
)

// LifecycleConfig configures the seed lifecycle controller (Gardener's gardenlet-lifecycle), with Gardener's
// defaults.
type LifecycleConfig struct {
	Source Source
	Etcd   *clientv3.Client
	Prefix string
	// SyncPeriod is how often every seed is checked (default 10 s).
	SyncPeriod time.Duration
	// MonitorPeriod is how long a seed's agent may be absent before GardenletReady turns Unknown (default 40 s).
	MonitorPeriod time.Duration
	// ShootMonitorPeriod is how long GardenletReady may be Unknown before the seed's shoots' conditions turn
	// Unknown (default 5 × MonitorPeriod).
	ShootMonitorPeriod time.Duration
	// Now is the clock (tests use a fake one).
	Now func() time.Time
	Log *slog.Logger
}

// Lifecycle is the seed lifecycle controller. Run it in the leader only. An agent counts as present while a replica
// holds its presence key or its Lease was renewed within the monitor period. A controller that just started (a new
// leader, a restarted hub) counts every absence from its own start, so agents get the whole monitor period to
// reconnect instead of being marked Unknown all at once.
type Lifecycle struct {
	cfg            LifecycleConfig
	seeds, shoots  *store.Collection
	leases         *store.Collection
	start          time.Time
	mu             sync.Mutex
	present        map[string]bool
	lastSeen       map[string]time.Time
	presenceLoaded bool
}

// NewLifecycle returns the controller.
func NewLifecycle(cfg LifecycleConfig) *Lifecycle {
	if cfg.SyncPeriod == 0 {
		cfg.SyncPeriod = 10 * time.Second
	}
	if cfg.MonitorPeriod == 0 {
		cfg.MonitorPeriod = 40 * time.Second
	}
	if cfg.ShootMonitorPeriod == 0 {
		cfg.ShootMonitorPeriod = 5 * cfg.MonitorPeriod
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	l := &Lifecycle{cfg: cfg, present: map[string]bool{}, lastSeen: map[string]time.Time{}}
	l.seeds, _ = cfg.Source.Collection(schema.GroupResource{Group: "core.gardener.cloud", Resource: "seeds"})
	l.shoots, _ = cfg.Source.Collection(schema.GroupResource{Group: "core.gardener.cloud", Resource: "shoots"})
	l.leases, _ = cfg.Source.Collection(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"})
	return l
}

// Run follows presence and checks every seed each sync period until ctx ends; it returns once its presence
// follower has ended too.
func (l *Lifecycle) Run(ctx context.Context) error {
	l.start = l.cfg.Now()
	var followers sync.WaitGroup
	defer followers.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before followers.Wait: the follower ends with ctx
	followers.Go(func() { l.followPresence(ctx) })
	t := time.NewTicker(l.cfg.SyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			l.Sync(ctx)
		}
	}
}

func (l *Lifecycle) followPresence(ctx context.Context) {
	prefix := l.cfg.Prefix + PresencePrefix
	for ctx.Err() == nil {
		resp, err := l.cfg.Etcd.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			sleepCtx(ctx, time.Second)
			continue
		}
		l.mu.Lock()
		now := l.cfg.Now()
		seen := map[string]bool{}
		for _, kv := range resp.Kvs {
			if presentValue(kv.Value) {
				seen[strings.TrimPrefix(string(kv.Key), prefix)] = true
			}
		}
		for seed := range l.present {
			if !seen[seed] {
				l.lastSeen[seed] = now
			}
		}
		l.present = seen
		l.presenceLoaded = true
		l.mu.Unlock()
		wch := l.cfg.Etcd.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		for wr := range wch {
			if wr.Err() != nil {
				break
			}
			l.mu.Lock()
			now := l.cfg.Now()
			for _, ev := range wr.Events {
				seed := strings.TrimPrefix(string(ev.Kv.Key), prefix)
				if ev.Type == clientv3.EventTypePut && presentValue(ev.Kv.Value) {
					l.present[seed] = true
				} else if l.present[seed] {
					// Gone, or its seed reported unhealthy: absent from now.
					delete(l.present, seed)
					l.lastSeen[seed] = now
				}
			}
			l.mu.Unlock()
		}
	}
}

// Sync checks every seed once.
func (l *Lifecycle) Sync(ctx context.Context) {
	l.mu.Lock()
	loaded := l.presenceLoaded
	l.mu.Unlock()
	if !loaded {
		return
	}
	res, err := l.seeds.List(ctx, "", store.ListOptions{})
	if err != nil {
		return
	}
	for _, obj := range res.Items {
		l.check(ctx, obj.(*corev1beta1.Seed))
	}
}

func (l *Lifecycle) check(ctx context.Context, seed *corev1beta1.Seed) {
	name := seed.GetMetadata().GetName()
	ready := findCondition(seed.GetStatus().GetConditions(), GardenletReady)
	if ready == nil {
		return // the agent never reported: nothing to take back
	}
	now := l.cfg.Now()
	l.mu.Lock()
	if l.present[name] {
		l.lastSeen[name] = now
		l.mu.Unlock()
		return
	}
	last, ok := l.lastSeen[name]
	if !ok || last.Before(l.start) {
		last = l.start
	}
	if obj, err := l.leases.Get(ctx, seedgraph.LeaseNamespace, name); err == nil {
		if rt := obj.(*coordinationv1.Lease).GetSpec().GetRenewTime(); rt != nil && rt.AsTime().After(last) {
			last = rt.AsTime()
		}
	}
	// A session writes GardenletReady=True when it starts; its presence key may follow a moment later.
	if ru := ready.GetLastUpdateTime(); ready.GetStatus() == "True" && ru != nil && ru.AsTime().After(last) {
		last = ru.AsTime()
	}
	l.lastSeen[name] = last
	l.mu.Unlock()
	if now.Sub(last) < l.cfg.MonitorPeriod {
		return
	}
	if ready.GetStatus() != "Unknown" {
		l.cfg.Log.Info("seed agent stopped posting status", "seed", name, "lastSeen", last)
		_, err := l.seeds.GuaranteedUpdate(ctx, "", name, true, func(cur store.Object) (store.Object, error) {
			s := cur.(*corev1beta1.Seed)
			if c := findCondition(s.GetStatus().GetConditions(), GardenletReady); c == nil || c.GetStatus() == "Unknown" {
				return nil, nil
			}
			s.Status.Conditions = setCondition(s.Status.Conditions, GardenletReady, "Unknown", "StatusUnknown", "Gardenlet stopped posting status updates.", timestamppb.New(now))
			return s, nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			l.cfg.Log.Warn("cannot set GardenletReady Unknown", "seed", name, "err", err)
		}
		return
	}
	if lt := ready.GetLastTransitionTime(); lt != nil && now.Sub(lt.AsTime()) >= l.cfg.ShootMonitorPeriod {
		l.shootsUnknown(ctx, name, now)
	}
}

var (
	shootConditions          = []string{"APIServerAvailable", "ControlPlaneHealthy", "ObservabilityComponentsHealthy", "EveryNodeReady", "SystemComponentsHealthy"}
	workerlessShootCondition = []string{"APIServerAvailable", "ControlPlaneHealthy", "ObservabilityComponentsHealthy"}
	shootConstraints         = []string{"HibernationPossible", "MaintenancePreconditionsSatisfied"}
)

// shootsUnknown sets the conditions and constraints of the seed's shoots Unknown, as Gardener does once the seed's
// agent has been silent for the shoot monitor period. Shoots are neither migrated nor deleted.
func (l *Lifecycle) shootsUnknown(ctx context.Context, seed string, now time.Time) {
	shoots, err := l.shoots.ByIndex(ctx, "seed", seed)
	if err != nil {
		return
	}
	ts := timestamppb.New(now)
	for _, obj := range shoots {
		sh := obj.(*corev1beta1.Shoot)
		if sh.GetStatus().GetSeedName() != seed {
			continue
		}
		md := sh.GetMetadata()
		_, err := l.shoots.GuaranteedUpdate(ctx, md.GetNamespace(), md.GetName(), true, func(cur store.Object) (store.Object, error) {
			s := cur.(*corev1beta1.Shoot)
			conds := shootConditions
			if len(s.GetSpec().GetProvider().GetWorkers()) == 0 {
				conds = workerlessShootCondition
			}
			changed := false
			if s.Status == nil {
				s.Status = &corev1beta1.ShootStatus{}
			}
			for _, t := range conds {
				if c := findCondition(s.Status.Conditions, t); c == nil || c.GetStatus() != "Unknown" {
					s.Status.Conditions = setCondition(s.Status.Conditions, t, "Unknown", "StatusUnknown", "Gardenlet stopped sending heartbeats.", ts)
					changed = true
				}
			}
			for _, t := range shootConstraints {
				if c := findCondition(s.Status.Constraints, t); c == nil || c.GetStatus() != "Unknown" {
					s.Status.Constraints = setCondition(s.Status.Constraints, t, "Unknown", "StatusUnknown", "Gardenlet stopped sending heartbeats.", ts)
					changed = true
				}
			}
			if !changed {
				return nil, nil
			}
			return s, nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			l.cfg.Log.Warn("cannot set shoot conditions Unknown", "shoot", md.GetNamespace()+"/"+md.GetName(), "err", err)
		}
	}
}
