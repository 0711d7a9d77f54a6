package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Open opens a Store on the backend under test. The suite sets DataDir (a directory kept across reopens within a
// test), Prefix (unique per test), WatchWindow, EncryptionKeys and Logger; the opener adds what its backend needs
// (Endpoints, TLS) and may ignore DataDir when the data lives elsewhere. Opening the same cfg again must show the same
// data. The suite closes the stores it opens.
type Open func(t *testing.T, cfg store.Config) *store.Store

// RunConformance checks a Store against the rules of hub/store: object lifecycle, concurrency, status separation,
// finalizers, selectors, snapshot paging, watches, encryption at rest and read-your-writes.
func RunConformance(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(t *testing.T, e *env)
	}{
		{"CreateGet", testCreateGet},
		{"CreateValidation", testCreateValidation},
		{"GenerateName", testGenerateName},
		{"ConcurrentCreate", testConcurrentCreate},
		{"NotFound", testNotFound},
		{"UpdateGenerationAndStatus", testUpdateGenerationAndStatus},
		{"UpdateStatus", testUpdateStatus},
		{"UpdateNoop", testUpdateNoop},
		{"UpdateConflict", testUpdateConflict},
		{"ServerOwnedMetadata", testServerOwnedMetadata},
		{"GuaranteedUpdate", testGuaranteedUpdate},
		{"Delete", testDelete},
		{"Finalizers", testFinalizers},
		{"ClusterScoped", testClusterScoped},
		{"Selectors", testSelectors},
		{"ByIndex", testByIndex},
		{"Paging", testPaging},
		{"PagingSnapshot", testPagingSnapshot},
		{"ContinueExpired", testContinueExpired},
		{"Watch", testWatch},
		{"WatchResume", testWatchResume},
		{"WatchExpired", testWatchExpired},
		{"WatchExpiredByAge", testWatchExpiredByAge},
		{"WatchResumeAfterRestart", testWatchResumeAfterRestart},
		{"WatchFuture", testWatchFuture},
		{"WatchSelectorTransitions", testWatchSelectorTransitions},
		{"WatchNamespace", testWatchNamespace},
		{"WatchBookmarks", testWatchBookmarks},
		{"WatchSlowConsumer", testWatchSlowConsumer},
		{"WatchStop", testWatchStop},
		{"EncryptionAtRest", testEncryptionAtRest},
		{"KeyRotation", testKeyRotation},
		{"ReadYourWrites", testReadYourWrites},
		{"Revision", testRevision},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newEnv(t, open, nil))
		})
	}
}

// env is one test's store with the fixture resources registered.
type env struct {
	t    *testing.T
	ctx  context.Context
	open Open
	cfg  store.Config
	s    *store.Store

	shoots, namespaces, secrets *store.Collection
}

func newEnv(t *testing.T, open Open, mod func(*store.Config)) *env {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	cfg := store.Config{
		DataDir:        t.TempDir(),
		Prefix:         "/conformance-" + hex.EncodeToString(b),
		EncryptionKeys: []store.Key{TestKey("a")},
		Logger:         Logger(t),
	}
	if mod != nil {
		mod(&cfg)
	}
	e := &env{t: t, ctx: t.Context(), open: open, cfg: cfg}
	e.reopen()
	return e
}

// reopen closes the current store (if any) and opens the same data with e.cfg.
func (e *env) reopen() {
	e.t.Helper()
	if e.s != nil {
		if err := e.s.Close(); err != nil {
			e.t.Fatalf("close: %v", err)
		}
	}
	s := e.open(e.t, e.cfg)
	e.t.Cleanup(func() { _ = s.Close() })
	e.s = s
	var err error
	if e.shoots, err = s.Register(e.ctx, Shoots()); err != nil {
		e.t.Fatalf("register shoots: %v", err)
	}
	if e.namespaces, err = s.Register(e.ctx, Namespaces()); err != nil {
		e.t.Fatalf("register namespaces: %v", err)
	}
	if e.secrets, err = s.Register(e.ctx, Secrets()); err != nil {
		e.t.Fatalf("register secrets: %v", err)
	}
}

func (e *env) with(mod func(*store.Config)) *env {
	e.t.Helper()
	if e.s != nil {
		_ = e.s.Close()
		e.s = nil
	}
	mod(&e.cfg)
	e.reopen()
	return e
}

func (e *env) create(c *store.Collection, obj store.Object) store.Object {
	e.t.Helper()
	out, err := c.Create(e.ctx, obj)
	if err != nil {
		e.t.Fatalf("create %s/%s: %v", obj.GetMetadata().GetNamespace(), obj.GetMetadata().GetName(), err)
	}
	return out
}

func (e *env) createShoot(namespace, name, seed string, l map[string]string) *corev1beta1.Shoot {
	e.t.Helper()
	return e.create(e.shoots, NewShoot(namespace, name, seed, l)).(*corev1beta1.Shoot)
}

func (e *env) getShoot(namespace, name string) *corev1beta1.Shoot {
	e.t.Helper()
	obj, err := e.shoots.Get(e.ctx, namespace, name)
	if err != nil {
		e.t.Fatalf("get %s/%s: %v", namespace, name, err)
	}
	return obj.(*corev1beta1.Shoot)
}

func (e *env) update(c *store.Collection, obj store.Object) store.Object {
	e.t.Helper()
	out, err := c.Update(e.ctx, obj)
	if err != nil {
		e.t.Fatalf("update %s: %v", obj.GetMetadata().GetName(), err)
	}
	return out
}

func cloneShoot(s *corev1beta1.Shoot) *corev1beta1.Shoot { return proto.Clone(s).(*corev1beta1.Shoot) }

func rv(obj store.Object) int64 {
	n, _ := strconv.ParseInt(obj.GetMetadata().GetResourceVersion(), 10, 64)
	return n
}

// expectErr fails unless err is a StatusError accepted by is.
func expectErr(t *testing.T, err error, is func(error) bool, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	if _, ok := err.(apierrors.APIStatus); !ok {
		t.Fatalf("%s: error %T is not a StatusError: %v", what, err, err)
	}
	if !is(err) {
		t.Fatalf("%s: unexpected error (reason %s): %v", what, apierrors.ReasonForError(err), err)
	}
}

func names(objs []store.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = objectKey(o)
	}
	return out
}

func objectKey(o store.Object) string {
	m := o.GetMetadata()
	if m.GetNamespace() == "" {
		return m.GetName()
	}
	return m.GetNamespace() + "/" + m.GetName()
}

func testCreateGet(t *testing.T, e *env) {
	in := NewShoot("garden-a", "s1", "seed-1", map[string]string{"env": "prod"})
	inCopy := cloneShoot(in)
	before := time.Now().Truncate(time.Second)
	out := e.create(e.shoots, in).(*corev1beta1.Shoot)
	if !proto.Equal(in, inCopy) {
		t.Fatal("Create modified its argument")
	}
	m := out.GetMetadata()
	if m.GetUid() == "" || m.GetGeneration() != 1 || rv(out) <= 0 {
		t.Fatalf("server fields not set: uid %q generation %d rv %q", m.GetUid(), m.GetGeneration(), m.GetResourceVersion())
	}
	ct := m.GetCreationTimestamp()
	if ct == nil || ct.Nanos != 0 || ct.AsTime().Before(before) || ct.AsTime().After(time.Now().Add(time.Second)) {
		t.Fatalf("creationTimestamp %v: want now in whole seconds", ct)
	}
	got := e.getShoot("garden-a", "s1")
	if !proto.Equal(got, out) {
		t.Fatalf("Get differs from Create's result:\n get    %v\n create %v", got, out)
	}
	_, err := e.shoots.Create(e.ctx, NewShoot("garden-a", "s1", "", nil))
	expectErr(t, err, apierrors.IsAlreadyExists, "second create")
	if se := err.(apierrors.APIStatus).Status(); se.Details == nil || se.Details.Group != "core.gardener.cloud" || se.Details.Kind != "shoots" {
		t.Fatalf("error details %+v: want group core.gardener.cloud, resource shoots", se.Details)
	}

	// deletionTimestamp and generation are the server's on create.
	in2 := NewShoot("garden-a", "s2", "", nil)
	in2.Metadata.DeletionTimestamp = out.Metadata.CreationTimestamp
	in2.Metadata.Generation = 7
	out2 := e.create(e.shoots, in2)
	if out2.GetMetadata().GetDeletionTimestamp() != nil || out2.GetMetadata().GetGeneration() != 1 {
		t.Fatalf("create kept deletionTimestamp %v / generation %d", out2.GetMetadata().GetDeletionTimestamp(), out2.GetMetadata().GetGeneration())
	}
	if out2.GetMetadata().GetUid() == m.GetUid() {
		t.Fatal("two objects share a uid")
	}
}

