package helmrelease

import (
	"container/list"
	"sync"
)

// chartCache keeps chart archives by key (repository@manifest-digest), least recently used evicted first, within a
// cap on the sum of the archives' sizes. Content under a digest never changes, so entries never go stale.
type chartCache struct {
	mu    sync.Mutex
	max   int64 // <= 0: nothing is kept
	size  int64
	order *list.List // of *cachedChart, most recently used first
	byKey map[string]*list.Element
}

type cachedChart struct {
	key     string
	archive []byte
	digest  string // of the archive
}

func newChartCache(maxBytes int64) *chartCache {
	return &chartCache{max: maxBytes, order: list.New(), byKey: map[string]*list.Element{}}
}

func (c *chartCache) get(key string) (cachedChart, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return cachedChart{}, false
	}
	c.order.MoveToFront(e)
	return *e.Value.(*cachedChart), true
}

// add keeps the archive unless it alone exceeds the cap, evicting the least recently used entries to make room.
func (c *chartCache) add(entry cachedChart) {
	n := int64(len(entry.archive))
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > c.max {
		return
	}
	if e, ok := c.byKey[entry.key]; ok {
		c.order.MoveToFront(e)
		return
	}
	for c.size+n > c.max {
		oldest := c.order.Back()
		old := c.order.Remove(oldest).(*cachedChart)
		delete(c.byKey, old.key)
		c.size -= int64(len(old.archive))
	}
	c.byKey[entry.key] = c.order.PushFront(&entry)
	c.size += n
}

// len returns the number of archives kept and their total size.
func (c *chartCache) len() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.size
}
