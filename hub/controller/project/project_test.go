package project

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// TestReconcileNamespace: the namespace is created or adopted under Gardener's rules, and the phase and event say
// how it went.
func TestReconcileNamespace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		project func(*corev1beta1.Project)
		// existing namespace garden-dev, if any (annotation value "uid" stands for the project's uid)
		existing *kcorev1.Namespace
		phase    string
		events   []string
		// wantLabels/wantAnnotations must be on the namespace afterwards (nil: the namespace is left as it was)
		wantLabels, wantAnnotations map[string]string
		owned                       bool
	}{
		{name: "created", phase: PhaseReady,
			events:     []string{`Normal NamespaceReconcileSuccessful: Successfully reconciled namespace "garden-dev" for project`},
			wantLabels: projectLabels("dev"), wantAnnotations: map[string]string{AnnotationNamespaceProject: "uid", AnnotationCreatedByProjectController: "true"},
			owned: true},
		{name: "spec.namespace unset: garden-<name>", project: func(p *corev1beta1.Project) { p.Spec.Namespace = nil }, phase: PhaseReady,
			events:     []string{`Normal NamespaceReconcileSuccessful: Successfully reconciled namespace "garden-dev" for project`},
			wantLabels: projectLabels("dev"), wantAnnotations: map[string]string{AnnotationNamespaceProject: "uid", AnnotationCreatedByProjectController: "true"},
			owned: true},
		{name: "labelled namespace adopted and kept after deletion", existing: newNamespace("garden-dev", map[string]string{LabelRole: RoleProject, LabelProjectName: "dev", "team": "a"}, nil),
			phase:           PhaseReady,
			events:          []string{`Normal NamespaceReconcileSuccessful: Successfully reconciled namespace "garden-dev" for project`},
			wantLabels:      map[string]string{LabelRole: RoleProject, LabelProjectName: "dev", "team": "a"},
			wantAnnotations: map[string]string{AnnotationNamespaceProject: "uid", AnnotationKeepAfterProjectDeletion: "true"},
			owned:           true},
		{name: "unlabelled namespace refused", existing: newNamespace("garden-dev", map[string]string{"team": "a"}, nil), phase: PhaseFailed,
			events: []string{`Warning NamespaceReconcileFailed: namespace "garden-dev" cannot be used as it needs the project labels map[string]string{"gardener.cloud/role":"project", "project.gardener.cloud/name":"dev"}`}},
		{name: "namespace of another project refused", existing: newNamespace("garden-dev", projectLabels("other"), nil), phase: PhaseFailed,
			events: []string{`Warning NamespaceReconcileFailed: namespace "garden-dev" cannot be used as it needs the project labels map[string]string{"gardener.cloud/role":"project", "project.gardener.cloud/name":"dev"}`}},
		{name: "namespace in use by another project's uid refused", existing: newNamespace("garden-dev", projectLabels("dev"), map[string]string{AnnotationNamespaceProject: "another-uid"}),
			phase:  PhaseFailed,
			events: []string{`Warning NamespaceReconcileFailed: namespace "garden-dev" is already in-use by another project`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var before *kcorev1.Namespace
			if tc.existing != nil {
				before = controllertest.Create(e.t, e.c.namespaces, tc.existing)
			}
			mutate := []func(*corev1beta1.Project){}
			if tc.project != nil {
				mutate = append(mutate, tc.project)
			}
			p := controllertest.Create(e.t, e.c.projects, newProject("dev", mutate...))
			uid := p.GetMetadata().GetUid()

			_, err := e.main().Reconcile(e.ctx, controller.Key{Name: "dev"})
			if (err != nil) != (tc.phase == PhaseFailed) {
				t.Fatalf("reconcile error %v, phase wanted %s", err, tc.phase)
			}
			got := e.project("dev")
			if got.GetStatus().GetPhase() != tc.phase || got.GetStatus().GetObservedGeneration() != got.GetMetadata().GetGeneration() {
				t.Fatalf("status %v, want phase %s at generation %d", got.GetStatus(), tc.phase, got.GetMetadata().GetGeneration())
			}
			if !slices.Contains(got.GetMetadata().GetFinalizers(), FinalizerGardener) {
				t.Fatalf("finalizers %v lack %s", got.GetMetadata().GetFinalizers(), FinalizerGardener)
			}
			if ev := e.events("dev"); !slices.Equal(ev, tc.events) {
				t.Fatalf("events\n got  %q\n want %q", ev, tc.events)
			}
			ns := e.namespace("garden-dev")
			if ns == nil {
				t.Fatal("no namespace garden-dev")
			}
			if tc.wantLabels == nil {
				if ns.GetMetadata().GetResourceVersion() != before.GetMetadata().GetResourceVersion() {
					t.Fatalf("a refused namespace was changed: %v", ns.GetMetadata())
				}
				return
			}
			if got.GetSpec().GetNamespace() != "garden-dev" {
				t.Fatalf("spec.namespace %q, want garden-dev", got.GetSpec().GetNamespace())
			}
			if !maps.Equal(ns.GetMetadata().GetLabels(), tc.wantLabels) {
				t.Fatalf("labels %v, want %v", ns.GetMetadata().GetLabels(), tc.wantLabels)
			}
			want := maps.Clone(tc.wantAnnotations)
			want[AnnotationNamespaceProject] = uid
			if !maps.Equal(ns.GetMetadata().GetAnnotations(), want) {
				t.Fatalf("annotations %v, want %v", ns.GetMetadata().GetAnnotations(), want)
			}
			refs := ns.GetMetadata().GetOwnerReferences()
			if tc.owned && (len(refs) != 1 || refs[0].GetKind() != "Project" || refs[0].GetName() != "dev" || refs[0].GetUid() != uid || !refs[0].GetController()) {
				t.Fatalf("owner references %v, want the project as controller", refs)
			}
			if tc.existing == nil && ns.GetStatus().GetPhase() != "Active" {
				t.Fatalf("namespace phase %q, want Active", ns.GetStatus().GetPhase())
			}
		})
	}
}