func testCreateValidation(t *testing.T, e *env) {
	_, err := e.shoots.Create(e.ctx, NewShoot("garden-a", "", "", nil))
	expectErr(t, err, apierrors.IsInvalid, "create without name")
	if !strings.Contains(err.Error(), "metadata.name") {
		t.Fatalf("error does not name metadata.name: %v", err)
	}
	_, err = e.shoots.Create(e.ctx, NewShoot("", "s1", "", nil))
	expectErr(t, err, apierrors.IsInvalid, "namespaced create without namespace")
	if !strings.Contains(err.Error(), "metadata.namespace") {
		t.Fatalf("error does not name metadata.namespace: %v", err)
	}
	_, err = e.shoots.Create(e.ctx, NewShoot("garden-a", "a/b", "", nil))
	expectErr(t, err, apierrors.IsInvalid, "name with a slash")
	withRV := NewShoot("garden-a", "s1", "", nil)
	withRV.Metadata.ResourceVersion = "5"
	_, err = e.shoots.Create(e.ctx, withRV)
	expectErr(t, err, apierrors.IsBadRequest, "create with resourceVersion")
}

var generatedName = regexp.MustCompile(`^web-[a-z0-9]{5}$`)

func testGenerateName(t *testing.T, e *env) {
	seen := map[string]bool{}
	for range 5 {
		in := NewShoot("garden-a", "", "", nil)
		in.Metadata.GenerateName = "web-"
		out := e.create(e.shoots, in)
		name := out.GetMetadata().GetName()
		if !generatedName.MatchString(name) || seen[name] {
			t.Fatalf("generated name %q: want web- and 5 new [a-z0-9]", name)
		}
		seen[name] = true
		e.getShoot("garden-a", name)
	}
}

