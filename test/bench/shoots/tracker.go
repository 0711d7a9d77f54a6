package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// shootObject is the part of a Shoot the benchmark reads.
type shootObject struct {
	Metadata struct {
		Name            string `json:"name"`
		ResourceVersion string `json:"resourceVersion"`
		Generation      int64  `json:"generation"`
	} `json:"metadata"`
	Spec struct {
		SeedName string `json:"seedName"`
	} `json:"spec"`
	Status struct {
		ObservedGeneration int64  `json:"observedGeneration"`
		SeedName           string `json:"seedName"`
		LastOperation      struct {
			Type        string `json:"type"`
			State       string `json:"state"`
			Description string `json:"description"`
			Progress    int    `json:"progress"`
		} `json:"lastOperation"`
		LastErrors []struct {
			Description string `json:"description"`
		} `json:"lastErrors"`
	} `json:"status"`
}

// shootState is a shoot as the watch last saw it.
type shootState struct {
	shootObject
	// Deleted is set by the DELETED event (or a list without the shoot).
	Deleted bool
	// At is when the state arrived.
	At time.Time
}

func (s *shootState) String() string {
	if s == nil {
		return "never seen"
	}
	if s.Deleted {
		return "deleted"
	}
	lo := s.Status.LastOperation
	out := fmt.Sprintf("generation %d observed %d, seed %q, lastOperation %s %s %d%%", s.Metadata.Generation,
		s.Status.ObservedGeneration, s.Spec.SeedName, lo.Type, lo.State, lo.Progress)
	if lo.Description != "" {
		out += fmt.Sprintf(" (%.200s)", lo.Description)
	}
	for _, e := range s.Status.LastErrors {
		out += fmt.Sprintf("; error: %.200s", e.Description)
	}
	return out
}

// succeeded holds when the shoot's last operation succeeded for its current generation, which is at least gen.
func succeeded(gen int64) func(*shootState) bool {
	return func(s *shootState) bool {
		return !s.Deleted && s.Status.LastOperation.State == "Succeeded" && s.Metadata.Generation >= gen &&
			s.Status.ObservedGeneration == s.Metadata.Generation
	}
}

func deleted(s *shootState) bool { return s.Deleted }

// processing holds when the agent reports an operation of type typ in progress.
func processing(typ string) func(*shootState) bool {
	return func(s *shootState) bool {
		return !s.Deleted && s.Status.LastOperation.State == "Processing" && s.Status.LastOperation.Type == typ
	}
}

// goal is a condition on one shoot that a phase waits for; done is closed when the watch first delivered a state
// that meets it, at at. On the way it notes when a new shoot first had a seed (scheduledAt) and when the agent's
// operation started (startedAt: the first state meeting started).
type goal struct {
	name     string
	cond     func(*shootState) bool
	started  func(*shootState) bool
	newShoot bool // the shoot did not exist when the goal was set
	done     chan struct{}

	// Written under the tracker's lock until done is closed; read after.
	at, scheduledAt, startedAt time.Time
}

// observe notes s's milestones and reports whether s meets the goal; the tracker's lock is held.
func (g *goal) observe(s *shootState) bool {
	if g.newShoot && g.scheduledAt.IsZero() && !s.Deleted && s.Spec.SeedName != "" {
		g.scheduledAt = s.At
	}
	if g.startedAt.IsZero() && g.started != nil && g.started(s) {
		g.startedAt = s.At
	}
	if !g.cond(s) {
		return false
	}
	g.at = s.At
	close(g.done)
	return true
}

// tracker keeps the latest state of every shoot whose name has prefix, from one watch of the shoots collection,
// and tells goals when they are met.
type tracker struct {
	c      *hubClient
	prefix string

	mu     sync.Mutex
	shoots map[string]*shootState
	goals  map[string]*goal
	stats  watchStats
	synced chan struct{} // closed after the first list
}

// watchStats are what the watch went through.
type watchStats struct {
	Events     int `json:"events"`     // ADDED, MODIFIED and DELETED events of tracked shoots
	Bookmarks  int `json:"bookmarks"`  // BOOKMARK events
	Lists      int `json:"lists"`      // the first list, and one after each 410 Expired
	Reconnects int `json:"reconnects"` // watches started again after a broken stream
	// LastError is the last error of the watch that made it reconnect or list again.
	LastError string `json:"lastError,omitempty"`
}

func newTracker(c *hubClient, prefix string) *tracker {
	return &tracker{c: c, prefix: prefix, shoots: map[string]*shootState{}, goals: map[string]*goal{}, synced: make(chan struct{})}
}

// expect registers a goal for a shoot, replacing an earlier one; a state that meets it already completes it.
// started (may be nil) marks the start of the agent's operation.
func (t *tracker) expect(name string, cond, started func(*shootState) bool) *goal {
	g := &goal{name: name, cond: cond, started: started, done: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.shoots[name]
	g.newShoot = s == nil || s.Deleted
	if s != nil && g.observe(s) {
		delete(t.goals, name)
		return g
	}
	t.goals[name] = g
	return g
}

// state returns a copy of the shoot's latest state, nil if none was seen.
func (t *tracker) state(name string) *shootState {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.shoots[name]; s != nil {
		c := *s
		return &c
	}
	return nil
}

// placement counts the tracked shoots that exist by seed (status.seedName, else spec.seedName).
func (t *tracker) placement() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for _, s := range t.shoots {
		if s.Deleted {
			continue
		}
		seed := s.Status.SeedName
		if seed == "" {
			seed = s.Spec.SeedName
		}
		out[seed]++
	}
	return out
}