// TestRefusedNamespaceLabelledLater: once the namespace carries the labels, the next reconciliation adopts it.
func TestRefusedNamespaceLabelledLater(t *testing.T) {
	e := newEnv(t)
	controllertest.Create(e.t, e.c.namespaces, newNamespace("garden-dev", nil, nil))
	controllertest.Create(e.t, e.c.projects, newProject("dev"))
	if _, err := e.main().Reconcile(e.ctx, controller.Key{Name: "dev"}); err == nil {
		t.Fatal("an unlabelled namespace was adopted")
	}
	controllertest.Update(e.t, e.c.namespaces, "", "garden-dev", false, func(o store.Object) { o.GetMetadata().Labels = projectLabels("dev") })
	if _, err := e.main().Reconcile(e.ctx, controller.Key{Name: "dev"}); err != nil {
		t.Fatal(err)
	}
	if phase := e.project("dev").GetStatus().GetPhase(); phase != PhaseReady {
		t.Fatalf("phase %s, want Ready", phase)
	}
}

// TestDeletion: a project being deleted waits while its namespace holds shoots, then releases the namespace (kept
// when so annotated, never one that is not the project's) and goes.
func TestDeletion(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare runs after the project is Ready, before its deletion.
		prepare func(e *env)
		// the outcome of the first reconciliation of the deletion
		projectGone, namespaceGone, contentGone bool
		phase                                   string
		requeue                                 bool
		events                                  []string
		// keptClean: the namespace stays without the project's labels, annotations and owner reference
		keptClean bool
	}{
		{name: "shoots in the namespace: wait", prepare: func(e *env) { controllertest.Create(e.t, e.c.shoots, newShoot("garden-dev", "s1")) },
			phase:  PhaseTerminating,
			events: []string{`Warning NamespaceNotEmpty: Cannot release namespace "garden-dev" because it still contains Shoots`}},
		{name: "empty of shoots: namespace and content deleted", projectGone: true, namespaceGone: true, contentGone: true,
			events: []string{`Normal NamespaceMarkedForDeletion: Successfully marked project namespace "garden-dev" for deletion`}},
		{name: "content held by a finalizer: wait", prepare: func(e *env) {
			controllertest.Update(e.t, e.c.secrets, "garden-dev", "creds", false, withFinalizers("example.com/keep"))
		}, phase: PhaseTerminating, requeue: true,
			events: []string{`Normal NamespaceMarkedForDeletion: Successfully marked project namespace "garden-dev" for deletion`}},
		{name: "keep-after-project-deletion: namespace kept without the project's marks", prepare: func(e *env) {
			controllertest.Update(e.t, e.c.namespaces, "", "garden-dev", false, func(o store.Object) {
				o.GetMetadata().Annotations[AnnotationKeepAfterProjectDeletion] = "true"
			})
		}, projectGone: true, keptClean: true},
		{name: "namespace relabelled for another project: left alone", prepare: func(e *env) {
			controllertest.Update(e.t, e.c.namespaces, "", "garden-dev", false, func(o store.Object) { o.GetMetadata().Labels[LabelProjectName] = "other" })
		}, projectGone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.readyProject("dev")
			controllertest.Create(e.t, e.c.secrets, newSecret("garden-dev", "creds", nil))
			controllertest.Create(e.t, e.c.secretBindings, &corev1beta1.SecretBinding{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "b"},
				SecretRef: &metav1.SecretReference{Namespace: "garden-dev", Name: "creds"}})
			if tc.prepare != nil {
				tc.prepare(e)
			}
			eventsBefore := e.events("dev")
			controllertest.Update(e.t, e.c.projects, "", "dev", false, func(o store.Object) {
				o.GetMetadata().Annotations = map[string]string{AnnotationConfirmDeletion: "true"}
			})
			controllertest.Delete(e.t, e.c.projects, "", "dev")

			res, err := e.main().Reconcile(e.ctx, controller.Key{Name: "dev"})
			if err != nil {
				t.Fatal(err)
			}
			if (res.RequeueAfter > 0) != tc.requeue {
				t.Fatalf("requeue after %s, want a requeue: %t", res.RequeueAfter, tc.requeue)
			}
			p := e.project("dev")
			if (p == nil) != tc.projectGone {
				t.Fatalf("project %v, want gone: %t", p, tc.projectGone)
			}
			if p != nil && p.GetStatus().GetPhase() != tc.phase {
				t.Fatalf("phase %q, want %q", p.GetStatus().GetPhase(), tc.phase)
			}
			ns := e.namespace("garden-dev")
			if (ns == nil) != tc.namespaceGone {
				t.Fatalf("namespace %v, want gone: %t", ns, tc.namespaceGone)
			}
			secret, binding := controllertest.Get[store.Object](e.t, e.c.secrets, "garden-dev", "creds"), controllertest.Get[store.Object](e.t, e.c.secretBindings, "garden-dev", "b")
			if tc.contentGone != (secret == nil && binding == nil) {
				t.Fatalf("content: secret %v, binding %v, want gone: %t", secret != nil, binding != nil, tc.contentGone)
			}
			if ev := slices.DeleteFunc(e.events("dev"), func(s string) bool { return slices.Contains(eventsBefore, s) }); !slices.Equal(ev, tc.events) {
				t.Fatalf("events\n got  %q\n want %q", ev, tc.events)
			}
			if tc.keptClean {
				md := ns.GetMetadata()
				if len(md.GetLabels()) != 0 || len(md.GetAnnotations()) != 0 || len(md.GetOwnerReferences()) != 0 || md.GetDeletionTimestamp() != nil {
					t.Fatalf("kept namespace still marked: %v", md)
				}
			}
		})
	}
}