func testConcurrentCreate(t *testing.T, e *env) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := 0, 0
	for range 8 {
		wg.Go(func() {
			_, err := e.shoots.Create(e.ctx, NewShoot("garden-a", "race", "", nil))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case apierrors.IsAlreadyExists(err):
				lost++
			default:
				t.Errorf("create: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 || lost != 7 {
		t.Fatalf("%d creates won, %d lost: want 1 and 7", won, lost)
	}
}

func testNotFound(t *testing.T, e *env) {
	_, err := e.shoots.Get(e.ctx, "garden-a", "missing")
	expectErr(t, err, apierrors.IsNotFound, "get")
	_, err = e.shoots.Update(e.ctx, NewShoot("garden-a", "missing", "", nil))
	expectErr(t, err, apierrors.IsNotFound, "update")
	_, err = e.shoots.UpdateStatus(e.ctx, NewShoot("garden-a", "missing", "", nil))
	expectErr(t, err, apierrors.IsNotFound, "update status")
	_, _, err = e.shoots.Delete(e.ctx, "garden-a", "missing", nil)
	expectErr(t, err, apierrors.IsNotFound, "delete")
	_, err = e.shoots.GuaranteedUpdate(e.ctx, "garden-a", "missing", false, func(cur store.Object) (store.Object, error) {
		t.Fatal("mutate called for a missing object")
		return cur, nil
	})
	expectErr(t, err, apierrors.IsNotFound, "guaranteed update")
}

func testUpdateGenerationAndStatus(t *testing.T, e *env) {
	s := e.createShoot("garden-a", "s1", "seed-1", nil)
	st := cloneShoot(s)
	st.Status = &corev1beta1.ShootStatus{TechnicalId: "shoot--a--s1", ObservedGeneration: proto.Int64(1)}
	withStatus, err := e.shoots.UpdateStatus(e.ctx, st)
	if err != nil {
		t.Fatal(err)
	}

	// A metadata-only change writes but keeps the generation.
	next := cloneShoot(withStatus.(*corev1beta1.Shoot))
	next.Metadata.Labels = map[string]string{"a": "b"}
	next.Status = nil // Update never touches status
	out := e.update(e.shoots, next).(*corev1beta1.Shoot)
	if out.GetMetadata().GetGeneration() != 1 || rv(out) <= rv(withStatus) {
		t.Fatalf("label change: generation %d rv %d (was %d)", out.GetMetadata().GetGeneration(), rv(out), rv(withStatus))
	}
	if out.GetStatus().GetTechnicalId() != "shoot--a--s1" {
		t.Fatalf("Update dropped the status: %v", out.GetStatus())
	}

	// A spec change moves the generation; a status change in the same request is ignored.
	next = cloneShoot(out)
	next.Spec.Region = "eu-central-1"
	next.Status.TechnicalId = "changed"
	out = e.update(e.shoots, next).(*corev1beta1.Shoot)
	if out.GetMetadata().GetGeneration() != 2 || out.GetStatus().GetTechnicalId() != "shoot--a--s1" {
		t.Fatalf("spec change: generation %d status %v", out.GetMetadata().GetGeneration(), out.GetStatus())
	}
	got := e.getShoot("garden-a", "s1")
	if !proto.Equal(got, out) {
		t.Fatalf("Get after update:\n%v\nwant\n%v", got, out)
	}
	// The type metadata is not desired state.
	next = cloneShoot(out)
	next.ApiVersion = "core.gardener.cloud/v1"
	out = e.update(e.shoots, next).(*corev1beta1.Shoot)
	if out.GetMetadata().GetGeneration() != 2 {
		t.Fatalf("apiVersion change moved generation to %d", out.GetMetadata().GetGeneration())
	}
}

func testUpdateStatus(t *testing.T, e *env) {
	s := e.createShoot("garden-a", "s1", "seed-1", map[string]string{"x": "1"})
	next := cloneShoot(s)
	next.Spec.Region = "elsewhere"
	next.Metadata.Labels = map[string]string{"x": "2"}
	next.Metadata.Finalizers = []string{"f"}
	next.Status = &corev1beta1.ShootStatus{Uid: "status-uid"}
	out, err := e.shoots.UpdateStatus(e.ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	o := out.(*corev1beta1.Shoot)
	if o.GetStatus().GetUid() != "status-uid" {
		t.Fatalf("status not written: %v", o.GetStatus())
	}
	if o.GetSpec().GetRegion() != "eu-west-1" || o.GetMetadata().GetLabels()["x"] != "1" || len(o.GetMetadata().GetFinalizers()) != 0 {
		t.Fatalf("UpdateStatus changed more than status: %v", o)
	}
	if o.GetMetadata().GetGeneration() != 1 || rv(o) <= rv(s) {
		t.Fatalf("generation %d rv %d", o.GetMetadata().GetGeneration(), rv(o))
	}
	if got := e.getShoot("garden-a", "s1"); !proto.Equal(got, o) {
		t.Fatalf("Get after UpdateStatus:\n%v\nwant\n%v", got, o)
	}
	// A kind without status has no status updates.
	sec := e.create(e.secrets, NewSecret("garden-a", "x", nil))
	_, err = e.secrets.UpdateStatus(e.ctx, sec)
	expectErr(t, err, apierrors.IsBadRequest, "UpdateStatus of a secret")
	// Clearing the status is a status update too.
	cleared := cloneShoot(o)
	cleared.Status = nil
	out, err = e.shoots.UpdateStatus(e.ctx, cleared)
	if err != nil {
		t.Fatal(err)
	}
	if out.(*corev1beta1.Shoot).Status != nil {
		t.Fatalf("status not cleared: %v", out.(*corev1beta1.Shoot).Status)
	}
}

func testUpdateNoop(t *testing.T, e *env) {
	s := e.createShoot("garden-a", "s1", "seed-1", nil)
	out := e.update(e.shoots, cloneShoot(s))
	if rv(out) != rv(s) {
		t.Fatalf("no-op update wrote: rv %d -> %d", rv(s), rv(out))
	}
	// Changes to server-owned fields alone are no changes.
	next := cloneShoot(s)
	next.Metadata.Generation = 42
	next.Metadata.CreationTimestamp = nil
	next.Metadata.ResourceVersion = ""
	out = e.update(e.shoots, next)
	if rv(out) != rv(s) || out.GetMetadata().GetGeneration() != 1 {
		t.Fatalf("update of server-owned fields wrote: rv %d generation %d", rv(out), out.GetMetadata().GetGeneration())
	}
	out, err := e.shoots.UpdateStatus(e.ctx, cloneShoot(s))
	if err != nil || rv(out) != rv(s) {
		t.Fatalf("no-op status update: rv %d err %v", rv(out), err)
	}
	resp, err := e.s.Client().Get(e.ctx, e.cfg.Prefix+"/core.gardener.cloud/shoots/garden-a/s1")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Version != 1 {
		t.Fatalf("etcd key written more than once: %v %v", resp, err)
	}
}

func testUpdateConflict(t *testing.T, e *env) {
	s := e.createShoot("garden-a", "s1", "seed-1", nil)
	a := cloneShoot(s)
	a.Spec.Region = "a"
	e.update(e.shoots, a)
	b := cloneShoot(s) // still at the first resourceVersion
	b.Spec.Region = "b"
	_, err := e.shoots.Update(e.ctx, b)
	expectErr(t, err, apierrors.IsConflict, "update with a stale resourceVersion")
	if !strings.Contains(err.Error(), "the object has been modified; please apply your changes to the latest version and try again") {
		t.Fatalf("conflict message: %v", err)
	}
	_, err = e.shoots.UpdateStatus(e.ctx, b)
	expectErr(t, err, apierrors.IsConflict, "status update with a stale resourceVersion")
	// Without resourceVersion the update applies to whatever is current.
	b.Metadata.ResourceVersion = ""
	out := e.update(e.shoots, b).(*corev1beta1.Shoot)
	if out.GetSpec().GetRegion() != "b" || out.GetMetadata().GetGeneration() != 3 {
		t.Fatalf("unconditional update: region %q generation %d", out.GetSpec().GetRegion(), out.GetMetadata().GetGeneration())
	}
	bad := cloneShoot(out)
	bad.Metadata.ResourceVersion = "abc"
	_, err = e.shoots.Update(e.ctx, bad)
	expectErr(t, err, func(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) }, "malformed resourceVersion")
}

func testServerOwnedMetadata(t *testing.T, e *env) {
	s := e.createShoot("garden-a", "s1", "seed-1", nil)
	next := cloneShoot(s)
	next.Metadata.Uid = "other"
	_, err := e.shoots.Update(e.ctx, next)
	expectErr(t, err, apierrors.IsConflict, "update with another uid")

	next = cloneShoot(s)
	next.Metadata.Uid = ""
	next.Metadata.CreationTimestamp = nil
	next.Metadata.Generation = 9
	next.Metadata.DeletionTimestamp = s.Metadata.CreationTimestamp
	next.Metadata.Annotations = map[string]string{"k": "v"}
	out := e.update(e.shoots, next).(*corev1beta1.Shoot)
	m := out.GetMetadata()
	if m.GetUid() != s.GetMetadata().GetUid() || !proto.Equal(m.GetCreationTimestamp(), s.GetMetadata().GetCreationTimestamp()) ||
		m.GetGeneration() != 1 || m.GetDeletionTimestamp() != nil || m.GetAnnotations()["k"] != "v" {
		t.Fatalf("server-owned metadata not kept: %v", m)
	}
}

func testGuaranteedUpdate(t *testing.T, e *env) {
	e.createShoot("garden-a", "s1", "seed-1", nil)
	const workers, each = 8, 5
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				_, err := e.shoots.GuaranteedUpdate(e.ctx, "garden-a", "s1", false, func(cur store.Object) (store.Object, error) {
					m := cur.GetMetadata()
					n, _ := strconv.Atoi(m.GetAnnotations()["count"])
					if m.Annotations == nil {
						m.Annotations = map[string]string{}
					}
					m.Annotations["count"] = strconv.Itoa(n + 1)
					return cur, nil
				})
				if err != nil {
					t.Errorf("guaranteed update: %v", err)
				}
			}
		})
	}
	wg.Wait()
	got := e.getShoot("garden-a", "s1")
	if got.GetMetadata().GetAnnotations()["count"] != strconv.Itoa(workers*each) {
		t.Fatalf("count %q after %d increments", got.GetMetadata().GetAnnotations()["count"], workers*each)
	}
	// Status updates through GuaranteedUpdate touch only status.
	out, err := e.shoots.GuaranteedUpdate(e.ctx, "garden-a", "s1", true, func(cur store.Object) (store.Object, error) {
		s := cur.(*corev1beta1.Shoot)
		s.Status = &corev1beta1.ShootStatus{TechnicalId: "t"}
		s.Spec.Region = "ignored"
		return s, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if o := out.(*corev1beta1.Shoot); o.GetStatus().GetTechnicalId() != "t" || o.GetSpec().GetRegion() != "eu-west-1" {
		t.Fatalf("status guaranteed update: %v", o)
	}
	// A resourceVersion in the mutated object is a precondition.
	_, err = e.shoots.GuaranteedUpdate(e.ctx, "garden-a", "s1", false, func(cur store.Object) (store.Object, error) {
		cur.GetMetadata().ResourceVersion = "1"
		cur.(*corev1beta1.Shoot).Spec.Region = "x"
		return cur, nil
	})
	expectErr(t, err, apierrors.IsConflict, "guaranteed update with a stale resourceVersion")
	// Errors of mutate come back as they are.
	_, err = e.shoots.GuaranteedUpdate(e.ctx, "garden-a", "s1", false, func(cur store.Object) (store.Object, error) {
		return nil, apierrors.NewBadRequest("bad patch")
	})
	expectErr(t, err, apierrors.IsBadRequest, "mutate error")
}

func testDelete(t *testing.T, e *env) {
	s := e.createShoot("garden-a", "s1", "seed-1", nil)
	wrongUID, wrongRV := "nope", "1"
	_, _, err := e.shoots.Delete(e.ctx, "garden-a", "s1", &metav1.Preconditions{Uid: &wrongUID})
	expectErr(t, err, apierrors.IsConflict, "delete with a wrong uid")
	_, _, err = e.shoots.Delete(e.ctx, "garden-a", "s1", &metav1.Preconditions{ResourceVersion: &wrongRV})
	expectErr(t, err, apierrors.IsConflict, "delete with a wrong resourceVersion")
	uid, cur := s.GetMetadata().GetUid(), s.GetMetadata().GetResourceVersion()
	obj, deleted, err := e.shoots.Delete(e.ctx, "garden-a", "s1", &metav1.Preconditions{Uid: &uid, ResourceVersion: &cur})
	if err != nil || !deleted {
		t.Fatalf("delete: deleted %v err %v", deleted, err)
	}
	if obj.GetMetadata().GetUid() != uid || rv(obj) <= rv(s) {
		t.Fatalf("deleted object: uid %q rv %d", obj.GetMetadata().GetUid(), rv(obj))
	}
	_, err = e.shoots.Get(e.ctx, "garden-a", "s1")
	expectErr(t, err, apierrors.IsNotFound, "get after delete")
	_, _, err = e.shoots.Delete(e.ctx, "garden-a", "s1", nil)
	expectErr(t, err, apierrors.IsNotFound, "second delete")
	// The name is free again, for a new object with a new uid.
	s2 := e.createShoot("garden-a", "s1", "", nil)
	if s2.GetMetadata().GetUid() == uid {
		t.Fatal("uid reused")
	}
}

func testFinalizers(t *testing.T, e *env) {
	in := NewShoot("garden-a", "s1", "seed-1", nil)
	in.Metadata.Finalizers = []string{"gardener"}
	s := e.create(e.shoots, in).(*corev1beta1.Shoot)

	obj, deleted, err := e.shoots.Delete(e.ctx, "garden-a", "s1", nil)
	if err != nil || deleted {
		t.Fatalf("delete with finalizers: deleted %v err %v", deleted, err)
	}
	m := obj.GetMetadata()
	if m.GetDeletionTimestamp() == nil || m.DeletionGracePeriodSeconds == nil || *m.DeletionGracePeriodSeconds != 0 || m.GetDeletionTimestamp().Nanos != 0 {
		t.Fatalf("deletion not marked: %v", m)
	}
	// Marking it as deleting moves the generation once, as kube-apiserver's registry does.
	if m.GetGeneration() != s.GetMetadata().GetGeneration()+1 {
		t.Fatalf("generation %d after the deletion mark, want %d", m.GetGeneration(), s.GetMetadata().GetGeneration()+1)
	}
	marked := e.getShoot("garden-a", "s1")
	if !proto.Equal(marked, obj) {
		t.Fatalf("Get after delete:\n%v\nwant\n%v", marked, obj)
	}
	// Deleting again changes nothing.
	again, deleted, err := e.shoots.Delete(e.ctx, "garden-a", "s1", nil)
	if err != nil || deleted || rv(again) != rv(marked) || !proto.Equal(again.GetMetadata().GetDeletionTimestamp(), m.GetDeletionTimestamp()) ||
		again.GetMetadata().GetGeneration() != m.GetGeneration() {
		t.Fatalf("second delete: deleted %v err %v rv %d (want %d)", deleted, err, rv(again), rv(marked))
	}
	// No new finalizers on an object being deleted.
	next := cloneShoot(marked)
	next.Metadata.Finalizers = []string{"gardener", "other"}
	_, err = e.shoots.Update(e.ctx, next)
	expectErr(t, err, func(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) }, "adding a finalizer during deletion")
	// Other updates keep the deletion mark, whatever the request says.
	next = cloneShoot(marked)
	next.Metadata.DeletionTimestamp = nil
	next.Metadata.Labels = map[string]string{"a": "b"}
	upd := e.update(e.shoots, next)
	if upd.GetMetadata().GetDeletionTimestamp() == nil {
		t.Fatal("update cleared deletionTimestamp")
	}
	// Removing the last finalizer deletes the object.
	next = cloneShoot(upd.(*corev1beta1.Shoot))
	next.Metadata.Finalizers = nil
	out := e.update(e.shoots, next)
	if len(out.GetMetadata().GetFinalizers()) != 0 || out.GetMetadata().GetUid() != s.GetMetadata().GetUid() {
		t.Fatalf("final update returned %v", out.GetMetadata())
	}
	_, err = e.shoots.Get(e.ctx, "garden-a", "s1")
	expectErr(t, err, apierrors.IsNotFound, "get after the last finalizer is gone")
	resp, err := e.s.Client().Get(e.ctx, e.cfg.Prefix+"/core.gardener.cloud/shoots/garden-a/s1")
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("key still in etcd: %v %v", resp.Kvs, err)
	}
}

