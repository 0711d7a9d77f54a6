package seedgraph

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Ref identifies an object: its resource (schema.GroupResource.String(), e.g. "shoots.core.gardener.cloud"),
// namespace ("" when cluster-scoped) and name.
type Ref struct {
	Resource  string
	Namespace string
	Name      string
}

// Key is "namespace/name", or "name" for a cluster-scoped object.
func (r Ref) Key() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// Subscriber hears about every change that concerns one seed: the object behind ref was added to, changed in or
// removed from the seed. Notify runs under the graph's lock, in the order of the graph's changes: it must not block
// and must not call back into the graph.
type Subscriber interface {
	Notify(ref Ref)
}

// Member is an object of a seed.
type Member struct {
	Ref    Ref
	Object store.Object
	// Version is the revision at which the seed's agent has the object as it is now: the later of the object's
	// resourceVersion and the revision since which it belongs to the seed.
	Version int64
	// Shared is whether the object belonged to more than one seed when it was read (a CloudProfile, a Project).
	Shared bool
}

type edge struct {
	count int   // how many declarations make the edge (an object may reference another twice)
	rev   int64 // revision at which the edge appeared
}

type node struct {
	ref Ref
	obj store.Object // nil while the object does not exist (a reference to a missing object)
	rv  int64

	// What the node's own object declares.
	direct          []string
	declOut, declIn []Ref

	children map[*node]*edge
	// parents counts the nodes whose children hold this one: only whether there are any matters (gc), and a map of
	// them cost a map per referenced object and, for an object every seed references, one entry per seed.
	parents int
	// seeds are the seeds the node belongs to.
	seeds memberships
}

// membership is a node's standing in one seed: count is 1 for direct membership plus 1 per parent in that seed,
// since is when the count last left zero.
type membership struct {
	count int
	since int64
}

// memberships holds a node's memberships by seed. Most nodes belong to one seed, which is held inline (a map per node
// cost hundreds of bytes per object, with 10,000 seeds tens of MiB); a map holds them once a second seed comes.
type memberships struct {
	one  string
	oneM membership // count 0: no inline membership
	more map[string]membership
}

func (m *memberships) get(seed string) membership {
	if m.more != nil {
		return m.more[seed]
	}
	if m.oneM.count > 0 && m.one == seed {
		return m.oneM
	}
	return membership{}
}

// set records v (count > 0) for seed.
func (m *memberships) set(seed string, v membership) {
	switch {
	case m.more != nil:
		m.more[seed] = v
	case m.oneM.count == 0 || m.one == seed:
		m.one, m.oneM = seed, v
	default:
		m.more = map[string]membership{m.one: m.oneM, seed: v}
		m.one, m.oneM = "", membership{}
	}
}

func (m *memberships) delete(seed string) {
	if m.more != nil {
		delete(m.more, seed)
		if len(m.more) == 0 {
			m.more = nil
		}
	} else if m.one == seed {
		m.one, m.oneM = "", membership{}
	}
}

func (m *memberships) len() int {
	if m.more != nil {
		return len(m.more)
	}
	if m.oneM.count > 0 {
		return 1
	}
	return 0
}

// all yields every seed with its membership (an iterator, so that callers may change other nodes meanwhile).
func (m *memberships) all(yield func(string, membership) bool) {
	if m.more == nil {
		if m.oneM.count > 0 {
			yield(m.one, m.oneM)
		}
		return
	}
	for s, v := range m.more {
		if !yield(s, v) {
			return
		}
	}
}

// Graph holds the objects of the followed resources and which seeds each belongs to.
type Graph struct {
	mu        sync.RWMutex
	nodes     map[Ref]*node
	bySeed    map[string]map[*node]struct{}
	subs      map[string]map[Subscriber]struct{}
	processed map[string]int64
	// syncedRev is synced() as of the last change of processed, so that Synced, which every agent session asks with
	// every message it sends, takes no lock.
	syncedRev atomic.Int64
}

// New returns an empty graph.
func New() *Graph {
	return &Graph{
		nodes: map[Ref]*node{}, bySeed: map[string]map[*node]struct{}{}, subs: map[string]map[Subscriber]struct{}{},
		processed: map[string]int64{},
	}
}

func revisionOf(obj store.Object) int64 {
	rv, _ := strconv.ParseInt(obj.GetMetadata().GetResourceVersion(), 10, 64)
	return rv
}

