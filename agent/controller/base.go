package controller

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/cache"
)

// Base is what every seed-side controller of the agent is given. A controller's Config embeds it.
type Base struct {
	// SeedName is the agent's seed.
	SeedName string
	// Cache is the agent's copy of its seed's objects on the hub.
	Cache *cache.Cache
	// Hub is the agent's mTLS connection to the hub, for writes under the seed authorizer.
	Hub grpc.ClientConnInterface
	// Seed is a client of the seed cluster whose scheme has client-go's and the extension kinds.
	Seed client.Client
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
	// Workers is how many keys are worked on at once; zero takes the controller's default.
	Workers int
	// RetryMin and RetryMax bound the per-key exponential backoff after a failed sync; zero takes the controller's
	// defaults.
	RetryMin, RetryMax time.Duration
	// SyncPeriod is how often an object that is in line is looked at anyway; zero takes the controller's default,
	// a negative period turns these syncs off.
	SyncPeriod time.Duration
	// HubTimeout bounds each call to the hub; default 30 s.
	HubTimeout time.Duration
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

// Defaults are one controller's defaults of Base's settings.
type Defaults struct {
	Workers            int
	RetryMin, RetryMax time.Duration
	SyncPeriod         time.Duration
}

// DefaultHubTimeout is the default of Base.HubTimeout.
const DefaultHubTimeout = 30 * time.Second

// Complete validates b for the controller name (as its queue is named, e.g. "backupBucket") and fills what is left
// zero: the settings from d, HubTimeout, Now, and Log, which it also labels with the controller (lower-case name).
// The error names every missing field.
func (b *Base) Complete(name string, d Defaults) error {
	var missing []string
	for _, f := range []struct {
		name  string
		unset bool
	}{{"SeedName", b.SeedName == ""}, {"Cache", b.Cache == nil}, {"Hub", b.Hub == nil}, {"Seed", b.Seed == nil}} {
		if f.unset {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s controller: %w: %s", name, errMissing, strings.Join(missing, ", "))
	}
	if b.Log == nil {
		b.Log = slog.New(slog.DiscardHandler)
	}
	b.Log = b.Log.With("controller", strings.ToLower(name))
	if b.Workers <= 0 {
		b.Workers = max(d.Workers, 1)
	}
	if b.RetryMin <= 0 {
		b.RetryMin = d.RetryMin
	}
	if b.RetryMax <= 0 {
		b.RetryMax = d.RetryMax
	}
	if b.RetryMax < b.RetryMin {
		return fmt.Errorf("%s controller: RetryMax %s is less than RetryMin %s", name, b.RetryMax, b.RetryMin)
	}
	if b.SyncPeriod == 0 {
		b.SyncPeriod = d.SyncPeriod
	}
	if b.HubTimeout <= 0 {
		b.HubTimeout = DefaultHubTimeout
	}
	if b.Now == nil {
		b.Now = time.Now
	}
	return nil
}

// errMissing reports required fields left unset.
var errMissing = errors.New("required fields are not set")