// TestDeletionProceeds: the waits end when what they wait for goes; a terminating namespace refuses nothing of
// its own accord here (the API's NamespaceLifecycle does), but it stays until it is empty.
func TestDeletionProceeds(t *testing.T) {
	e := newEnv(t)
	e.readyProject("dev")
	controllertest.Create(e.t, e.c.shoots, newShoot("garden-dev", "s1"))
	controllertest.Create(e.t, e.c.secrets, newSecret("garden-dev", "held", nil))
	controllertest.Update(e.t, e.c.secrets, "garden-dev", "held", false, withFinalizers("example.com/keep"))
	controllertest.Update(e.t, e.c.projects, "", "dev", false, func(o store.Object) {
		o.GetMetadata().Annotations = map[string]string{AnnotationConfirmDeletion: "true"}
	})
	controllertest.Delete(e.t, e.c.projects, "", "dev")
	reconcile := func() {
		t.Helper()
		if _, err := e.main().Reconcile(e.ctx, controller.Key{Name: "dev"}); err != nil {
			t.Fatal(err)
		}
	}
	reconcile()
	if ns := e.namespace("garden-dev"); ns.GetMetadata().GetDeletionTimestamp() != nil {
		t.Fatal("the namespace was marked for deletion while it holds a shoot")
	}
	controllertest.Delete(e.t, e.c.shoots, "garden-dev", "s1")
	reconcile()
	ns := e.namespace("garden-dev")
	if ns.GetMetadata().GetDeletionTimestamp() == nil || !slices.Contains(ns.GetMetadata().GetFinalizers(), FinalizerNamespaceContent) {
		t.Fatalf("namespace %v, want terminating with %s", ns.GetMetadata(), FinalizerNamespaceContent)
	}
	if e.project("dev") == nil {
		t.Fatal("the project went before its namespace")
	}
	controllertest.Update(e.t, e.c.secrets, "garden-dev", "held", false, withFinalizers())
	reconcile()
	if e.namespace("garden-dev") != nil || e.project("dev") != nil {
		t.Fatal("the namespace and the project should be gone")
	}
	for _, ev := range e.events("dev") {
		if strings.Contains(ev, "Failed") {
			t.Fatalf("failure event %q", ev)
		}
	}
}
