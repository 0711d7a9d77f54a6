package store

import (
	"context"
	"time"
)

// Progress requests. etcd tells a watch about revisions that do not touch its keys only in progress notifications.
// The caches need them to keep their revision close to etcd's, which keeps bookmarks and list revisions fresh (a
// continue token at an old revision would be compacted even though the resource did not change) and lets a watch
// from a revision written to another resource start at once.
const (
	progressInterval   = time.Second
	progressMinSpacing = 20 * time.Millisecond
)

// progressRequester asks etcd for a progress notification on the caches' shared watch stream every
// progressInterval, and sooner when a reader waits for a revision (kick).
type progressRequester struct {
	s    *Store
	kick func()
	c    chan struct{}
}

func newProgressRequester(s *Store) *progressRequester {
	p := &progressRequester{s: s, c: make(chan struct{}, 1)}
	p.kick = func() {
		select {
		case p.c <- struct{}{}:
		default:
		}
	}
	return p
}

func (p *progressRequester) run(ctx context.Context) {
	ticker := time.NewTicker(progressInterval)
	defer ticker.Stop()
	wctx := watchContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-p.c:
		}
		if !p.s.hasCollections() {
			continue
		}
		// An error means the stream is being re-established; the next tick tries again.
		if err := p.s.client.RequestProgress(wctx); err != nil && ctx.Err() == nil {
			p.s.log.Debug("etcd progress request failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(progressMinSpacing):
		}
	}
}

func (s *Store) hasCollections() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.collections) > 0
}
