package seed

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func timestamppbAt(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func TestProgressingOr(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	at := func(status string, since time.Duration) *metav1.Condition {
		return &metav1.Condition{Type: "X", Status: status, LastTransitionTime: timestamppbAt(t0.Add(-since))}
	}
	for _, tc := range []struct {
		name      string
		old       *metav1.Condition
		threshold time.Duration
		want      string
	}{
		{"new condition", nil, time.Minute, "False"},
		{"true, with a threshold", at("True", time.Hour), time.Minute, "Progressing"},
		{"true, no threshold", at("True", time.Hour), 0, "False"},
		{"progressing within the threshold", at("Progressing", 30*time.Second), time.Minute, "Progressing"},
		{"progressing past the threshold", at("Progressing", 2*time.Minute), time.Minute, "False"},
		{"false stays false", at("False", time.Hour), time.Minute, "False"},
		{"unknown turns false", at("Unknown", time.Hour), time.Minute, "False"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := progressingOr(tc.old, "X", statusFalse, "Reason", "message", tc.threshold, t0)
			if got.GetStatus() != tc.want {
				t.Fatalf("status %s, want %s", got.GetStatus(), tc.want)
			}
			if tc.old != nil && tc.old.GetStatus() == got.GetStatus() && !proto.Equal(got.GetLastTransitionTime(), tc.old.GetLastTransitionTime()) {
				t.Error("lastTransitionTime moved without a status change")
			}
		})
	}
}

// TestBackupBucketsCheck: no condition on a seed that never had a bucket; True with healthy buckets; a failing bucket
// turns it Progressing and, after the threshold on the fake clock, False listing the bucket; once the buckets are
// gone Unknown.
func TestBackupBucketsCheck(t *testing.T) {
	ctx := context.Background()
	reg := controllertest.NewRegistry(t)
	seeds := controllertest.Collection(t, reg, "core.gardener.cloud", "seeds")
	buckets := controllertest.Collection(t, reg, "core.gardener.cloud", "backupbuckets")
	controllertest.Create(t, seeds, &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: "s"}, Spec: &corev1beta1.SeedSpec{Provider: &corev1beta1.SeedProvider{Type: "local"}}})
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	r := &backupBucketsCheck{seeds: seeds, buckets: buckets, syncPeriod: 30 * time.Second, threshold: time.Minute, clock: clk}
	check := func(wantStatus, wantReason string) *metav1.Condition {
		t.Helper()
		res, err := r.Reconcile(ctx, controller.Key{Name: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter != 30*time.Second {
			t.Errorf("requeue after %v, want the sync period", res.RequeueAfter)
		}
		obj, _ := seeds.Get(ctx, "", "s")
		c := condition(obj.(*corev1beta1.Seed).GetStatus().GetConditions(), ConditionBackupBucketsReady)
		if c.GetStatus() != wantStatus || c.GetReason() != wantReason {
			t.Fatalf("BackupBucketsReady %s/%s (%s), want %s/%s", c.GetStatus(), c.GetReason(), c.GetMessage(), wantStatus, wantReason)
		}
		return c
	}
	check("", "")
	controllertest.Create(t, buckets, &corev1beta1.BackupBucket{Metadata: &metav1.ObjectMeta{Name: "b1"},
		Spec: &corev1beta1.BackupBucketSpec{SeedName: proto.String("s"), Provider: &corev1beta1.BackupBucketProvider{Type: "local", Region: "r"}}})
	check("True", "BackupBucketsAvailable")
	controllertest.Update(t, buckets, "", "b1", true, func(cur *corev1beta1.BackupBucket) {
		cur.Status = &corev1beta1.BackupBucketStatus{LastError: &metav1.LastError{Description: "quota exceeded"}}
	})
	check("Progressing", "BackupBucketsError")
	clk.Step(30 * time.Second)
	check("Progressing", "BackupBucketsError")
	clk.Step(31 * time.Second)
	c := check("False", "BackupBucketsError")
	if !strings.Contains(c.GetMessage(), "Name: b1, Error: quota exceeded") {
		t.Errorf("message %q does not list the bucket", c.GetMessage())
	}
	if _, _, err := buckets.Delete(ctx, "", "b1", nil); err != nil {
		t.Fatal(err)
	}
	check("Unknown", "BackupBucketsGone") // from False at once, as Gardener's SetToProgressingOrUnknown
}

// TestExtensionsCheck: the worst installation decides, in Gardener's order (valid, installed, healthy, progressing).
func TestExtensionsCheck(t *testing.T) {
	ctx := context.Background()
	reg := controllertest.NewRegistry(t)
	seeds := controllertest.Collection(t, reg, "core.gardener.cloud", "seeds")
	cis := controllertest.Collection(t, reg, "core.gardener.cloud", "controllerinstallations")
	controllertest.Create(t, seeds, &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: "s"}, Spec: &corev1beta1.SeedSpec{Provider: &corev1beta1.SeedProvider{Type: "local"}}})
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	r := &extensionsCheck{seeds: seeds, installations: cis, syncPeriod: 30 * time.Second, clock: clk}
	check := func(wantStatus, wantReason string) string {
		t.Helper()
		if _, err := r.Reconcile(ctx, controller.Key{Name: "s"}); err != nil {
			t.Fatal(err)
		}
		obj, _ := seeds.Get(ctx, "", "s")
		c := condition(obj.(*corev1beta1.Seed).GetStatus().GetConditions(), ConditionExtensionsReady)
		if c.GetStatus() != wantStatus || c.GetReason() != wantReason {
			t.Fatalf("ExtensionsReady %s/%s (%s), want %s/%s", c.GetStatus(), c.GetReason(), c.GetMessage(), wantStatus, wantReason)
		}
		return c.GetMessage()
	}
	check("True", "AllExtensionsReady") // none
	cond := func(typ, st, msg string) *metav1.Condition {
		return &metav1.Condition{Type: typ, Status: st, Message: msg}
	}
	set := func(name string, conds ...*metav1.Condition) {
		t.Helper()
		controllertest.Update(t, cis, "", name, true, func(cur *corev1beta1.ControllerInstallation) {
			cur.Status = &corev1beta1.ControllerInstallationStatus{Conditions: conds}
		})
	}
	for _, n := range []string{"a", "b"} {
		controllertest.Create(t, cis, &corev1beta1.ControllerInstallation{Metadata: &metav1.ObjectMeta{Name: n},
			Spec: &corev1beta1.ControllerInstallationSpec{SeedRef: &metav1.ObjectReference{Name: "s"}, RegistrationRef: &metav1.ObjectReference{Name: n}}})
	}
	if msg := check("False", "NotAllExtensionsInstalled"); !strings.Contains(msg, "a: extension was not yet installed") {
		t.Errorf("message %q", msg)
	}
	ready := []*metav1.Condition{cond("Valid", "True", ""), cond("Installed", "True", ""), cond("Healthy", "True", ""), cond("Progressing", "False", "")}
	set("a", ready...)
	set("b", cond("Valid", "False", "chart cannot be rendered"), cond("Installed", "False", "helm failed"), cond("Healthy", "True", ""), cond("Progressing", "False", ""))
	if msg := check("False", "NotAllExtensionsValid"); msg != "Some extensions are not valid: b: chart cannot be rendered" {
		t.Errorf("message %q", msg)
	}
	set("b", cond("Valid", "True", ""), cond("Installed", "True", ""), cond("Healthy", "True", ""))
	if msg := check("False", "NotAllExtensionsHealthy"); !strings.Contains(msg, "not all required conditions found") {
		t.Errorf("message %q", msg)
	}
	set("b", cond("Valid", "True", ""), cond("Installed", "True", ""), cond("Healthy", "True", ""), cond("Progressing", "True", "rolling"))
	check("False", "SomeExtensionsProgressing")
	set("b", ready...)
	check("True", "AllExtensionsReady")
}