func testClusterScoped(t *testing.T, e *env) {
	ns := &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: "garden-a", Namespace: "x"}}
	_, err := e.namespaces.Create(e.ctx, ns)
	expectErr(t, err, apierrors.IsInvalid, "cluster-scoped create with a namespace")
	if !strings.Contains(err.Error(), "metadata.namespace") {
		t.Fatalf("error does not name metadata.namespace: %v", err)
	}
	ns.Metadata.Namespace = ""
	ns.Spec = &kcorev1.NamespaceSpec{Finalizers: []string{"kubernetes"}}
	out := e.create(e.namespaces, ns)
	got, err := e.namespaces.Get(e.ctx, "", "garden-a")
	if err != nil || !proto.Equal(got, out) {
		t.Fatalf("get namespace: %v %v", got, err)
	}
	resp, err := e.s.Client().Get(e.ctx, e.cfg.Prefix+"/core/namespaces/garden-a")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("namespace key: %v %v", resp, err)
	}
	st := proto.Clone(got).(*kcorev1.Namespace)
	st.Status = &kcorev1.NamespaceStatus{Phase: "Active"}
	out, err = e.namespaces.UpdateStatus(e.ctx, st)
	if err != nil || out.(*kcorev1.Namespace).GetStatus().GetPhase() != "Active" || out.GetMetadata().GetGeneration() != 1 {
		t.Fatalf("namespace status: %v %v", out, err)
	}
	list, err := e.namespaces.List(e.ctx, "", store.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list namespaces: %v %v", list, err)
	}
	w, err := e.namespaces.Watch(e.ctx, "", store.WatchOptions{Fields: fields.ParseSelectorOrDie("metadata.name=garden-a")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	expectEvent(t, w, store.Added, "garden-a")
}

func testSelectors(t *testing.T, e *env) {
	for _, x := range []struct{ ns, name, seed, env string }{
		{"garden-b", "s3", "seed-2", "prod"},
		{"garden-a", "s2", "seed-1", "dev"},
		{"garden-a", "s1", "seed-2", "prod"},
		{"garden-a-x", "s1", "seed-1", "prod"},
		{"garden-b", "s1", "", "dev"},
	} {
		e.createShoot(x.ns, x.name, x.seed, map[string]string{"env": x.env})
	}
	list := func(ns, l, f string) []string {
		t.Helper()
		o := store.ListOptions{}
		if l != "" {
			o.Labels = mustParseLabels(l)
		}
		if f != "" {
			o.Fields = fields.ParseSelectorOrDie(f)
		}
		res, err := e.shoots.List(e.ctx, ns, o)
		if err != nil {
			t.Fatalf("list %q %q %q: %v", ns, l, f, err)
		}
		if rv, _ := strconv.ParseInt(res.ResourceVersion, 10, 64); rv <= 0 || res.Continue != "" {
			t.Fatalf("list rv %q continue %q", res.ResourceVersion, res.Continue)
		}
		return names(res.Items)
	}
	check := func(got []string, want ...string) {
		t.Helper()
		if want == nil {
			want = []string{}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	// Sorted by key: "garden-a-x/..." sorts before "garden-a/..." as etcd's byte order has it.
	check(list("", "", ""), "garden-a-x/s1", "garden-a/s1", "garden-a/s2", "garden-b/s1", "garden-b/s3")
	check(list("garden-a", "", ""), "garden-a/s1", "garden-a/s2")
	check(list("garden-c", "", ""))
	check(list("", "env=prod", ""), "garden-a-x/s1", "garden-a/s1", "garden-b/s3")
	check(list("", "env in (dev),env!=prod", ""), "garden-a/s2", "garden-b/s1")
	check(list("garden-a", "env=prod", ""), "garden-a/s1")
	check(list("", "", "spec.seedName=seed-1"), "garden-a-x/s1", "garden-a/s2")
	check(list("", "", "spec.seedName="), "garden-b/s1")
	check(list("", "", "metadata.name=s1"), "garden-a-x/s1", "garden-a/s1", "garden-b/s1")
	check(list("", "", "metadata.namespace=garden-b,metadata.name!=s1"), "garden-b/s3")
	check(list("", "env=prod", "spec.seedName!=seed-1"), "garden-a/s1", "garden-b/s3")
	// A selector that names one object exactly (looked up, not matched against every object).
	check(list("garden-a", "", "metadata.name=s1"), "garden-a/s1")
	check(list("", "", "metadata.namespace=garden-b,metadata.name=s1"), "garden-b/s1")
	check(list("garden-a", "", "metadata.namespace=garden-b,metadata.name=s1"))
	check(list("garden-a", "", "metadata.name=s9"))
	check(list("", "env=dev", "metadata.namespace=garden-a,metadata.name=s1"))
	check(list("garden-a", "", "metadata.name=s1,metadata.name=s2"))
	check(list("garden-a", "", "metadata.name==s2,spec.seedName=seed-1"), "garden-a/s2")
	check(list("garden-a", "", "metadata.name=s2,spec.seedName!=seed-1"))
	w := e.watch("garden-a", store.WatchOptions{Fields: fields.ParseSelectorOrDie("metadata.name=s2")})
	expectEvent(t, w, store.Added, "garden-a/s2")
	expectQuiet(t, w, 50*time.Millisecond)
	res, err := e.namespaces.List(e.ctx, "", store.ListOptions{Fields: fields.ParseSelectorOrDie("metadata.name=garden-none")})
	if err != nil || len(res.Items) != 0 {
		t.Fatalf("cluster-scoped list by a missing name: %v, %v", res, err)
	}

	_, err = e.shoots.List(e.ctx, "", store.ListOptions{Fields: fields.ParseSelectorOrDie("spec.unknown=x")})
	expectErr(t, err, apierrors.IsBadRequest, "unsupported field")
	if !strings.Contains(err.Error(), "spec.unknown") {
		t.Fatalf("error does not name the field: %v", err)
	}
	_, err = e.shoots.Watch(e.ctx, "", store.WatchOptions{Fields: fields.ParseSelectorOrDie("status.foo=x")})
	expectErr(t, err, apierrors.IsBadRequest, "unsupported field in watch")

	// Selectors see updates.
	s := e.getShoot("garden-b", "s1")
	next := cloneShoot(s)
	next.Metadata.Labels["env"] = "prod"
	e.update(e.shoots, next)
	check(list("", "env=prod", ""), "garden-a-x/s1", "garden-a/s1", "garden-b/s1", "garden-b/s3")
}

func testByIndex(t *testing.T, e *env) {
	e.createShoot("garden-b", "s1", "seed-1", nil)
	e.createShoot("garden-a", "s1", "seed-1", nil)
	s := e.createShoot("garden-a", "s2", "seed-2", nil)
	e.createShoot("garden-a", "s3", "", nil)
	by := func(seed string) []string {
		t.Helper()
		objs, err := e.shoots.ByIndex(e.ctx, "seed", seed)
		if err != nil {
			t.Fatal(err)
		}
		names := names(objs)
		// CountByIndex counts what ByIndex returns.
		if n, err := e.shoots.CountByIndex(e.ctx, "seed", seed); err != nil || n != len(names) {
			t.Fatalf("CountByIndex(seed, %s) = %d, %v; ByIndex returned %v", seed, n, err, names)
		}
		return names
	}
	if got := by("seed-1"); !slices.Equal(got, []string{"garden-a/s1", "garden-b/s1"}) {
		t.Fatalf("seed-1: %v", got)
	}
	next := cloneShoot(s)
	next.Spec.SeedName = proto.String("seed-1")
	e.update(e.shoots, next)
	if got := by("seed-1"); !slices.Equal(got, []string{"garden-a/s1", "garden-a/s2", "garden-b/s1"}) {
		t.Fatalf("seed-1 after move: %v", got)
	}
	if got := by("seed-2"); len(got) != 0 {
		t.Fatalf("seed-2 after move: %v", got)
	}
	if _, _, err := e.shoots.Delete(e.ctx, "garden-a", "s1", nil); err != nil {
		t.Fatal(err)
	}
	if got := by("seed-1"); !slices.Equal(got, []string{"garden-a/s2", "garden-b/s1"}) {
		t.Fatalf("seed-1 after delete: %v", got)
	}
	_, err := e.shoots.ByIndex(e.ctx, "nope", "x")
	expectErr(t, err, func(err error) bool { return apierrors.IsBadRequest(err) || apierrors.IsInternalError(err) }, "unknown index")
	_, err = e.shoots.CountByIndex(e.ctx, "nope", "x")
	expectErr(t, err, func(err error) bool { return apierrors.IsBadRequest(err) || apierrors.IsInternalError(err) }, "unknown index counted")
}

// pageAll lists with a limit until the last page and returns every page's names.
func pageAll(t *testing.T, ctx context.Context, c *store.Collection, ns string, o store.ListOptions, between func(page int)) [][]string {
	t.Helper()
	var pages [][]string
	for page := 0; ; page++ {
		res, err := c.List(ctx, ns, o)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		pages = append(pages, names(res.Items))
		if res.Continue == "" {
			if res.RemainingItemCount != nil {
				t.Fatalf("last page has remainingItemCount %d", *res.RemainingItemCount)
			}
			return pages
		}
		if int64(len(res.Items)) != o.Limit {
			t.Fatalf("page %d has %d items with limit %d and a continue token", page, len(res.Items), o.Limit)
		}
		if between != nil {
			between(page)
		}
		o.Continue = res.Continue
	}
}

func testPaging(t *testing.T, e *env) {
	var want []string
	for i := range 23 {
		ns := fmt.Sprintf("garden-%d", i%3)
		name := fmt.Sprintf("s%02d", i)
		env := "dev"
		if i%2 == 0 {
			env = "prod"
		}
		e.createShoot(ns, name, "seed", map[string]string{"env": env})
		want = append(want, ns+"/"+name)
	}
	slices.Sort(want)

	res, err := e.shoots.List(e.ctx, "", store.ListOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 10 || res.Continue == "" || res.RemainingItemCount == nil || *res.RemainingItemCount != 13 {
		t.Fatalf("first page: %d items, continue %q, remaining %v", len(res.Items), res.Continue, res.RemainingItemCount)
	}
	res2, err := e.shoots.List(e.ctx, "", store.ListOptions{Limit: 10, Continue: res.Continue})
	if err != nil {
		t.Fatal(err)
	}
	if res2.ResourceVersion != res.ResourceVersion || res2.RemainingItemCount == nil || *res2.RemainingItemCount != 3 {
		t.Fatalf("second page: rv %s (first %s), remaining %v", res2.ResourceVersion, res.ResourceVersion, res2.RemainingItemCount)
	}

	for _, limit := range []int64{1, 5, 10, 22, 23, 100} {
		pages := pageAll(t, e.ctx, e.shoots, "", store.ListOptions{Limit: limit}, nil)
		if got := slices.Concat(pages...); !slices.Equal(got, want) {
			t.Fatalf("limit %d: %v, want %v", limit, got, want)
		}
	}
	// Paging with selectors and namespaces.
	var wantProd1 []string
	for _, k := range want {
		n, _ := strconv.Atoi(strings.TrimPrefix(k[strings.IndexByte(k, '/')+1:], "s"))
		if strings.HasPrefix(k, "garden-1/") && n%2 == 0 {
			wantProd1 = append(wantProd1, k)
		}
	}
	pages := pageAll(t, e.ctx, e.shoots, "garden-1", store.ListOptions{Limit: 2, Labels: mustParseLabels("env=prod")}, nil)
	if got := slices.Concat(pages...); !slices.Equal(got, wantProd1) {
		t.Fatalf("garden-1 prod: %v, want %v", got, wantProd1)
	}
	_, err = e.shoots.List(e.ctx, "", store.ListOptions{Limit: 2, Continue: "not-a-token"})
	expectErr(t, err, apierrors.IsBadRequest, "invalid continue token")
}

func testPagingSnapshot(t *testing.T, e *env) {
	var want []string
	for i := range 30 {
		name := fmt.Sprintf("s%02d", i)
		e.createShoot("garden-a", name, "seed", nil)
		want = append(want, "garden-a/"+name)
	}
	first, err := e.shoots.List(e.ctx, "", store.ListOptions{Limit: 7})
	if err != nil {
		t.Fatal(err)
	}
	firstRV := first.ResourceVersion
	var stopWriters sync.WaitGroup
	ctx, cancel := context.WithCancel(e.ctx)
	// Concurrent writers: new objects, deletions and changes between and during the pages.
	stopWriters.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = e.shoots.Create(ctx, NewShoot("garden-a", fmt.Sprintf("new%03d", i), "seed", nil))
		}
	})
	stopWriters.Go(func() {
		for i := 29; i >= 10 && ctx.Err() == nil; i-- {
			_, _, _ = e.shoots.Delete(ctx, "garden-a", fmt.Sprintf("s%02d", i), nil)
		}
	})
	stopWriters.Go(func() {
		for i := 0; ctx.Err() == nil; i = (i + 1) % 30 {
			_, _ = e.shoots.GuaranteedUpdate(ctx, "garden-a", fmt.Sprintf("s%02d", i), false, func(cur store.Object) (store.Object, error) {
				cur.(*corev1beta1.Shoot).Spec.Region = "moved"
				return cur, nil
			})
		}
	})
	got := names(first.Items)
	o := store.ListOptions{Limit: 7, Continue: first.Continue}
	for o.Continue != "" {
		time.Sleep(20 * time.Millisecond)
		res, err := e.shoots.List(e.ctx, "", o)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if res.ResourceVersion != firstRV {
			t.Errorf("page rv %s, first page %s", res.ResourceVersion, firstRV)
		}
		for _, it := range res.Items {
			if it.(*corev1beta1.Shoot).GetSpec().GetRegion() == "moved" {
				t.Errorf("%s shows a change made after the snapshot", objectKey(it))
			}
		}
		got = append(got, names(res.Items)...)
		o.Continue = res.Continue
	}
	cancel()
	stopWriters.Wait()
	if !slices.Equal(got, want) {
		t.Fatalf("pages under concurrent writes: %v, want the snapshot %v", got, want)
	}
}

func testContinueExpired(t *testing.T, e *env) {
	for i := range 5 {
		e.createShoot("garden-a", fmt.Sprintf("s%d", i), "seed", nil)
	}
	res, err := e.shoots.List(e.ctx, "", store.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	later := e.createShoot("garden-a", "later", "seed", nil)
	if _, err := e.s.Client().Compact(e.ctx, rv(later)); err != nil {
		t.Fatal(err)
	}
	_, err = e.shoots.List(e.ctx, "", store.ListOptions{Limit: 2, Continue: res.Continue})
	expectErr(t, err, apierrors.IsResourceExpired, "continue after compaction")
	if !strings.Contains(err.Error(), "continue parameter is too old") {
		t.Fatalf("message: %v", err)
	}
	// A fresh list works and the cache keeps serving after the compaction.
	res, err = e.shoots.List(e.ctx, "", store.ListOptions{})
	if err != nil || len(res.Items) != 6 {
		t.Fatalf("list after compaction: %v %v", res, err)
	}
	e.createShoot("garden-a", "after", "seed", nil)
	e.getShoot("garden-a", "after")
}

// watchNext returns the next event or fails after a timeout.
func watchNext(t *testing.T, w store.Watcher) store.Event {
	t.Helper()
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatal("watch channel closed")
			}
			if ev.Type == store.Bookmark {
				continue
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event within 10s")
		}
	}
}