// Apply records the current state of an object of resource (an ADDED or MODIFIED event).
func (g *Graph) Apply(resource string, obj store.Object) {
	md := obj.GetMetadata()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.apply(Ref{Resource: resource, Namespace: md.GetNamespace(), Name: md.GetName()}, obj, revisionOf(obj))
}

// Remove records the deletion of an object at revision rev.
func (g *Graph) Remove(resource, namespace, name string, rev int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.apply(Ref{Resource: resource, Namespace: namespace, Name: name}, nil, rev)
}

// Progress records that every change of resource up to rev has been applied.
func (g *Graph) Progress(resource string, rev int64) {
	g.mu.Lock()
	g.setProcessed(resource, rev)
	g.mu.Unlock()
}

// setProcessed records that resource is applied through rev; it runs under the write lock.
func (g *Graph) setProcessed(resource string, rev int64) {
	if rev > g.processed[resource] {
		g.processed[resource] = rev
		g.syncedRev.Store(g.synced())
	}
}

// Synced is the revision through which every change of every followed resource has been applied (and announced to
// subscribers); 0 before the graph has loaded all of them.
func (g *Graph) Synced() int64 {
	return g.syncedRev.Load()
}

func (g *Graph) synced() int64 {
	var lowest int64 = -1
	for _, r := range resources.SeedGraph {
		p, ok := g.processed[r]
		if !ok {
			return 0
		}
		if lowest < 0 || p < lowest {
			lowest = p
		}
	}
	return max(lowest, 0)
}

func (g *Graph) node(ref Ref) *node {
	n := g.nodes[ref]
	if n == nil {
		n = &node{ref: ref} // maps are made on first use: most nodes have few edges and one seed
		g.nodes[ref] = n
	}
	return n
}

func (g *Graph) apply(ref Ref, obj store.Object, rev int64) {
	n := g.node(ref)
	var direct []string
	var out, in []Ref
	if obj != nil {
		direct, out, in = edges(obj)
	}
	n.obj, n.rv = obj, rev
	var touched []*node
	for _, r := range minus(n.declOut, out) {
		if c := g.nodes[r]; c != nil {
			g.unlink(n, c)
			touched = append(touched, c)
		}
	}
	for _, r := range minus(n.declIn, in) {
		if p := g.nodes[r]; p != nil {
			g.unlink(p, n)
			touched = append(touched, p)
		}
	}
	for _, s := range minusStrings(direct, n.direct) {
		g.add(n, s, rev)
	}
	for _, s := range minusStrings(n.direct, direct) {
		g.remove(n, s)
	}
	for _, r := range minus(out, n.declOut) {
		g.link(n, g.node(r), rev)
	}
	for _, r := range minus(in, n.declIn) {
		g.link(g.node(r), n, rev)
	}
	n.direct, n.declOut, n.declIn = direct, out, in
	for s := range n.seeds.all {
		g.notify(s, n.ref)
	}
	for _, t := range touched {
		g.gc(t)
	}
	g.gc(n)
}

func (g *Graph) gc(n *node) {
	if n.obj == nil && n.parents == 0 && len(n.children) == 0 && n.seeds.len() == 0 && g.nodes[n.ref] == n {
		delete(g.nodes, n.ref)
	}
}

func (g *Graph) link(p, c *node, rev int64) {
	if e := p.children[c]; e != nil {
		e.count++
		return
	}
	e := &edge{count: 1, rev: rev}
	if p.children == nil {
		p.children = map[*node]*edge{}
	}
	p.children[c] = e
	c.parents++
	for s, m := range p.seeds.all {
		g.add(c, s, max(m.since, rev))
	}
}

func (g *Graph) unlink(p, c *node) {
	e := p.children[c]
	if e == nil {
		return
	}
	if e.count--; e.count > 0 {
		return
	}
	delete(p.children, c)
	c.parents--
	for s := range p.seeds.all {
		g.remove(c, s)
	}
}

func (g *Graph) add(n *node, seed string, since int64) {
	if m := n.seeds.get(seed); m.count > 0 {
		m.count++
		n.seeds.set(seed, m)
		return
	}
	n.seeds.set(seed, membership{count: 1, since: since})
	m := g.bySeed[seed]
	if m == nil {
		m = map[*node]struct{}{}
		g.bySeed[seed] = m
	}
	m[n] = struct{}{}
	g.notify(seed, n.ref)
	for c, e := range n.children {
		g.add(c, seed, max(since, e.rev))
	}
}

