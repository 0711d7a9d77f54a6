package project

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

const day = 24 * time.Hour

// gardenerStale is Gardener's default configuration.
var gardenerStale = staleConfig{minimumLifetime: 30 * day, gracePeriod: 14 * day, expiration: 90 * day, syncPeriod: 12 * time.Hour}

func at(t time.Time) *time.Time { return &t }

// TestStaleTimestamps: the rules of staleSinceTimestamp and staleAutoDeleteTimestamp, including the edge case that a
// shorter staleExpirationTimeDays never moves an assigned auto-delete time earlier.
func TestStaleTimestamps(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                      string
		expiration                time.Duration
		since, autoDelete         *time.Time
		wantSince, wantAutoDelete *time.Time
	}{
		{name: "first found stale: since now, no auto-delete yet", wantSince: at(now)},
		{name: "first found stale: since is second-precise", wantSince: at(now)},
		{name: "within the grace period", since: at(now.Add(-13 * day)), wantSince: at(now.Add(-13 * day))},
		{name: "within the grace period: an assigned auto-delete time is reset", since: at(now.Add(-13 * day)), autoDelete: at(now.Add(time.Hour)),
			wantSince: at(now.Add(-13 * day))},
		{name: "grace period just over", since: at(now.Add(-14 * day)), wantSince: at(now.Add(-14 * day)), wantAutoDelete: at(now.Add(76 * day))},
		{name: "grace period over: since + expiration", since: at(now.Add(-20 * day)), wantSince: at(now.Add(-20 * day)), wantAutoDelete: at(now.Add(70 * day))},
		{name: "expiration decreased: the assigned time stays", expiration: 30 * day, since: at(now.Add(-20 * day)), autoDelete: at(now.Add(70 * day)),
			wantSince: at(now.Add(-20 * day)), wantAutoDelete: at(now.Add(70 * day))},
		{name: "expiration increased: the assigned time moves later", expiration: 120 * day, since: at(now.Add(-20 * day)), autoDelete: at(now.Add(70 * day)),
			wantSince: at(now.Add(-20 * day)), wantAutoDelete: at(now.Add(100 * day))},
		{name: "auto-delete time passed", since: at(now.Add(-100 * day)), autoDelete: at(now.Add(-10 * day)),
			wantSince: at(now.Add(-100 * day)), wantAutoDelete: at(now.Add(-10 * day))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := gardenerStale
			if tc.expiration != 0 {
				cfg.expiration = tc.expiration
			}
			clockNow := now
			if tc.name == "first found stale: since is second-precise" {
				clockNow = now.Add(700 * time.Millisecond)
			}
			since, autoDelete := cfg.staleTimestamps(clockNow, tc.since, tc.autoDelete)
			if !equalTime(since, tc.wantSince) || !equalTime(autoDelete, tc.wantAutoDelete) {
				t.Fatalf("since %v, auto-delete %v; want %v, %v", since, autoDelete, tc.wantSince, tc.wantAutoDelete)
			}
		})
	}
}

func equalTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// TestNotStale: what keeps a project from being stale whatever uses it.
func TestNotStale(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		created     time.Time
		activity    *time.Time
		annotations map[string]string
		notStale    bool
	}{
		{name: "old and idle", created: now.Add(-31 * day)},
		{name: "younger than the minimum lifetime", created: now.Add(-29 * day), notStale: true},
		{name: "active within the minimum lifetime", created: now.Add(-300 * day), activity: at(now.Add(-29 * day)), notStale: true},
		{name: "active before the minimum lifetime", created: now.Add(-300 * day), activity: at(now.Add(-31 * day))},
		{name: "skip annotation", created: now.Add(-300 * day), annotations: map[string]string{AnnotationSkipStaleCheck: "true"}, notStale: true},
		{name: "skip annotation as strconv.ParseBool reads it", created: now.Add(-300 * day), annotations: map[string]string{AnnotationSkipStaleCheck: "1"}, notStale: true},
		{name: "skip annotation false", created: now.Add(-300 * day), annotations: map[string]string{AnnotationSkipStaleCheck: "false"}},
		{name: "skip annotation unreadable", created: now.Add(-300 * day), annotations: map[string]string{AnnotationSkipStaleCheck: "yes please"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProject("dev")
			p.Metadata.CreationTimestamp = ts(tc.created)
			p.Status = &corev1beta1.ProjectStatus{}
			if tc.activity != nil {
				p.Status.LastActivityTimestamp = ts(*tc.activity)
			}
			reason := gardenerStale.notStale(now, p, newNamespace("garden-dev", projectLabels("dev"), tc.annotations))
			if (reason != "") != tc.notStale {
				t.Fatalf("reason %q, want not stale: %t", reason, tc.notStale)
			}
		})
	}
}

