package main

import (
	"context"
	"crypto/tls"
	"sync"
	"sync/atomic"
	"time"

	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	"github.com/trellis-dev/trellis/test/agentsim"
)

// fleet is the N simulated agents of this process and what they observe.
type fleet struct {
	agents  []*agentsim.Agent
	started []time.Time // when each agent's Run began
	synced  []time.Time // when each agent first synced (zero until then)

	// Heartbeat acks are recorded while ackOn is set.
	ackOn  atomic.Bool
	ackMu  sync.Mutex
	ackRTT []time.Duration
	ackAt  []time.Time // when each ack arrived

	// Shoot assignments are recorded while assignOn is set: (agent index, resourceVersion) → first receive time.
	assignOn atomic.Bool
	assignMu sync.Mutex
	assigned map[assignKey]time.Time

	mu     sync.Mutex // guards started and synced
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type assignKey struct {
	agent int
	rv    int64
}

func newFleet(d agentsim.Dialer, certs []tls.Certificate, heartbeat time.Duration) *fleet {
	f := &fleet{
		agents: make([]*agentsim.Agent, len(certs)), started: make([]time.Time, len(certs)), synced: make([]time.Time, len(certs)),
		assigned: map[assignKey]time.Time{},
	}
	for i := range certs {
		i := i
		shoot := shootName(i)
		f.agents[i] = &agentsim.Agent{
			Seed: seedName(i), Dialer: d, Cert: certs[i], HeartbeatInterval: heartbeat,
			OnHeartbeatAck: func(rtt time.Duration) {
				if f.ackOn.Load() {
					now := time.Now()
					f.ackMu.Lock()
					f.ackRTT = append(f.ackRTT, rtt)
					f.ackAt = append(f.ackAt, now)
					f.ackMu.Unlock()
				}
			},
			// Called under the agent's lock, on its receive goroutine: only a map insert.
			OnAssignment: func(a *agentv1.Assignment, at time.Time) {
				if !f.assignOn.Load() || a.GetResource() != shootsResource || a.GetName() != shoot {
					return
				}
				k := assignKey{agent: i, rv: a.GetResourceVersion()}
				f.assignMu.Lock()
				if _, ok := f.assigned[k]; !ok {
					f.assigned[k] = at
				}
				f.assignMu.Unlock()
			},
		}
	}
	return f
}

// start runs every agent, the starts spread evenly over ramp (real fleets do not start in the same millisecond, and
// agents started together would heartbeat in lockstep).
func (f *fleet) start(ctx context.Context, ramp time.Duration) {
	ctx, f.cancel = context.WithCancel(ctx)
	n := len(f.agents)
	t0 := time.Now()
	for i, a := range f.agents {
		f.wg.Add(2)
		go func() {
			defer f.wg.Done()
			if d := time.Until(t0.Add(ramp * time.Duration(i) / time.Duration(n))); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
			f.mu.Lock()
			f.started[i] = time.Now()
			f.mu.Unlock()
			_ = a.Run(ctx)
		}()
		go func() {
			defer f.wg.Done()
			select {
			case <-ctx.Done():
			case <-a.Synced():
				f.mu.Lock()
				f.synced[i] = time.Now()
				f.mu.Unlock()
			}
		}()
	}
}

func (f *fleet) stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
}

// waitSynced waits until every agent has synced once; it returns how many have.
func (f *fleet) waitSynced(ctx context.Context, timeout time.Duration) int {
	deadline := time.After(timeout)
	n := 0
	for _, a := range f.agents {
		select {
		case <-a.Synced():
			n++
		case <-deadline:
			return f.countSynced()
		case <-ctx.Done():
			return f.countSynced()
		}
	}
	return n
}

func (f *fleet) countSynced() int {
	n := 0
	for _, a := range f.agents {
		select {
		case <-a.Synced():
			n++
		default:
		}
	}
	return n
}

// syncTimes returns, per agent that has synced, the time from its start to its first SyncComplete.
func (f *fleet) syncTimes() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Duration
	for i := range f.agents {
		if !f.synced[i].IsZero() && !f.started[i].IsZero() {
			out = append(out, f.synced[i].Sub(f.started[i]))
		}
	}
	return out
}

func (f *fleet) syncs() []int {
	out := make([]int, len(f.agents))
	for i, a := range f.agents {
		out[i] = a.Syncs()
	}
	return out
}

func (f *fleet) startAcks() {
	f.ackMu.Lock()
	f.ackRTT, f.ackAt = f.ackRTT[:0], f.ackAt[:0]
	f.ackMu.Unlock()
	f.ackOn.Store(true)
}

// stopAcks returns the round trips recorded since startAcks and when each ack arrived.
func (f *fleet) stopAcks() ([]time.Duration, []time.Time) {
	f.ackOn.Store(false)
	f.ackMu.Lock()
	defer f.ackMu.Unlock()
	return append([]time.Duration(nil), f.ackRTT...), append([]time.Time(nil), f.ackAt...)
}

func (f *fleet) received(agent int, rv int64) (time.Time, bool) {
	f.assignMu.Lock()
	defer f.assignMu.Unlock()
	t, ok := f.assigned[assignKey{agent, rv}]
	return t, ok
}