func (t *tracker) statsCopy() watchStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

// apply records a shoot's new state and completes its goal when the state meets it.
func (t *tracker) apply(s *shootState) {
	name := s.Metadata.Name
	if !strings.HasPrefix(name, t.prefix) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.shoots[name] = s
	if g := t.goals[name]; g != nil && g.observe(s) {
		delete(t.goals, name)
	}
}

// run lists and watches the shoots until ctx ends: a broken stream is watched again from the last resourceVersion,
// one the hub no longer keeps (410 Expired) is listed again.
func (t *tracker) run(ctx context.Context) {
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			var err error
			if rv, err = t.list(ctx); err != nil {
				t.noteError(fmt.Errorf("list: %w", err))
				sleep(ctx, 100*time.Millisecond)
				continue
			}
		}
		next, err := t.watch(ctx, rv)
		if ctx.Err() != nil {
			return
		}
		t.mu.Lock()
		t.stats.Reconnects++
		t.mu.Unlock()
		t.noteError(err)
		if isStatus(err, http.StatusGone) {
			rv = ""
			continue
		}
		rv = next
		sleep(ctx, 100*time.Millisecond)
	}
}

func (t *tracker) noteError(err error) {
	if err == nil {
		return
	}
	t.mu.Lock()
	t.stats.LastError = err.Error()
	t.mu.Unlock()
}

// list reads the collection, replaces the tracked states with it (a tracked shoot that is not listed is deleted)
// and returns the list's resourceVersion.
func (t *tracker) list(ctx context.Context) (string, error) {
	body, err := t.c.must(ctx, http.MethodGet, shootsPath, nil, http.StatusOK)
	if err != nil {
		return "", err
	}
	at := time.Now()
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []shootObject `json:"items"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return "", fmt.Errorf("decode list: %w", err)
	}
	listed := map[string]bool{}
	for _, o := range l.Items {
		listed[o.Metadata.Name] = true
		t.apply(&shootState{shootObject: o, At: at})
	}
	t.mu.Lock()
	var gone []string
	for name, s := range t.shoots {
		if !listed[name] && !s.Deleted {
			gone = append(gone, name)
		}
	}
	t.stats.Lists++
	t.mu.Unlock()
	for _, name := range gone {
		s := &shootState{Deleted: true, At: at}
		s.Metadata.Name = name
		t.apply(s)
	}
	select {
	case <-t.synced:
	default:
		close(t.synced)
	}
	return l.Metadata.ResourceVersion, nil
}

// watch follows the collection from rv until the stream ends; it returns the last resourceVersion seen.
func (t *tracker) watch(ctx context.Context, rv string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.c.url+shootsPath+"?watch=true&allowWatchBookmarks=true&resourceVersion="+rv, nil)
	if err != nil {
		return rv, err
	}
	req.Header.Set("Authorization", "Bearer "+t.c.token)
	resp, err := t.c.stream.Do(req)
	if err != nil {
		return rv, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return rv, &statusError{method: http.MethodGet, path: shootsPath + "?watch=true", code: resp.StatusCode, body: body}
	}
	r := bufio.NewReaderSize(resp.Body, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		at := time.Now()
		if len(bytes.TrimSpace(line)) > 0 {
			var ev struct {
				Type   string          `json:"type"`
				Object json.RawMessage `json:"object"`
			}
			if jerr := json.Unmarshal(line, &ev); jerr != nil {
				return rv, fmt.Errorf("watch event: %w", jerr)
			}
			switch ev.Type {
			case "ERROR":
				var st struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				}
				_ = json.Unmarshal(ev.Object, &st)
				return rv, &statusError{method: http.MethodGet, path: shootsPath + "?watch=true", code: st.Code, body: []byte(st.Message)}
			case "BOOKMARK", "ADDED", "MODIFIED", "DELETED":
				var o shootObject
				if jerr := json.Unmarshal(ev.Object, &o); jerr != nil {
					return rv, fmt.Errorf("watch %s event: %w", ev.Type, jerr)
				}
				if o.Metadata.ResourceVersion != "" {
					rv = o.Metadata.ResourceVersion
				}
				t.mu.Lock()
				if ev.Type == "BOOKMARK" {
					t.stats.Bookmarks++
				} else if strings.HasPrefix(o.Metadata.Name, t.prefix) {
					t.stats.Events++
				}
				t.mu.Unlock()
				if ev.Type != "BOOKMARK" {
					t.apply(&shootState{shootObject: o, Deleted: ev.Type == "DELETED", At: at})
				}
			}
		}
		if err != nil {
			return rv, fmt.Errorf("watch stream ended: %w", err)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