func expectEvent(t *testing.T, w store.Watcher, typ store.EventType, key string) store.Event {
	t.Helper()
	ev := watchNext(t, w)
	if ev.Type != typ || ev.Object == nil || objectKey(ev.Object) != key {
		name := ""
		if ev.Object != nil {
			name = objectKey(ev.Object)
		}
		t.Fatalf("event %s %s (err %v), want %s %s", ev.Type, name, ev.Err, typ, key)
	}
	return ev
}

func expectQuiet(t *testing.T, w store.Watcher, d time.Duration) {
	t.Helper()
	timer := time.After(d)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatal("watch channel closed")
			}
			if ev.Type == store.Bookmark {
				continue
			}
			name := ""
			if ev.Object != nil {
				name = objectKey(ev.Object)
			}
			t.Fatalf("unexpected event %s %s", ev.Type, name)
		case <-timer:
			return
		}
	}
}

func (e *env) watch(ns string, o store.WatchOptions) store.Watcher {
	e.t.Helper()
	w, err := e.shoots.Watch(e.ctx, ns, o)
	if err != nil {
		e.t.Fatalf("watch: %v", err)
	}
	e.t.Cleanup(w.Stop)
	return w
}

func testWatch(t *testing.T, e *env) {
	e.createShoot("garden-a", "s2", "seed", nil)
	e.createShoot("garden-a", "s1", "seed", nil)
	for _, rv := range []string{"", "0"} {
		w := e.watch("", store.WatchOptions{ResourceVersion: rv})
		expectEvent(t, w, store.Added, "garden-a/s1")
		expectEvent(t, w, store.Added, "garden-a/s2")
		w.Stop()
	}
	w := e.watch("", store.WatchOptions{})
	expectEvent(t, w, store.Added, "garden-a/s1")
	expectEvent(t, w, store.Added, "garden-a/s2")
	created := e.createShoot("garden-b", "s3", "seed", nil)
	ev := expectEvent(t, w, store.Added, "garden-b/s3")
	if !proto.Equal(ev.Object, created) {
		t.Fatalf("ADDED object %v, want %v", ev.Object, created)
	}
	next := cloneShoot(created)
	next.Spec.Region = "r2"
	updated := e.update(e.shoots, next)
	ev = expectEvent(t, w, store.Modified, "garden-b/s3")
	if !proto.Equal(ev.Object, updated) {
		t.Fatalf("MODIFIED object %v, want %v", ev.Object, updated)
	}
	deleted, _, err := e.shoots.Delete(e.ctx, "garden-b", "s3", nil)
	if err != nil {
		t.Fatal(err)
	}
	ev = expectEvent(t, w, store.Deleted, "garden-b/s3")
	if rv(ev.Object) != rv(deleted) || rv(ev.Object) <= rv(updated) {
		t.Fatalf("DELETED rv %d, deletion rv %d, last rv %d", rv(ev.Object), rv(deleted), rv(updated))
	}
	if ev.Object.(*corev1beta1.Shoot).GetSpec().GetRegion() != "r2" {
		t.Fatalf("DELETED object is not the last state: %v", ev.Object)
	}
	expectQuiet(t, w, 100*time.Millisecond)
}