// staleEnv is an idle project "dev" older than the minimum lifetime, on a clock 31 days after its creation.
func staleEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.readyProject("dev")
	e.clk.SetTime(e.project("dev").GetMetadata().GetCreationTimestamp().AsTime().Add(31 * day))
	return e
}

func (e *env) reconcileStale(cfg staleConfig) {
	e.t.Helper()
	res, err := e.stale(cfg).Reconcile(e.ctx, controller.Key{Name: "dev"})
	if err != nil {
		e.t.Fatal(err)
	}
	if res.RequeueAfter != cfg.syncPeriod {
		e.t.Fatalf("requeue after %s, want the sync period %s", res.RequeueAfter, cfg.syncPeriod)
	}
}

// TestStaleInUse: the uses Gardener counts, each of which keeps a project from being stale, and look-alikes that
// do not.
func TestStaleInUse(t *testing.T) {
	sbLabel := map[string]string{LabelSecretBindingReference: "true"}
	cbLabel := map[string]string{LabelCredentialsBindingReference: "true"}
	shootUsing := func(ns, name string, mutate func(*corev1beta1.Shoot)) func(*env) {
		return func(e *env) { controllertest.Create(e.t, e.c.shoots, newShoot(ns, name, mutate)) }
	}
	withSecretBinding := func(n string) func(*corev1beta1.Shoot) {
		return func(s *corev1beta1.Shoot) { s.Spec.SecretBindingName = proto.String(n) }
	}
	withCredentialsBinding := func(n string) func(*corev1beta1.Shoot) {
		return func(s *corev1beta1.Shoot) { s.Spec.CredentialsBindingName = proto.String(n) }
	}
	secretBinding := func(ns, name, secretNS, secret string, quotas ...*metav1.ObjectReference) func(*env) {
		return func(e *env) {
			controllertest.Create(e.t, e.c.secretBindings, &corev1beta1.SecretBinding{Metadata: &metav1.ObjectMeta{Namespace: ns, Name: name},
				SecretRef: &metav1.SecretReference{Namespace: secretNS, Name: secret}, Quotas: quotas})
		}
	}
	credentialsBinding := func(ns, name string, ref *metav1.ObjectReference, quotas ...*metav1.ObjectReference) func(*env) {
		return func(e *env) {
			controllertest.Create(e.t, e.c.credentialsBindings, &securityv1alpha1.CredentialsBinding{Metadata: &metav1.ObjectMeta{Namespace: ns, Name: name},
				CredentialsRef: ref, Quotas: quotas})
		}
	}
	secret := func(name string, labels map[string]string) func(*env) {
		return func(e *env) { controllertest.Create(e.t, e.c.secrets, newSecret("garden-dev", name, labels)) }
	}
	quota := func(e *env) {
		controllertest.Create(e.t, e.c.quotas, &corev1beta1.Quota{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "q"}})
	}
	quotaRef := &metav1.ObjectReference{Namespace: "garden-dev", Name: "q"}
	for _, tc := range []struct {
		name  string
		setup []func(*env)
		stale bool
	}{
		{name: "nothing", stale: true},
		{name: "a shoot", setup: []func(*env){shootUsing("garden-dev", "s", nil)}},
		{name: "a backup entry", setup: []func(*env){func(e *env) {
			controllertest.Create(e.t, e.c.backupEntries, &corev1beta1.BackupEntry{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "be"}})
		}}},
		{name: "a secret whose secret binding a shoot elsewhere uses", setup: []func(*env){
			secret("creds", sbLabel), secretBinding("garden-other", "b", "garden-dev", "creds"), shootUsing("garden-other", "s", withSecretBinding("b"))}},
		{name: "a secret whose secret binding no shoot uses", stale: true, setup: []func(*env){
			secret("creds", sbLabel), secretBinding("garden-other", "b", "garden-dev", "creds"), shootUsing("garden-other", "s", withSecretBinding("other"))}},
		{name: "a used secret without the reference label", stale: true, setup: []func(*env){
			secret("creds", nil), secretBinding("garden-other", "b", "garden-dev", "creds"), shootUsing("garden-other", "s", withSecretBinding("b"))}},
		{name: "a used control-plane secret", stale: true, setup: []func(*env){
			secret("creds", map[string]string{LabelSecretBindingReference: "true", LabelRole: "kubeconfig"}),
			secretBinding("garden-other", "b", "garden-dev", "creds"), shootUsing("garden-other", "s", withSecretBinding("b"))}},
		{name: "a secret whose credentials binding a shoot uses", setup: []func(*env){
			secret("creds", cbLabel), credentialsBinding("garden-other", "cb", &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Namespace: "garden-dev", Name: "creds"}),
			shootUsing("garden-other", "s", withCredentialsBinding("cb"))}},
		{name: "a credentials binding of another kind of the same name", stale: true, setup: []func(*env){
			secret("creds", cbLabel), credentialsBinding("garden-other", "cb", &metav1.ObjectReference{ApiVersion: "security.gardener.cloud/v1alpha1", Kind: "WorkloadIdentity", Namespace: "garden-dev", Name: "creds"}),
			shootUsing("garden-other", "s", withCredentialsBinding("cb"))}},
		{name: "an internal secret whose credentials binding a shoot uses", setup: []func(*env){
			func(e *env) {
				controllertest.Create(e.t, e.c.internalSecrets, &corev1beta1.InternalSecret{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "is", Labels: cbLabel}})
			},
			credentialsBinding("garden-other", "cb", &metav1.ObjectReference{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "InternalSecret", Namespace: "garden-dev", Name: "is"}),
			shootUsing("garden-other", "s", withCredentialsBinding("cb"))}},
		{name: "a workload identity whose credentials binding a shoot uses", setup: []func(*env){
			func(e *env) {
				controllertest.Create(e.t, e.c.workloadIdentities, &securityv1alpha1.WorkloadIdentity{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "wi", Labels: cbLabel}})
			},
			credentialsBinding("garden-other", "cb", &metav1.ObjectReference{ApiVersion: "security.gardener.cloud/v1alpha1", Kind: "WorkloadIdentity", Namespace: "garden-dev", Name: "wi"}),
			shootUsing("garden-other", "s", withCredentialsBinding("cb"))}},
		{name: "a quota of a used secret binding", setup: []func(*env){
			quota, secretBinding("garden-other", "b", "garden-other", "creds", quotaRef), shootUsing("garden-other", "s", withSecretBinding("b"))}},
		{name: "a quota of a used credentials binding", setup: []func(*env){
			quota, credentialsBinding("garden-other", "cb", &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Namespace: "garden-other", Name: "x"}, quotaRef),
			shootUsing("garden-other", "s", withCredentialsBinding("cb"))}},
		{name: "a quota of an unused binding", stale: true, setup: []func(*env){
			quota, secretBinding("garden-other", "b", "garden-other", "creds", quotaRef)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := staleEnv(t)
			for _, s := range tc.setup {
				s(e)
			}
			e.reconcileStale(gardenerStale)
			st := e.project("dev").GetStatus()
			if (st.GetStaleSinceTimestamp() != nil) != tc.stale {
				t.Fatalf("staleSinceTimestamp %v, want stale: %t", st.GetStaleSinceTimestamp(), tc.stale)
			}
			if tc.stale && !st.GetStaleSinceTimestamp().AsTime().Equal(e.clk.Now().UTC().Truncate(time.Second)) {
				t.Fatalf("staleSinceTimestamp %v, want now (%v)", st.GetStaleSinceTimestamp().AsTime(), e.clk.Now())
			}
			if st.GetStaleAutoDeleteTimestamp() != nil {
				t.Fatalf("an auto-delete time within the grace period: %v", st.GetStaleAutoDeleteTimestamp())
			}
		})
	}
}