func (g *Graph) remove(n *node, seed string) {
	m := n.seeds.get(seed)
	if m.count == 0 {
		return
	}
	if m.count--; m.count > 0 {
		n.seeds.set(seed, m)
		return
	}
	n.seeds.delete(seed)
	if m := g.bySeed[seed]; m != nil {
		delete(m, n)
		if len(m) == 0 {
			delete(g.bySeed, seed)
		}
	}
	g.notify(seed, n.ref)
	for c := range n.children {
		g.remove(c, seed)
	}
}

func (g *Graph) notify(seed string, ref Ref) {
	for s := range g.subs[seed] {
		s.Notify(ref)
	}
}

// Belongs reports whether the object exists and belongs to seed.
func (g *Graph) Belongs(seed, resource, namespace, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n := g.nodes[Ref{Resource: resource, Namespace: namespace, Name: name}]
	return n != nil && n.obj != nil && n.seeds.get(seed).count > 0
}

// HasPath reports whether the graph relates the object to seed: it exists and belongs to the seed (Belongs), or it
// does not exist (or the graph has not seen it yet) and an object of the seed references it. This is what Gardener's
// SeedAuthorizer asks its graph — is there a path from the object's vertex to the seed's? — whose vertices, like this
// graph's nodes, include referenced objects that do not exist: a seed's agent may look for an object its seed's
// objects name (a BackupBucket's generated secret after it was deleted, a shoot's BackupEntry before it is created)
// and learn that it is missing, and nothing about objects its seed's objects do not name.
func (g *Graph) HasPath(seed, resource, namespace, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n := g.nodes[Ref{Resource: resource, Namespace: namespace, Name: name}]
	// A node without its object has no membership of its own (no direct seeds, no inherited ones: both come from
	// the object): its count holds only the edges from the objects that reference it.
	return n != nil && n.seeds.get(seed).count > 0
}

// Seeds returns the seeds an existing object belongs to.
func (g *Graph) Seeds(resource, namespace, name string) []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n := g.nodes[Ref{Resource: resource, Namespace: namespace, Name: name}]
	if n == nil || n.obj == nil {
		return nil
	}
	seeds := make([]string, 0, n.seeds.len())
	for s := range n.seeds.all {
		seeds = append(seeds, s)
	}
	return seeds
}

// Get returns an object of seed; ok is false when it does not exist or does not belong to the seed.
func (g *Graph) Get(seed string, ref Ref) (Member, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n := g.nodes[ref]
	if n == nil || n.obj == nil || n.seeds.get(seed).count == 0 {
		return Member{}, false
	}
	return n.member(seed), true
}

func (n *node) member(seed string) Member {
	return Member{Ref: n.ref, Object: n.obj, Version: max(n.rv, n.seeds.get(seed).since), Shared: n.seeds.len() > 1}
}

// Members returns every existing object of seed.
func (g *Graph) Members(seed string) []Member {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.members(seed)
}

func (g *Graph) members(seed string) []Member {
	out := make([]Member, 0, len(g.bySeed[seed]))
	for n := range g.bySeed[seed] {
		if n.obj != nil {
			out = append(out, n.member(seed))
		}
	}
	return out
}

// Subscribe registers sub for the changes of seed and, atomically with it, calls initial with the seed's members and
// the revision the graph has synced through: every later change reaches sub. The returned function unsubscribes.
func (g *Graph) Subscribe(seed string, sub Subscriber, initial func(members []Member, synced int64)) (cancel func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if initial != nil {
		initial(g.members(seed), g.synced())
	}
	m := g.subs[seed]
	if m == nil {
		m = map[Subscriber]struct{}{}
		g.subs[seed] = m
	}
	m[sub] = struct{}{}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if m := g.subs[seed]; m != nil {
			delete(m, sub)
			if len(m) == 0 {
				delete(g.subs, seed)
			}
		}
	}
}

// Stats counts the graph's objects and seeds, for metrics.
func (g *Graph) Stats() (objects, seeds int) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.nodes), len(g.bySeed)
}

func minus(a, b []Ref) []Ref {
	var out []Ref
outer:
	for _, x := range a {
		for _, y := range b {
			if x == y {
				continue outer
			}
		}
		out = append(out, x)
	}
	return out
}

func minusStrings(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