func testWatchResume(t *testing.T, e *env) {
	s := e.createShoot("garden-a", "s1", "seed", nil)
	from := s.GetMetadata().GetResourceVersion()
	next := cloneShoot(s)
	next.Spec.Region = "r2"
	e.update(e.shoots, next)
	e.createShoot("garden-a", "s2", "seed", nil)
	if _, _, err := e.shoots.Delete(e.ctx, "garden-a", "s1", nil); err != nil {
		t.Fatal(err)
	}
	w := e.watch("", store.WatchOptions{ResourceVersion: from})
	expectEvent(t, w, store.Modified, "garden-a/s1")
	expectEvent(t, w, store.Added, "garden-a/s2")
	expectEvent(t, w, store.Deleted, "garden-a/s1")
	s3 := e.createShoot("garden-a", "s3", "seed", nil)
	ev := expectEvent(t, w, store.Added, "garden-a/s3")
	expectQuiet(t, w, 100*time.Millisecond)

	// Resuming from the last event seen gives nothing old.
	w2 := e.watch("", store.WatchOptions{ResourceVersion: ev.Object.GetMetadata().GetResourceVersion()})
	expectQuiet(t, w2, 100*time.Millisecond)
	next = cloneShoot(s3)
	next.Spec.Region = "r3"
	e.update(e.shoots, next)
	expectEvent(t, w2, store.Modified, "garden-a/s3")

	_, err := e.shoots.Watch(e.ctx, "", store.WatchOptions{ResourceVersion: "abc"})
	expectErr(t, err, apierrors.IsBadRequest, "malformed resourceVersion")
}