// TestStaleLifecycle: stale, then an auto-delete time after the grace period that a shorter expiration does not move
// earlier, then deletion with the confirmation once it has passed; and back to not stale on use.
func TestStaleLifecycle(t *testing.T) {
	e := staleEnv(t)
	e.reconcileStale(gardenerStale)
	since := e.project("dev").GetStatus().GetStaleSinceTimestamp().AsTime()

	e.clk.Step(15 * day)
	e.reconcileStale(gardenerStale)
	st := e.project("dev").GetStatus()
	if !st.GetStaleSinceTimestamp().AsTime().Equal(since) || !st.GetStaleAutoDeleteTimestamp().AsTime().Equal(since.Add(90*day)) {
		t.Fatalf("status %v, want stale since %v and auto-delete 90 days later", st, since)
	}

	// The operator shortens staleExpirationTimeDays: the assigned time stays.
	shorter := gardenerStale
	shorter.expiration = 30 * day
	e.reconcileStale(shorter)
	if got := e.project("dev").GetStatus().GetStaleAutoDeleteTimestamp().AsTime(); !got.Equal(since.Add(90 * day)) {
		t.Fatalf("auto-delete moved to %v by a shorter expiration, want %v", got, since.Add(90*day))
	}
	// Even once the shorter expiration has passed, nothing is deleted before the assigned time.
	e.clk.SetTime(since.Add(31 * day))
	e.reconcileStale(shorter)
	if p := e.project("dev"); p.GetMetadata().GetDeletionTimestamp() != nil {
		t.Fatal("deleted before the assigned auto-delete time")
	}

	// The namespace skips the check: not stale.
	controllertest.Update(e.t, e.c.namespaces, "", "garden-dev", false, func(o store.Object) {
		o.GetMetadata().Annotations[AnnotationSkipStaleCheck] = "true"
	})
	e.reconcileStale(gardenerStale)
	if st := e.project("dev").GetStatus(); st.GetStaleSinceTimestamp() != nil || st.GetStaleAutoDeleteTimestamp() != nil {
		t.Fatalf("status %v, want not stale", st)
	}
	controllertest.Update(e.t, e.c.namespaces, "", "garden-dev", false, func(o store.Object) {
		delete(o.GetMetadata().Annotations, AnnotationSkipStaleCheck)
	})

	// Stale again from now on; past since + expiration the project is deleted, confirmed.
	e.reconcileStale(gardenerStale)
	since = e.project("dev").GetStatus().GetStaleSinceTimestamp().AsTime()
	e.clk.SetTime(since.Add(90*day + time.Second))
	e.reconcileStale(gardenerStale)
	p := e.project("dev")
	if p.GetMetadata().GetDeletionTimestamp() == nil || p.GetMetadata().GetAnnotations()[AnnotationConfirmDeletion] != "true" {
		t.Fatalf("project %v, want deleted with the deletion confirmed", p.GetMetadata())
	}
	if got := p.GetStatus().GetStaleAutoDeleteTimestamp().AsTime(); !got.Equal(since.Add(90 * day)) {
		t.Fatalf("auto-delete %v, want %v", got, since.Add(90*day))
	}
}

// TestStaleNotChecked: projects being deleted, and projects whose namespace does not exist yet, are left alone.
func TestStaleNotChecked(t *testing.T) {
	e := newEnv(t)
	controllertest.Create(e.t, e.c.projects, newProject("dev"))
	e.clk.SetTime(e.project("dev").GetMetadata().GetCreationTimestamp().AsTime().Add(100 * day))
	e.reconcileStale(gardenerStale)
	if st := e.project("dev").GetStatus(); st.GetStaleSinceTimestamp() != nil {
		t.Fatalf("status %v: stale without a namespace", st)
	}
	controllertest.Create(e.t, e.c.namespaces, newNamespace("garden-dev", projectLabels("dev"), nil))
	controllertest.Update(e.t, e.c.projects, "", "dev", false, withFinalizers(FinalizerGardener))
	controllertest.Delete(e.t, e.c.projects, "", "dev")
	e.reconcileStale(gardenerStale)
	if st := e.project("dev").GetStatus(); st.GetStaleSinceTimestamp() != nil {
		t.Fatalf("status %v: a project being deleted was checked", st)
	}
}
