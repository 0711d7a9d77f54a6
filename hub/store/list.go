package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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
		return c.listContinue(ctx, namespace, pred, o)
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

// listContinue serves a continuation page from etcd at the token's revision.
func (c *Collection) listContinue(ctx context.Context, namespace string, pred predicate, o ListOptions) (*ListResult, error) {
	tok, err := decodeContinue(o.Continue)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
	}
	start, end := tok.Start, clientv3.GetPrefixRangeEnd(c.prefix)
	if namespace != "" {
		start = max(start, namespace+"/")
		end = c.prefix + namespace + "0" // '0' follows '/'
	}
	key := c.prefix + start
	res := &ListResult{ResourceVersion: strconv.FormatInt(tok.RV, 10), Items: []Object{}}
	page := int64(listPageSize)
	if o.Limit > 0 {
		page = min(o.Limit, listPageSize)
	}
	for key < end {
		resp, err := c.store.client.Get(ctx, key, clientv3.WithRange(end), clientv3.WithRev(tok.RV), clientv3.WithLimit(page))
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			return nil, apierrors.NewResourceExpired(msgContinueExpired)
		case errors.Is(err, rpctypes.ErrFutureRev):
			return nil, apierrors.NewBadRequest("invalid continue token: revision in the future")
		case err != nil:
			return nil, c.internal("list", err)
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