// TestSecrets: a seed's namespace holds copies of the garden's shared secrets, follows their changes and removals,
// and goes with the seed.
func TestSecrets(t *testing.T) {
	ctx := context.Background()
	reg := controllertest.NewRegistry(t)
	seeds := controllertest.Collection(t, reg, "core.gardener.cloud", "seeds")
	namespaces := controllertest.Collection(t, reg, "", "namespaces")
	secrets := controllertest.Collection(t, reg, "", "secrets")
	for _, ns := range []string{"garden"} {
		controllertest.Create(t, namespaces, &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: ns}})
	}
	shared := &kcorev1.Secret{Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "internal-domain", Labels: map[string]string{LabelGardenRole: "internal-domain"},
		Annotations: map[string]string{"dns.gardener.cloud/domain": "internal.example.com"}}, Type: "Opaque", Data: map[string][]byte{"k": []byte("v1")}}
	for _, s := range []*kcorev1.Secret{shared, {Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "private"}}} {
		controllertest.Create(t, secrets, s)
	}
	controllertest.Create(t, seeds, &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: "s"}, Spec: &corev1beta1.SeedSpec{Provider: &corev1beta1.SeedProvider{Type: "local"}}})
	cs, err := New(Config{Source: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer controllertest.Start(t, cs)()
	copyOf := func(name string) *kcorev1.Secret {
		o, err := secrets.Get(ctx, "seed-s", name)
		if err != nil {
			return nil
		}
		return o.(*kcorev1.Secret)
	}
	controllertest.Eventually(t, "the namespace and the copy", func() bool {
		ns, err := namespaces.Get(ctx, "", "seed-s")
		c := copyOf("internal-domain")
		return err == nil && ns.GetMetadata().GetLabels()[LabelGardenRole] == "seed" && len(ns.GetMetadata().GetOwnerReferences()) == 1 &&
			c != nil && string(c.GetData()["k"]) == "v1" && c.GetMetadata().GetAnnotations()["dns.gardener.cloud/domain"] == "internal.example.com"
	})
	if copyOf("private") != nil {
		t.Error("an unlabelled garden secret was copied")
	}
	controllertest.Update(t, secrets, "garden", "internal-domain", false, func(cur *kcorev1.Secret) {
		cur.Data["k"] = []byte("v2")
	})
	controllertest.Eventually(t, "the copy to follow", func() bool { c := copyOf("internal-domain"); return c != nil && string(c.GetData()["k"]) == "v2" })
	controllertest.Update(t, secrets, "garden", "internal-domain", false, func(cur store.Object) {
		cur.GetMetadata().Labels = nil
	})
	controllertest.Eventually(t, "the copy of an unshared secret to go", func() bool { return copyOf("internal-domain") == nil })
	controllertest.Delete(t, seeds, "", "s")
	controllertest.Eventually(t, "the namespace to go with the seed", func() bool {
		_, err := namespaces.Get(ctx, "", "seed-s")
		return err != nil
	})
}
