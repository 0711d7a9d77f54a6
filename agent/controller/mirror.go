package controller

import (
	"time"

	"github.com/trellis-dev/trellis/agent/extension"
	"github.com/trellis-dev/trellis/agent/hubobject"
)

// Mirror is what the controllers of a core kind on the hub that an extension object in the seed mirrors
// (BackupBucket, BackupEntry, Bastion) share besides the work loop: the writers of both sides.
type Mirror[T hubobject.Object] struct {
	// Objects writes the core objects on the hub and remembers what it wrote.
	Objects *hubobject.Client[T]
	// Ext writes and reads the extension objects in the seed.
	Ext *extension.Client
}

// MirrorDefaults are the defaults of such a controller: 5 workers, retries after 1 s to 2 min, and an object that is
// in line checked every 5 min (a lost extension object is recreated).
var MirrorDefaults = Defaults{Workers: 5, RetryMin: time.Second, RetryMax: 2 * time.Minute, SyncPeriod: 5 * time.Minute}

// CompleteMirror is Complete for a controller of a mirrored kind, which also looks at an object whose extension object
// is not ready every *poll (default 1 s).
func (b *Base) CompleteMirror(name string, d Defaults, poll *time.Duration) error {
	if *poll <= 0 {
		*poll = time.Second
	}
	return b.Complete(name, d)
}

// NewMirror returns the Mirror of a completed Base, writing the core objects through api, the hub's gRPC client of T.
func NewMirror[T hubobject.Object](b Base, api hubobject.API[T]) Mirror[T] {
	return Mirror[T]{Objects: hubobject.NewClient(api, b.HubTimeout, b.Now), Ext: &extension.Client{C: b.Seed, Now: b.Now}}
}
