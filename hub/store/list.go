package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// ListOptions select and page a List.
type ListOptions struct {
	Labels labels.Selector
	Fields fields.Selector
	// Limit caps the number of items; 0 means all.
	Limit int64
	// Continue is the token of the previous page.
	Continue string
}

// ListResult is one page. Items are shared: do not modify them.
type ListResult struct {
	Items []Object
	// ResourceVersion is the revision the list reflects (the first page's for every page).
	ResourceVersion string
	// Continue is the token of the next page, empty on the last page.
	Continue string
	// RemainingItemCount is how many items follow, when known.
	RemainingItemCount *int64
}

// continueToken locates the next page: the snapshot revision and the first object key of the page.
type continueToken struct {
	Version string `json:"v"`
	RV      int64  `json:"rv"`
	Start   string `json:"start"`
}

const continueVersion = "trellis.store/v1"

func encodeContinue(rv int64, start string) string {
	b, _ := json.Marshal(continueToken{Version: continueVersion, RV: rv, Start: start})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, err
	}
	if t.Version != continueVersion || t.RV <= 0 {
		return t, errors.New("unknown token")
	}
	return t, nil
}

// List returns the objects of a namespace ("" for all) that match the selectors, sorted by key. The first page comes
// from the watch cache; continuation pages are read from etcd at the first page's revision, so the pages together are
// one consistent snapshot.
func (c *Collection) List(ctx context.Context, namespace string, o ListOptions) (*ListResult, error) {
	if err := c.checkNamespace(namespace); err != nil {
		return nil, err
	}
	if o.Limit < 0 {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("limit must not be negative, got %d", o.Limit))
	}
	pred, err := c.newPredicate(o.Labels, o.Fields)
	if err != nil {
		return nil, err
	}
	if o.Continue != "" {
		tok, err := decodeContinue(o.Continue)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		return c.listContinue(ctx, namespace, pred, o, tok)
	}
	if err := c.fresh(ctx); err != nil {
		return nil, err
	}

	ch := c.cache
	ch.mu.RLock()
	defer ch.mu.RUnlock()
	rev := ch.rev.Load()
	entries := ch.selected(namespace, pred) // the namespace's range unless a field selector names one object
	res := &ListResult{ResourceVersion: strconv.FormatInt(rev, 10)}
	if pred.everything() {
		n := len(entries)
		if o.Limit > 0 && int64(n) > o.Limit {
			n = int(o.Limit)
			rest := int64(len(entries) - n)
			res.RemainingItemCount = &rest
			res.Continue = encodeContinue(rev, entries[n-1].key+"\x00")
		}
		res.Items = make([]Object, n)
		for i, e := range entries[:n] {
			res.Items[i] = e.obj
		}
		return res, nil
	}
	res.Items = []Object{}
	for i, e := range entries {
		if !pred.matches(e.obj) {
			continue
		}
		if o.Limit > 0 && int64(len(res.Items)) == o.Limit {
			// The page is full and e is the first match of the next one: count what follows.
			rest := int64(1)
			for _, f := range entries[i+1:] {
				if pred.matches(f.obj) {
					rest++
				}
			}
			res.RemainingItemCount = &rest
			res.Continue = encodeContinue(rev, e.key)
			break
		}
		res.Items = append(res.Items, e.obj)
	}
	return res, nil
}