func testWatchExpired(t *testing.T, e *env) {
	e.with(func(c *store.Config) { c.WatchWindow = 5 })
	s := e.createShoot("garden-a", "s0", "seed", nil)
	for i := range 10 {
		e.createShoot("garden-a", fmt.Sprintf("s%d", i+1), "seed", nil)
	}
	_, err := e.shoots.Watch(e.ctx, "", store.WatchOptions{ResourceVersion: s.GetMetadata().GetResourceVersion()})
	expectErr(t, err, apierrors.IsResourceExpired, "resume from outside the window")
	if apierrors.ReasonForError(err) != "Expired" {
		t.Fatalf("reason %s", apierrors.ReasonForError(err))
	}
	// The last five events are still there.
	last, err := e.shoots.List(e.ctx, "", store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var revs []int64
	for _, it := range last.Items {
		revs = append(revs, rv(it))
	}
	slices.Sort(revs)
	w := e.watch("", store.WatchOptions{ResourceVersion: strconv.FormatInt(revs[len(revs)-5], 10)})
	for range 4 {
		ev := watchNext(t, w)
		if ev.Type != store.Added {
			t.Fatalf("event %s %v", ev.Type, ev.Err)
		}
	}
	expectQuiet(t, w, 50*time.Millisecond)
}

// testWatchExpiredByAge: the history keeps no event longer than WatchWindowAge; a watch from a revision before the
// dropped events gets Expired, one from the newest dropped event's revision on still resumes.
func testWatchExpiredByAge(t *testing.T, e *env) {
	e.with(func(c *store.Config) { c.WatchWindowAge = 300 * time.Millisecond })
	s0 := e.createShoot("garden-a", "s0", "seed", nil)
	s1 := e.createShoot("garden-a", "s1", "seed", nil)
	// Within the age the history resumes from s0's revision.
	w := e.watch("", store.WatchOptions{ResourceVersion: rvOf(s0)})
	if ev := watchNext(t, w); ev.Type != store.Added || ev.Object.GetMetadata().GetName() != "s1" {
		t.Fatalf("resumed with %s %v, want s1 added", ev.Type, ev.Err)
	}
	// Once the events are older than the age (trimmed within a second), it does not.
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, err := e.shoots.Watch(e.ctx, "", store.WatchOptions{ResourceVersion: rvOf(s0)})
		if err != nil {
			expectErr(t, err, apierrors.IsResourceExpired, "resume from before the age")
			break
		}
		w.Stop()
		if time.Now().After(deadline) {
			t.Fatalf("a watch from revision %s still resumes after %s", rvOf(s0), 10*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// From the newest dropped event's revision on, every later event is still there.
	s2 := e.createShoot("garden-a", "s2", "seed", nil)
	w = e.watch("", store.WatchOptions{ResourceVersion: rvOf(s1)})
	if ev := watchNext(t, w); ev.Type != store.Added || ev.Object.GetMetadata().GetName() != "s2" || rvOf(ev.Object) != rvOf(s2) {
		t.Fatalf("resumed from s1 with %s %v, want s2 added", ev.Type, ev.Err)
	}
	expectQuiet(t, w, 50*time.Millisecond)
}

func rvOf(o store.Object) string { return o.GetMetadata().GetResourceVersion() }

func testWatchResumeAfterRestart(t *testing.T, e *env) {
	s := e.createShoot("garden-a", "s1", "seed", nil)
	next := cloneShoot(s)
	next.Spec.Region = "r2"
	e.update(e.shoots, next)
	if _, _, err := e.shoots.Delete(e.ctx, "garden-a", "s1", nil); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	w := e.watch("", store.WatchOptions{ResourceVersion: s.GetMetadata().GetResourceVersion()})
	if ev := expectEvent(t, w, store.Modified, "garden-a/s1"); ev.Object.(*corev1beta1.Shoot).GetSpec().GetRegion() != "r2" {
		t.Fatalf("MODIFIED after restart: %v", ev.Object)
	}
	ev := expectEvent(t, w, store.Deleted, "garden-a/s1")
	if ev.Object.(*corev1beta1.Shoot).GetSpec().GetRegion() != "r2" {
		t.Fatalf("DELETED after restart: %v", ev.Object)
	}
	expectQuiet(t, w, 50*time.Millisecond)
	if _, err := e.shoots.Get(e.ctx, "garden-a", "s1"); !apierrors.IsNotFound(err) {
		t.Fatalf("get after restart: %v", err)
	}
}

func testWatchFuture(t *testing.T, e *env) {
	s := e.createShoot("garden-a", "s0", "seed", nil)
	future := strconv.FormatInt(rv(s)+1, 10)
	type result struct {
		w   store.Watcher
		err error
	}
	done := make(chan result, 1)
	go func() {
		w, err := e.shoots.Watch(e.ctx, "", store.WatchOptions{ResourceVersion: future})
		done <- result{w, err}
	}()
	time.Sleep(100 * time.Millisecond)
	e.createShoot("garden-a", "s1", "seed", nil) // at rv(s)+1: not delivered, the watch starts after it
	e.createShoot("garden-a", "s2", "seed", nil)
	r := <-done
	if r.err != nil {
		t.Fatalf("watch from the future: %v", r.err)
	}
	t.Cleanup(r.w.Stop)
	expectEvent(t, r.w, store.Added, "garden-a/s2")
	expectQuiet(t, r.w, 50*time.Millisecond)
}

func testWatchSelectorTransitions(t *testing.T, e *env) {
	w := e.watch("", store.WatchOptions{Labels: mustParseLabels("env=prod")})
	s := e.createShoot("garden-a", "s1", "seed", map[string]string{"env": "dev"})
	expectQuiet(t, w, 100*time.Millisecond)
	next := cloneShoot(s)
	next.Metadata.Labels["env"] = "prod"
	s = e.update(e.shoots, next).(*corev1beta1.Shoot)
	expectEvent(t, w, store.Added, "garden-a/s1")
	next = cloneShoot(s)
	next.Spec.Region = "r2"
	s = e.update(e.shoots, next).(*corev1beta1.Shoot)
	expectEvent(t, w, store.Modified, "garden-a/s1")
	next = cloneShoot(s)
	next.Metadata.Labels["env"] = "dev"
	s = e.update(e.shoots, next).(*corev1beta1.Shoot)
	ev := expectEvent(t, w, store.Deleted, "garden-a/s1")
	if ev.Object.GetMetadata().GetLabels()["env"] != "prod" || rv(ev.Object) != rv(s) {
		t.Fatalf("DELETED on leaving the selector: labels %v rv %d, want the previous state at rv %d", ev.Object.GetMetadata().GetLabels(), rv(ev.Object), rv(s))
	}
	if _, _, err := e.shoots.Delete(e.ctx, "garden-a", "s1", nil); err != nil {
		t.Fatal(err)
	}
	expectQuiet(t, w, 100*time.Millisecond)

	// Field selectors transition the same way.
	wf := e.watch("", store.WatchOptions{Fields: fields.ParseSelectorOrDie("spec.seedName=seed-b")})
	s = e.createShoot("garden-a", "s2", "seed-a", nil)
	next = cloneShoot(s)
	next.Spec.SeedName = proto.String("seed-b")
	e.update(e.shoots, next)
	expectEvent(t, wf, store.Added, "garden-a/s2")
	if _, _, err := e.shoots.Delete(e.ctx, "garden-a", "s2", nil); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, wf, store.Deleted, "garden-a/s2")
}

func testWatchNamespace(t *testing.T, e *env) {
	e.createShoot("garden-a", "s0", "seed", nil)
	e.createShoot("garden-a-x", "s0", "seed", nil)
	w := e.watch("garden-a", store.WatchOptions{})
	expectEvent(t, w, store.Added, "garden-a/s0")
	e.createShoot("garden-b", "s1", "seed", nil)
	e.createShoot("garden-a-x", "s1", "seed", nil)
	e.createShoot("garden-a", "s1", "seed", nil)
	expectEvent(t, w, store.Added, "garden-a/s1")
	expectQuiet(t, w, 100*time.Millisecond)
	_, err := e.namespaces.Watch(e.ctx, "garden-a", store.WatchOptions{})
	expectErr(t, err, apierrors.IsBadRequest, "namespace in a cluster-scoped watch")
}

func testWatchBookmarks(t *testing.T, e *env) {
	s := e.createShoot("garden-a", "s0", "seed", nil)
	w := e.watch("", store.WatchOptions{Bookmarks: true, ResourceVersion: s.GetMetadata().GetResourceVersion()})
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-w.Events():
			if ev.Type != store.Bookmark {
				t.Fatalf("event %s", ev.Type)
			}
			if rv(ev.Object) < rv(s) || ev.Object.GetMetadata().GetName() != "" {
				t.Fatalf("bookmark %v", ev.Object)
			}
			// Without bookmarks there are none.
			plain := e.watch("", store.WatchOptions{ResourceVersion: s.GetMetadata().GetResourceVersion()})
			select {
			case ev := <-plain.Events():
				t.Fatalf("event %s on a watch without bookmarks", ev.Type)
			case <-time.After(1500 * time.Millisecond):
			}
			return
		case <-deadline:
			t.Fatal("no bookmark within 5s")
		}
	}
}

