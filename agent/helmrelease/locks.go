package helmrelease

import (
	"context"
	"sync"
)

// releaseLocks serialises the operations on one release within a Manager: Helm's actions read the release history
// and then write the next revision, so two at once would race for it.
type releaseLocks struct {
	mu    sync.Mutex
	locks map[string]*releaseLock
}

type releaseLock struct {
	ch   chan struct{} // holds a token while the lock is held
	refs int           // holders and waiters; the entry goes when it drops to zero
}

// lock takes the lock of the release name in namespace, or gives up when ctx ends. The returned func releases it.
func (l *releaseLocks) lock(ctx context.Context, namespace, name string) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key := namespace + "/" + name
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*releaseLock{}
	}
	rl := l.locks[key]
	if rl == nil {
		rl = &releaseLock{ch: make(chan struct{}, 1)}
		l.locks[key] = rl
	}
	rl.refs++
	l.mu.Unlock()

	drop := func() {
		l.mu.Lock()
		rl.refs--
		if rl.refs == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
	select {
	case rl.ch <- struct{}{}:
		return func() {
			<-rl.ch
			drop()
		}, nil
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	}
}