// listContinue serves a continuation page at the token's revision: from the watch cache when it can (pageFromCache),
// else from etcd.
func (c *Collection) listContinue(ctx context.Context, namespace string, pred predicate, o ListOptions, tok continueToken) (*ListResult, error) {
	start, end := tok.Start, clientv3.GetPrefixRangeEnd(c.prefix)
	if namespace != "" {
		start = max(start, namespace+"/")
		end = c.prefix + namespace + "0" // '0' follows '/'
	}
	// etcd counts the page's range at the revision, which also refuses a compacted revision (410 Expired) or one in
	// the future as a read of the page itself would.
	count, err := c.store.client.Get(ctx, c.prefix+start, clientv3.WithRange(end), clientv3.WithRev(tok.RV), clientv3.WithCountOnly())
	if err != nil {
		return nil, c.continueError(err)
	}
	if res, ok := c.pageFromCache(namespace, start, pred, o.Limit, tok.RV, count.Count); ok {
		return res, nil
	}
	key := c.prefix + start
	res := &ListResult{ResourceVersion: strconv.FormatInt(tok.RV, 10), Items: []Object{}}
	page := int64(listPageSize)
	if o.Limit > 0 {
		page = min(o.Limit, listPageSize)
	}
	for key < end {
		resp, err := c.store.client.Get(ctx, key, clientv3.WithRange(end), clientv3.WithRev(tok.RV), clientv3.WithLimit(page))
		if err != nil {
			return nil, c.continueError(err)
		}
		for i, kv := range resp.Kvs {
			obj, err := c.decode(string(kv.Key), kv.Value, kv.ModRevision)
			if err != nil {
				return nil, c.internal("list", err)
			}
			if !pred.matches(obj) {
				continue
			}
			if o.Limit > 0 && int64(len(res.Items)) == o.Limit {
				res.Continue = encodeContinue(tok.RV, string(kv.Key[len(c.prefix):]))
				if pred.everything() {
					rest := resp.Count - int64(i)
					res.RemainingItemCount = &rest
				}
				return res, nil
			}
			res.Items = append(res.Items, obj)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		// Filtering may reject most keys; read larger pages as the page fills slowly.
		page = min(2*page, 10*listPageSize)
	}
	return res, nil
}

// continueError is the answer to a continuation whose read of etcd at the token's revision failed with err.
func (c *Collection) continueError(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return apierrors.NewResourceExpired(msgContinueExpired)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return apierrors.NewBadRequest("invalid continue token: revision in the future")
	}
	return c.internal("list", err)
}

// pageFromCache serves a continuation page at revision rev from the watch cache, as the first page was: the state at
// rev of the keys from start on (in namespace, or all) is the cache's, but for keys changed since, whose state at rev
// is the one before their first event after rev in the history. It walks the whole range and checks that as many
// objects existed at rev as etcd counted there (count); ok is false when the cache cannot serve the page exactly:
// it is behind rev, its history no longer reaches back to rev, a state there is not held, or the counts differ.
// Items unchanged since rev keep their memoized encodings (CachedEncoding), which a page read from etcd lacks.
func (c *Collection) pageFromCache(namespace, start string, pred predicate, limit, rev, count int64) (*ListResult, bool) {
	ch := c.cache
	ch.mu.RLock()
	defer ch.mu.RUnlock()
	if ch.rev.Load() < rev {
		return nil, false
	}
	evs, ok := ch.history.since(rev)
	if !ok {
		return nil, false
	}
	entries := ch.rangeOf(namespace)
	i, _ := slices.BinarySearchFunc(entries, start, compareEntryKey)
	entries = entries[i:]
	then := map[string]Object{} // the state at rev of the keys changed since (nil: none)
	var gone []string           // of those, the keys the cache no longer has
	for _, ev := range evs {
		if _, seen := then[ev.key]; seen || ev.key < start || namespace != "" && namespaceOfKey(ev.key) != namespace {
			continue
		}
		var prev Object
		if ev.typ != Added {
			if prev = ch.prevOf(ev); prev == nil {
				return nil, false
			}
			if _, ok := ch.items[ev.key]; !ok {
				gone = append(gone, ev.key)
			}
		}
		then[ev.key] = prev
	}
	slices.Sort(gone)
	res := &ListResult{ResourceVersion: strconv.FormatInt(rev, 10), Items: []Object{}}
	var existed, atFull int64
	full := false
	for len(entries) > 0 || len(gone) > 0 {
		var key string
		var obj Object
		if len(gone) == 0 || len(entries) > 0 && entries[0].key < gone[0] {
			key, obj = entries[0].key, entries[0].obj
			entries = entries[1:]
			if st, changed := then[key]; changed {
				obj = st
			}
		} else {
			key, obj = gone[0], then[gone[0]]
			gone = gone[1:]
		}
		if obj == nil {
			continue // created after rev
		}
		existed++
		if full || !pred.matches(obj) {
			continue
		}
		if limit > 0 && int64(len(res.Items)) == limit {
			full, atFull = true, existed-1
			res.Continue = encodeContinue(rev, key)
			continue
		}
		res.Items = append(res.Items, obj)
	}
	if existed != count {
		ch.log.Warn("a continuation page does not match etcd's count at its revision; read from etcd", "rev", rev, "cache", existed, "etcd", count)
		return nil, false
	}
	if full && pred.everything() {
		rest := count - atFull
		res.RemainingItemCount = &rest
	}
	return res, true
}
