package hubobject_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/agent/extension"
	"github.com/trellis-dev/trellis/agent/hubobject"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// bucket creates BackupBucket name through api and returns it as stored.
// testHub starts a hub that admits BackupBuckets of type "test": its ControllerRegistration registers the type.
func testHub(t *testing.T) *hubtest.Hub {
	t.Helper()
	h := hubtest.Start(t)
	h.RegisterExtensions(t, "backup-test", "BackupBucket/test")
	return h
}

func bucket(t *testing.T, api corev1beta1.BackupBucketServiceClient, name string) *corev1beta1.BackupBucket {
	t.Helper()
	b, err := api.Create(context.Background(), &corev1beta1.BackupBucket{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "BackupBucket",
		Metadata: &metav1.ObjectMeta{Name: name},
		Spec: &corev1beta1.BackupBucketSpec{Provider: &corev1beta1.BackupBucketProvider{Type: "test", Region: "eu-1"},
			CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Namespace: "garden", Name: "creds"},
			SeedName:       proto.String("local")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An update from a stale copy meets a conflict, re-reads the object and applies the change to the newest state;
// the written object wins over older cached ones until the cache catches up.
func TestUpdateAfterConflict(t *testing.T) {
	ctx := context.Background()
	api := corev1beta1.NewBackupBucketServiceClient(testHub(t).GRPC(t))
	c := hubobject.NewClient(api, 10*time.Second, time.Now)
	stale := bucket(t, api, "b1")
	other := proto.Clone(stale).(*corev1beta1.BackupBucket)
	other.Metadata.Labels = map[string]string{"changed": "meanwhile"}
	if _, err := api.Update(ctx, other); err != nil {
		t.Fatal(err)
	}

	out, err := c.AddFinalizer(ctx, stale, "gardener")
	if err != nil {
		t.Fatal(err)
	}
	got, err := api.Get(ctx, &metav1.GetRequest{Name: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.GetMetadata().GetFinalizers(), []string{"gardener"}) || got.GetMetadata().GetLabels()["changed"] != "meanwhile" {
		t.Fatalf("on the hub: finalizers %v, labels %v; want the finalizer added to the newest state", got.GetMetadata().GetFinalizers(), got.GetMetadata().GetLabels())
	}
	if again, err := c.AddFinalizer(ctx, out, "gardener"); err != nil || again.GetMetadata().GetResourceVersion() != out.GetMetadata().GetResourceVersion() {
		t.Errorf("adding a finalizer that is there: %v, resourceVersion %s, want no write (%s)", err, again.GetMetadata().GetResourceVersion(), out.GetMetadata().GetResourceVersion())
	}

	if p, ok := c.Pick("b1", stale, true); !ok || !proto.Equal(p, out) {
		t.Errorf("Pick with an older cached object: %v %v, want the written one", p, ok)
	}
	if _, ok := c.Pick("b1", nil, false); ok {
		t.Error("Pick of an object the cache no longer has found one")
	}
	if p, ok := c.Pick("b1", got, true); !ok || p != got {
		t.Errorf("Pick with a cached object as new as the written one: %v %v, want the cached one", p, ok)
	}
	if p, _ := c.Pick("b1", stale, true); p != stale {
		t.Error("Pick still prefers the written object after the cache caught up")
	}

	if out, err = c.RemoveFinalizer(ctx, out, "gardener"); err != nil || len(out.GetMetadata().GetFinalizers()) != 0 {
		t.Fatalf("RemoveFinalizer: %v, finalizers %v", err, out.GetMetadata().GetFinalizers())
	}
}

// Report writes lastOperation and lastError, with the extension's codes, and writes nothing when the status says
// the outcome already.
func TestReport(t *testing.T) {
	ctx := context.Background()
	api := corev1beta1.NewBackupBucketServiceClient(testHub(t).GRPC(t))
	now := time.Date(2026, 11, 22, 12, 0, 0, 700_000_000, time.UTC)
	c := hubobject.NewClient(api, 10*time.Second, func() time.Time { return now })
	b := bucket(t, api, "b2")

	failed := hubobject.Failed("Create", hubobject.ErrorOf(extension.WithCodes(errors.New("no access"), "ERR_INFRA_UNAUTHORIZED")))
	b, err := c.Report(ctx, b, b.GetStatus(), failed, nil)
	if err != nil {
		t.Fatal(err)
	}
	lo, le := b.GetStatus().GetLastOperation(), b.GetStatus().GetLastError()
	if lo.GetType() != "Create" || lo.GetState() != hubobject.StateError || lo.GetProgress() != 50 || lo.GetDescription() != "no access" ||
		!lo.GetLastUpdateTime().AsTime().Equal(now.Truncate(time.Second)) {
		t.Errorf("lastOperation %v", lo)
	}
	if le.GetDescription() != "no access" || !slices.Equal(le.GetCodes(), []string{"ERR_INFRA_UNAUTHORIZED"}) {
		t.Errorf("lastError %v", le)
	}
	if again, err := c.Report(ctx, b, b.GetStatus(), failed, nil); err != nil || again != b {
		t.Errorf("reporting the same outcome again: %v, wrote %v", err, again != b)
	}

	b, err = c.Report(ctx, b, b.GetStatus(), hubobject.Succeeded("Create", "done"), map[string]any{"observedGeneration": 1})
	if err != nil {
		t.Fatal(err)
	}
	if st := b.GetStatus(); st.GetLastError() != nil || st.GetLastOperation().GetState() != hubobject.StateSucceeded ||
		st.GetLastOperation().GetProgress() != 100 || st.GetObservedGeneration() != 1 {
		t.Errorf("status after success %v, want Succeeded, no lastError, observedGeneration 1", st)
	}
}
