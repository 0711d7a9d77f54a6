package table

import (
	"runtime"
	"sync"
	"weak"

	cliv1 "github.com/trellis-dev/trellis/proto/gen/trellis/cli/v1"
)

// Memo keeps what a Table takes of each list item it was made from — the item's cells, with the values of the columns
// that age (columns.Timed) to render at each answer's time, and where the item's metadata is — for as long as the
// item's JSON lives, keyed by the JSON's identity (its first byte), not its content. A list's items are the watch
// cache's memoized JSON, which stays the same allocation, never changed, for as long as its object is unchanged
// (gateway.ListWriter), so a second `kubectl get` of the same objects reads none of their JSON again: reading it
// (decoding the members the columns need, skipping the rest) was most of a large list's Table. An entry goes when the
// garbage collector frees its JSON (runtime.AddCleanup); it holds no reference to the JSON itself.
type Memo struct {
	mu    sync.Mutex
	items map[weak.Pointer[byte]]*itemMemo
}

// NewMemo returns an empty Memo.
func NewMemo() *Memo { return &Memo{items: map[weak.Pointer[byte]]*itemMemo{}} }

// itemMemo is what a Table takes of one item of a list of a kind.
type itemMemo struct {
	cells []any // per cell (NAME first when named): its string, or the timed column's values to render
	// metadata is the item's metadata member, item[metaStart:metaEnd] (metaStart < 0: none).
	metaStart, metaEnd int
}

// timedValues are the values a column that ages found, rendered at each answer's time.
type timedValues struct {
	format cliv1.Format
	vals   []any
}

// size is the number of items the memo holds.
func (m *Memo) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.items)
}

func (m *Memo) get(k weak.Pointer[byte]) *itemMemo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.items[k]
}

// put keeps im for item's JSON, until the JSON is freed.
func (m *Memo) put(item []byte, k weak.Pointer[byte], im *itemMemo) {
	m.mu.Lock()
	_, had := m.items[k]
	m.items[k] = im
	m.mu.Unlock()
	if !had {
		runtime.AddCleanup(&item[0], m.forget, k)
	}
}

func (m *Memo) forget(k weak.Pointer[byte]) {
	m.mu.Lock()
	delete(m.items, k)
	m.mu.Unlock()
}

// memoized is what the table takes of item, from memo when it holds the item, else read from the item's JSON and
// memoized.
func (b *tableBuilder) memoized(memo *Memo, item []byte) (*itemMemo, error) {
	if len(item) == 0 {
		return b.decodeItem(newDecoder(item), item) // fails: no value
	}
	k := weak.Make(&item[0])
	if im := memo.get(k); im != nil {
		return im, nil
	}
	im, err := b.decodeItem(newDecoder(item), item)
	if err != nil {
		return nil, err
	}
	memo.put(item, k, im)
	return im, nil
}