func testWatchSlowConsumer(t *testing.T, e *env) {
	slow := e.watch("", store.WatchOptions{})
	fast := e.watch("", store.WatchOptions{})
	const n = 1200
	// The writers stay at most `lead` events ahead of the fast watcher, so that a loaded machine, which may starve
	// its receiving goroutine, never makes it fall behind the store's bound as well; the slow one never reads.
	const lead = 400
	var got atomic.Int64
	var received sync.WaitGroup
	received.Go(func() {
		for i := 0; i < n; i++ {
			if ev := watchNext(t, fast); ev.Type != store.Added {
				t.Errorf("fast watcher: %s %v", ev.Type, ev.Err)
				got.Store(n) // release the writers
				return
			}
			got.Add(1)
		}
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < n; i += 8 {
				for int64(i)-got.Load() > lead {
					time.Sleep(time.Millisecond)
				}
				if _, err := e.shoots.Create(e.ctx, NewShoot("garden-a", fmt.Sprintf("s%04d", i), "seed", nil)); err != nil {
					t.Errorf("create: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	received.Wait()
	// The slow watcher was cut off: some events, then an Expired error, then the end.
	var events int
	for {
		select {
		case ev, ok := <-slow.Events():
			if !ok {
				t.Fatalf("slow watcher closed without an error after %d events", events)
			}
			if ev.Type == store.Error {
				if !apierrors.IsResourceExpired(ev.Err) && !apierrors.IsGone(ev.Err) {
					t.Fatalf("slow watcher error: %v", ev.Err)
				}
				if _, ok := <-slow.Events(); ok {
					t.Fatal("events after the error")
				}
				if events >= n {
					t.Fatalf("slow watcher got all %d events", events)
				}
				return
			}
			events++
		case <-time.After(10 * time.Second):
			t.Fatalf("slow watcher neither ended nor delivered after %d events", events)
		}
	}
}

func testWatchStop(t *testing.T, e *env) {
	w := e.watch("", store.WatchOptions{})
	w.Stop()
	if _, ok := <-w.Events(); ok {
		t.Fatal("event after Stop")
	}
	w.Stop() // idempotent

	ctx, cancel := context.WithCancel(e.ctx)
	w2, err := e.shoots.Watch(ctx, "", store.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case _, ok := <-w2.Events():
		if ok {
			t.Fatal("event after the context ended")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed after the context ended")
	}

	w3, err := e.shoots.Watch(e.ctx, "", store.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-w3.Events():
		if ok {
			t.Fatal("event after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed after Close")
	}
}

const secretValue = "correct-horse-battery-staple"

func (e *env) rawSecret(ns, name string) []byte {
	e.t.Helper()
	resp, err := e.s.Client().Get(e.ctx, e.cfg.Prefix+"/core/secrets/"+ns+"/"+name)
	if err != nil || len(resp.Kvs) != 1 {
		e.t.Fatalf("raw secret %s/%s: %v %v", ns, name, resp, err)
	}
	return resp.Kvs[0].Value
}

func (e *env) secretData(ns, name string) string {
	e.t.Helper()
	obj, err := e.secrets.Get(e.ctx, ns, name)
	if err != nil {
		e.t.Fatalf("get secret: %v", err)
	}
	return string(obj.(*kcorev1.Secret).GetData()["password"])
}

func testEncryptionAtRest(t *testing.T, e *env) {
	e.create(e.secrets, NewSecret("garden-a", "s1", map[string][]byte{"password": []byte(secretValue)}))
	raw := e.rawSecret("garden-a", "s1")
	if !bytes.HasPrefix(raw, []byte("trellis:enc:aesgcm:v1:a:")) {
		t.Fatalf("raw value does not start with the encryption prefix: %q", raw[:min(len(raw), 40)])
	}
	if bytes.Contains(raw, []byte(secretValue)) || bytes.Contains(raw, []byte("Opaque")) {
		t.Fatal("raw value contains plaintext")
	}
	if got := e.secretData("garden-a", "s1"); got != secretValue {
		t.Fatalf("read back %q", got)
	}
	// Shoots are not encrypted.
	e.createShoot("garden-a", "plain", "seed", nil)
	resp, err := e.s.Client().Get(e.ctx, e.cfg.Prefix+"/core.gardener.cloud/shoots/garden-a/plain")
	if err != nil || !bytes.Contains(resp.Kvs[0].Value, []byte("eu-west-1")) {
		t.Fatalf("shoot value is not plain protobuf: %v", err)
	}
	// The key path is authenticated: a value copied to another key does not decrypt.
	if _, err := e.s.Client().Put(e.ctx, e.cfg.Prefix+"/core/secrets/garden-a/copy", string(raw)); err != nil {
		t.Fatal(err)
	}
	// A plaintext value (written before encryption was enabled) is still readable.
	plain := NewSecret("garden-a", "legacy", map[string][]byte{"password": []byte("old")})
	b, _ := proto.Marshal(plain)
	if _, err := e.s.Client().Put(e.ctx, e.cfg.Prefix+"/core/secrets/garden-a/legacy", string(b)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, err := e.secrets.Get(e.ctx, "garden-a", "legacy")
		return err == nil
	})
	if got := e.secretData("garden-a", "legacy"); got != "old" {
		t.Fatalf("legacy secret: %q", got)
	}
	if _, err := e.secrets.Get(e.ctx, "garden-a", "copy"); !apierrors.IsNotFound(err) {
		t.Fatalf("copied ciphertext was readable under another key: %v", err)
	}
	list, err := e.secrets.List(e.ctx, "garden-a", store.ListOptions{})
	if err != nil || !slices.Equal(names(list.Items), []string{"garden-a/legacy", "garden-a/s1"}) {
		t.Fatalf("secrets: %v %v", list, err)
	}
	// Rewriting the legacy secret encrypts it.
	legacy, _ := e.secrets.Get(e.ctx, "garden-a", "legacy")
	next := proto.Clone(legacy).(*kcorev1.Secret)
	next.Data["password"] = []byte(secretValue)
	e.update(e.secrets, next)
	if raw := e.rawSecret("garden-a", "legacy"); !bytes.HasPrefix(raw, []byte("trellis:enc:aesgcm:v1:a:")) || bytes.Contains(raw, []byte(secretValue)) {
		t.Fatal("rewritten legacy secret is not encrypted")
	}
}

func testKeyRotation(t *testing.T, e *env) {
	e.create(e.secrets, NewSecret("garden-a", "s1", map[string][]byte{"password": []byte(secretValue)}))
	e.create(e.secrets, NewSecret("garden-a", "s2", map[string][]byte{"password": []byte(secretValue)}))
	if !bytes.HasPrefix(e.rawSecret("garden-a", "s1"), []byte("trellis:enc:aesgcm:v1:a:")) {
		t.Fatal("not encrypted with key a")
	}
	// New key first, old key still there to decrypt.
	e.with(func(c *store.Config) { c.EncryptionKeys = []store.Key{TestKey("b"), TestKey("a")} })
	if got := e.secretData("garden-a", "s1"); got != secretValue {
		t.Fatalf("read with [b a]: %q", got)
	}
	// An update without changes rewrites a value sealed with an old key (Kubernetes' stale-value rewrite), so
	// rewriting every object completes a rotation; a value already sealed with the primary key is left alone.
	before, _ := e.secrets.Get(e.ctx, "garden-a", "s2")
	same, err := e.secrets.Update(e.ctx, proto.Clone(before).(*kcorev1.Secret))
	if err != nil {
		t.Fatal(err)
	}
	if raw := e.rawSecret("garden-a", "s2"); !bytes.HasPrefix(raw, []byte("trellis:enc:aesgcm:v1:b:")) || rv(same) == rv(before) {
		t.Fatalf("unchanged update did not reseal the stale value with key b: rv %d -> %d, %q", rv(before), rv(same), raw[:min(len(raw), 30)])
	}
	again, err := e.secrets.Update(e.ctx, proto.Clone(same).(*kcorev1.Secret))
	if err != nil || rv(again) != rv(same) {
		t.Fatalf("unchanged update of a fresh value wrote again: rv %d -> %d (%v)", rv(same), rv(again), err)
	}
	obj, _ := e.secrets.Get(e.ctx, "garden-a", "s1")
	next := proto.Clone(obj).(*kcorev1.Secret)
	next.Metadata.Annotations = map[string]string{"rotated": "true"}
	e.update(e.secrets, next)
	raw := e.rawSecret("garden-a", "s1")
	if !bytes.HasPrefix(raw, []byte("trellis:enc:aesgcm:v1:b:")) || bytes.Contains(raw, []byte(secretValue)) {
		t.Fatalf("rewrite not encrypted with key b: %q", raw[:min(len(raw), 30)])
	}
	// The old key can go.
	e.with(func(c *store.Config) { c.EncryptionKeys = []store.Key{TestKey("b")} })
	if got := e.secretData("garden-a", "s1"); got != secretValue {
		t.Fatalf("read with [b]: %q", got)
	}
	// Without the key, the value is unreadable (and not served as garbage).
	e.with(func(c *store.Config) { c.EncryptionKeys = []store.Key{TestKey("c")} })
	if _, err := e.secrets.Get(e.ctx, "garden-a", "s1"); !apierrors.IsNotFound(err) {
		t.Fatalf("read with the wrong key: %v", err)
	}
}

func testReadYourWrites(t *testing.T, e *env) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				name := fmt.Sprintf("g%d-%d", g, i)
				s, err := e.shoots.Create(e.ctx, NewShoot("garden-a", name, "seed", nil))
				if err != nil {
					t.Errorf("create: %v", err)
					return
				}
				got, err := e.shoots.Get(e.ctx, "garden-a", name)
				if err != nil || rv(got) != rv(s) {
					t.Errorf("get after create: %v rv %v want %d", err, got, rv(s))
					return
				}
				next := cloneShoot(s.(*corev1beta1.Shoot))
				next.Spec.Region = "r2"
				u, err := e.shoots.Update(e.ctx, next)
				if err != nil {
					t.Errorf("update: %v", err)
					return
				}
				list, err := e.shoots.List(e.ctx, "garden-a", store.ListOptions{Fields: fields.OneTermEqualSelector("metadata.name", name)})
				if err != nil || len(list.Items) != 1 || rv(list.Items[0]) != rv(u) {
					t.Errorf("list after update: %v %v", list, err)
					return
				}
				if lrv, _ := strconv.ParseInt(list.ResourceVersion, 10, 64); lrv < rv(u) {
					t.Errorf("list rv %d below the write's %d", lrv, rv(u))
				}
				if _, _, err := e.shoots.Delete(e.ctx, "garden-a", name, nil); err != nil {
					t.Errorf("delete: %v", err)
					return
				}
				if _, err := e.shoots.Get(e.ctx, "garden-a", name); !apierrors.IsNotFound(err) {
					t.Errorf("get after delete: %v", err)
					return
				}
				if objs, err := e.shoots.ByIndex(e.ctx, "seed", "seed"); err != nil || slices.Contains(names(objs), "garden-a/"+name) {
					t.Errorf("index after delete: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func testRevision(t *testing.T, e *env) {
	s := e.createShoot("garden-a", "s0", "seed", nil)
	e.getShoot("garden-a", "s0")
	if e.s.Revision() < rv(s) {
		t.Fatalf("Revision %d below the last write %d", e.s.Revision(), rv(s))
	}
	// Writes to other resources reach every cache's revision through progress notifications.
	ns := e.create(e.namespaces, &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: "n1"}})
	waitFor(t, func() bool {
		res, err := e.shoots.List(e.ctx, "", store.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(res.ResourceVersion, 10, 64)
		return n >= rv(ns)
	})
	// A watch from a revision written to another resource starts without delay.
	start := time.Now()
	ns2 := e.create(e.namespaces, &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: "n2"}})
	w := e.watch("", store.WatchOptions{ResourceVersion: ns2.GetMetadata().GetResourceVersion()})
	if d := time.Since(start); d > time.Second {
		t.Fatalf("watch from another resource's revision took %s", d)
	}
	expectQuiet(t, w, 50*time.Millisecond)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mustParseLabels(s string) labels.Selector {
	sel, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}
