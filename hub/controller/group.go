package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/store"
)

// Collections gives controllers the store's collections by resource; *api.Registry is one.
type Collections interface {
	Collection(gr schema.GroupResource) (*store.Collection, bool)
}

// OpenCollections points every destination in want at the collection src serves for its resource. The error, prefixed
// with owner, names every resource src does not serve.
func OpenCollections(src Collections, owner string, want map[schema.GroupResource]**store.Collection) error {
	var missing []string
	for gr, dst := range want {
		col, ok := src.Collection(gr)
		if !ok {
			missing = append(missing, gr.String())
			continue
		}
		*dst = col
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%s: not served: %s", owner, strings.Join(missing, ", "))
	}
	return nil
}

// Group is controllers that run together, the unit a package of controllers hands to the hub.
type Group []*Controller

// Run runs every controller of the group until ctx ends.
func (g Group) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, c := range g {
		wg.Go(func() { _ = c.Run(ctx) })
	}
	wg.Wait()
	return nil
}

// Select returns the controllers of the group whose names keep accepts.
func (g Group) Select(keep func(name string) bool) Group {
	var out Group
	for _, c := range g {
		if keep(c.Name()) {
			out = append(out, c)
		}
	}
	return out
}
