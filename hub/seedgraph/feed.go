package seedgraph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Source gives the graph the store's collections.
type Source interface {
	Collection(gr schema.GroupResource) (*store.Collection, bool)
}

// Run feeds the graph from the store until ctx ends: one list-then-watch per followed resource. ready is closed once
// every resource is loaded (Synced() > 0 from then on).
func (g *Graph) Run(ctx context.Context, src Source, log *slog.Logger, ready chan<- struct{}) error {
	colls := make([]*store.Collection, len(resources.SeedGraph))
	for i, r := range resources.SeedGraph {
		c, ok := src.Collection(schema.ParseGroupResource(r))
		if !ok {
			return fmt.Errorf("seedgraph: resource %s is not served", r)
		}
		colls[i] = c
	}
	loaded := make(chan struct{}, len(resources.SeedGraph))
	errc := make(chan error, len(resources.SeedGraph))
	var feeds sync.WaitGroup
	defer feeds.Wait()
	for i, r := range resources.SeedGraph {
		feeds.Go(func() { errc <- g.feed(ctx, r, colls[i], log, loaded) })
	}
	// Run itself waits for the loads, then for the feeds' ends.
	first, ended := error(nil), 0
	for n := 0; n < len(resources.SeedGraph) && ended < len(resources.SeedGraph); {
		select {
		case <-loaded:
			if n++; n == len(resources.SeedGraph) && ready != nil {
				close(ready)
			}
		case err := <-errc:
			ended++
			if err != nil && first == nil && ctx.Err() == nil {
				first = err
			}
		}
	}
	for ; ended < len(resources.SeedGraph); ended++ {
		if err := <-errc; err != nil && first == nil && ctx.Err() == nil {
			first = err
		}
	}
	return first
}

// feed lists a resource into the graph and follows its changes; when the watch falls behind or ends, it lists again
// and drops what disappeared meanwhile.
func (g *Graph) feed(ctx context.Context, resource string, c *store.Collection, log *slog.Logger, loaded chan<- struct{}) error {
	signalled := false
	for ctx.Err() == nil {
		rv, err := g.relist(ctx, resource, c)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Warn("seed graph: list failed", "resource", resource, "err", err)
			sleep(ctx, time.Second)
			continue
		}
		if !signalled {
			loaded <- struct{}{}
			signalled = true
		}
		err = g.follow(ctx, resource, c, rv)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			log.Warn("seed graph: watch ended", "resource", resource, "err", err)
			sleep(ctx, 200*time.Millisecond)
		}
	}
	return nil
}

func (g *Graph) relist(ctx context.Context, resource string, c *store.Collection) (string, error) {
	res, err := c.List(ctx, "", store.ListOptions{})
	if err != nil {
		return "", err
	}
	rev, _ := strconv.ParseInt(res.ResourceVersion, 10, 64)
	seen := make(map[Ref]bool, len(res.Items))
	for _, obj := range res.Items {
		md := obj.GetMetadata()
		seen[Ref{Resource: resource, Namespace: md.GetNamespace(), Name: md.GetName()}] = true
		g.Apply(resource, obj)
	}
	g.mu.Lock()
	var gone []Ref
	for ref, n := range g.nodes {
		if ref.Resource == resource && n.obj != nil && !seen[ref] {
			gone = append(gone, ref)
		}
	}
	for _, ref := range gone {
		g.apply(ref, nil, rev)
	}
	g.setProcessed(resource, rev)
	g.mu.Unlock()
	return res.ResourceVersion, nil
}

func (g *Graph) follow(ctx context.Context, resource string, c *store.Collection, rv string) error {
	w, err := c.Watch(ctx, "", store.WatchOptions{ResourceVersion: rv, Bookmarks: true})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events():
			if !ok {
				return errors.New("watch closed")
			}
			switch ev.Type {
			case store.Error:
				return ev.Err
			case store.Added, store.Modified:
				g.Apply(resource, ev.Object)
			case store.Deleted:
				md := ev.Object.GetMetadata()
				g.Remove(resource, md.GetNamespace(), md.GetName(), revisionOf(ev.Object))
			}
			g.Progress(resource, revisionOf(ev.Object))
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
