package project

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// newlyCreated is how recent an object's creation must be for its first sighting to count as activity: after a
// start, the objects that exist arrive as if created, and only the recent ones were (Gardener's
// OnlyNewlyCreatedObjects).
const newlyCreated = time.Hour

// pendingActivity holds the projects with activity not yet written. The activity sources decide what is activity
// and add to it; the reconciler writes only what it takes from it, so keys enqueued for other reasons (a watch
// that starts over enqueues everything it knew) write nothing.
type pendingActivity struct {
	mu       sync.Mutex
	projects map[string]bool
}

func (p *pendingActivity) add(project string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.projects[project] = true
}

func (p *pendingActivity) take(project string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	had := p.projects[project]
	delete(p.projects, project)
	return had
}

// objectState is what an activity source remembers of an object between its changes.
type objectState struct {
	generation int64
	deleting   bool
	labelled   bool
}

// activityFilter is the Map of one activity source. It tells which changes of the collection's objects are
// activity in their project, as Gardener's predicates do:
//
//   - Shoots and BackupEntries (labelled false): a creation, a spec change (generation; also the deletion mark,
//     which Gardener's API counts as a spec change) and a deletion;
//   - Quotas and Secrets (labelled true): a creation, change or deletion of one that carries (or carried) the label
//     reference.gardener.cloud/secretbinding or .../credentialsbinding.
//
// The framework hands Map the object only, not the kind of change: a first sighting is a creation, and a change
// whose object no longer exists in the collection is a deletion. Map is called from the source's goroutine only.
type activityFilter struct {
	coll      *store.Collection
	labelled  bool
	clock     clock.PassiveClock
	pending   *pendingActivity
	projectOf func(namespace string) string
	known     map[string]objectState // by uid
}

// Map returns the project key when the change is activity (and records it as pending), nothing otherwise.
func (f *activityFilter) Map(obj store.Object) []controller.Key {
	md := obj.GetMetadata()
	_, sb := md.GetLabels()[LabelSecretBindingReference]
	_, cb := md.GetLabels()[LabelCredentialsBindingReference]
	now := objectState{generation: md.GetGeneration(), deleting: md.GetDeletionTimestamp() != nil, labelled: sb || cb}
	prev, seen := f.known[md.GetUid()]
	exists := f.exists(obj)
	var active bool
	switch {
	case !seen:
		active = f.clock.Since(md.GetCreationTimestamp().AsTime()) <= newlyCreated && (!f.labelled || now.labelled)
	case !exists:
		active = !f.labelled || now.labelled || prev.labelled
	case f.labelled:
		active = now.labelled || prev.labelled
	default:
		active = now.generation != prev.generation || now.deleting && !prev.deleting
	}
	if exists {
		f.known[md.GetUid()] = now
	} else {
		delete(f.known, md.GetUid())
	}
	if !active {
		return nil
	}
	project := f.projectOf(md.GetNamespace())
	if project == "" {
		return nil
	}
	f.pending.add(project)
	return []controller.Key{{Name: project}}
}

// exists reports whether obj (this uid) is still in the collection's cache.
func (f *activityFilter) exists(obj store.Object) bool {
	md := obj.GetMetadata()
	cur, err := f.coll.Get(context.Background(), md.GetNamespace(), md.GetName())
	return err == nil && cur.GetMetadata().GetUid() == md.GetUid()
}

// activityReconciler is Gardener's project-activity controller: it sets status.lastActivityTimestamp of a project
// with pending activity to now.
type activityReconciler struct {
	projects *store.Collection
	pending  *pendingActivity
	clock    clock.PassiveClock
}

// Reconcile writes the activity of the Project key.Name, if any is pending.
func (r *activityReconciler) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	if !r.pending.take(key.Name) {
		return controller.Result{}, nil
	}
	now := timestamppb.New(r.clock.Now().UTC().Truncate(time.Second))
	_, err := r.projects.GuaranteedUpdate(ctx, "", key.Name, true, func(cur store.Object) (store.Object, error) {
		p := cur.(*corev1beta1.Project)
		// A project being deleted has no use for it (its namespace's content is going).
		if p.GetMetadata().GetDeletionTimestamp() != nil {
			return nil, nil
		}
		if p.Status == nil {
			p.Status = &corev1beta1.ProjectStatus{}
		}
		p.Status.LastActivityTimestamp = now
		return p, nil
	})
	if err := ignoreNotFound(err); err != nil {
		r.pending.add(key.Name) // the retry writes it
		return controller.Result{}, fmt.Errorf("update the lastActivityTimestamp of project %s: %w", key.Name, err)
	}
	return controller.Result{}, nil
}
