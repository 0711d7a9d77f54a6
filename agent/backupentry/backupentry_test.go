package backupentry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/backupentry"
	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

type extEntry = extensionsv1alpha1.BackupEntry

// journal records what the "test" extensions of every seed did, in order.
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	j.entries = append(j.entries, fmt.Sprintf(format, args...))
	j.mu.Unlock()
}

// index is the position of the first record starting with prefix, -1 if none.
func (j *journal) index(prefix string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.IndexFunc(j.entries, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

func (j *journal) String() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.entries, "\n")
}

// entryActuator is the "test" extension's BackupEntry actuator of one seed: it reads the secret the agent put into
// the seed and records it, keeps a state, fails while told to, and records migrations and restores (with the state
// it was given).
type entryActuator struct {
	seed string
	c    client.Client
	j    *journal
	mu   sync.Mutex
	fail error
}

func (a *entryActuator) Reconcile(ctx context.Context, _ logr.Logger, obj *extEntry, _ *extsdk.Cluster) error {
	sec := &corev1.Secret{}
	if err := a.c.Get(ctx, client.ObjectKey{Namespace: obj.Spec.SecretRef.Namespace, Name: obj.Spec.SecretRef.Name}, sec); err != nil {
		return err
	}
	a.mu.Lock()
	err := a.fail
	a.mu.Unlock()
	if err != nil {
		return err
	}
	a.j.add("%s Reconcile %s user=%s bucket=%s", a.seed, obj.Name, sec.Data["user"], obj.Spec.BucketName)
	obj.Status.State = &runtime.RawExtension{Raw: []byte(`{"backups":"` + a.seed + `"}`)}
	return nil
}

func (a *entryActuator) Delete(_ context.Context, _ logr.Logger, obj *extEntry, _ *extsdk.Cluster) error {
	a.j.add("%s Delete %s", a.seed, obj.Name)
	return nil
}

func (a *entryActuator) Migrate(_ context.Context, _ logr.Logger, obj *extEntry, _ *extsdk.Cluster) error {
	a.j.add("%s Migrate %s", a.seed, obj.Name)
	return nil
}

func (a *entryActuator) Restore(ctx context.Context, log logr.Logger, obj *extEntry, cluster *extsdk.Cluster) error {
	state := ""
	if obj.Status.State != nil {
		state = string(obj.Status.State.Raw)
	}
	a.j.add("%s Restore %s state=%s", a.seed, obj.Name, state)
	return a.Reconcile(ctx, log, obj, cluster)
}

func (a *entryActuator) setFail(err error) {
	a.mu.Lock()
	a.fail = err
	a.mu.Unlock()
}

// start runs the "test" extension and the BackupEntry controller of seed s.
func start(t *testing.T, s *agenttest.Seed, j *journal) *entryActuator {
	t.Helper()
	a := &entryActuator{seed: s.Name, c: s.Client, j: j}
	agenttest.StartExtensions(t, s.Cluster.Config,
		agenttest.Extension(controller.AddArgs[*extEntry]{Actuator: a, Type: "test", NewObject: func() *extEntry { return &extEntry{} }}))
	agenttest.RunController(t, func() (agenttest.Runner, error) {
		return backupentry.New(backupentry.Config{Base: s.Base(50*time.Millisecond, time.Second), PollInterval: 50 * time.Millisecond})
	})
	return a
}

// unique makes a name unique in the package's shared seed, where extension objects of earlier tests may remain.
func unique(base string) string { return fmt.Sprintf("%s--%d", base, time.Now().UnixNano()%1e9) }

// readyBucket stores BackupBucket name of seed, reconciled: generated secret garden/generated-<name> (user alice),
// providerStatus {"id": name}.
func (e *env) readyBucket(t *testing.T, name, seed string) {
	t.Helper()
	e.Store(t, agenttest.Secret("garden", "generated-"+name, map[string]string{"user": "alice"}),
		&corev1beta1.BackupBucket{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "BackupBucket", Metadata: &metav1.ObjectMeta{Name: name},
			Spec: &corev1beta1.BackupBucketSpec{Provider: &corev1beta1.BackupBucketProvider{Type: "test", Region: "eu-1"},
				ProviderConfig: &metav1.RawExtension{Raw: []byte(`{"tier":"cold"}`)},
				CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Namespace: "garden", Name: "creds"},
				SeedName:       proto.String(seed)}})
	e.patchBucketStatus(t, name, map[string]any{
		"lastOperation":      map[string]any{"type": "Create", "state": "Succeeded", "progress": 100, "description": "ok", "lastUpdateTime": time.Now().UTC().Format(time.RFC3339)},
		"observedGeneration": 1,
		"generatedSecretRef": map[string]string{"namespace": "garden", "name": "generated-" + name},
		"providerStatus":     map[string]string{"id": name},
	})
}

func backupEntry(name, bucket, seed string, owner *corev1beta1.Shoot) *corev1beta1.BackupEntry {
	e := &corev1beta1.BackupEntry{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "BackupEntry",
		Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: name},
		Spec:     &corev1beta1.BackupEntrySpec{BucketName: bucket, SeedName: proto.String(seed)}}
	if owner != nil {
		e.Metadata.OwnerReferences = []*metav1.OwnerReference{{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot",
			Name: owner.GetMetadata().GetName(), Uid: owner.GetMetadata().GetUid(), Controller: proto.Bool(true)}}
	}
	return e
}

func (e *env) entry(name string) (*corev1beta1.BackupEntry, error) {
	return corev1beta1.NewBackupEntryServiceClient(e.Admin).Get(context.Background(), &metav1.GetRequest{Namespace: "garden", Name: name})
}

// waitEntry waits until the hub's BackupEntry garden/name satisfies cond and returns it.
func (e *env) waitEntry(t *testing.T, name, what string, cond func(*corev1beta1.BackupEntry) bool) *corev1beta1.BackupEntry {
	t.Helper()
	var be *corev1beta1.BackupEntry
	agenttest.Eventually(t, "BackupEntry "+name+": "+what, func() bool {
		var err error
		be, err = e.entry(name)
		return err == nil && cond(be)
	})
	return be
}

func succeededAs(typ, seed string) func(*corev1beta1.BackupEntry) bool {
	return func(be *corev1beta1.BackupEntry) bool {
		lo := be.GetStatus().GetLastOperation()
		return lo.GetType() == typ && lo.GetState() == "Succeeded" && be.GetStatus().GetSeedName() == seed &&
			be.GetStatus().GetObservedGeneration() == be.GetMetadata().GetGeneration()
	}
}

// An entry is deployed into its seed with its bucket's data and secret and reported Succeeded; a failing extension
// shows on the entry with its codes; a rotated bucket secret reaches the extension; a deleted entry has its extension
// object and secret deleted before the finalizer goes.
func TestEntryLifecycle(t *testing.T) {
	e := newEnv(t)
	s := e.StartSeed(t, "local", agenttest.SeedSpec, seedtest.StartShared(t))
	e.readyBucket(t, "b1", "local")
	name := unique("shoot--dev--one")
	e.Store(t, backupEntry(name, "b1", "local", nil))
	j := &journal{}
	a := start(t, s, j)

	be := e.waitEntry(t, name, "Create Succeeded", succeededAs("Create", "local"))
	if !slices.Contains(be.GetMetadata().GetFinalizers(), "gardener") || be.GetStatus().GetLastError() != nil {
		t.Errorf("entry %v", be)
	}
	ext := &extEntry{}
	if err := s.Client.Get(context.Background(), client.ObjectKey{Name: name}, ext); err != nil {
		t.Fatal(err)
	}
	if ext.Spec.Type != "test" || ext.Spec.Region != "eu-1" || ext.Spec.BucketName != "b1" ||
		ext.Spec.SecretRef != (corev1.SecretReference{Namespace: "garden", Name: "entry-" + name}) ||
		ext.Spec.BackupBucketProviderStatus == nil || string(ext.Spec.BackupBucketProviderStatus.Raw) != `{"id":"b1"}` ||
		ext.Spec.ProviderConfig == nil || string(ext.Spec.ProviderConfig.Raw) != `{"tier":"cold"}` {
		t.Errorf("extension entry spec %+v", ext.Spec)
	}
	if j.index("local Reconcile "+name+" user=alice bucket=b1") < 0 {
		t.Errorf("the extension did not reconcile with the bucket's secret:\n%s", j)
	}

	// The bucket's secret rotates while the extension fails: the error and its code show on the entry.
	a.setFail(extsdk.WithCodes(errors.New("quota exhausted"), extensionsv1alpha1.ErrorInfraQuotaExceeded))
	sc := kcorev1.NewSecretServiceClient(e.Admin)
	gen, err := sc.Get(context.Background(), &metav1.GetRequest{Namespace: "garden", Name: "generated-b1"})
	if err != nil {
		t.Fatal(err)
	}
	gen.Data["user"] = []byte("bob")
	if _, err := sc.Update(context.Background(), gen); err != nil {
		t.Fatal(err)
	}
	be = e.waitEntry(t, name, "Error with the code", func(be *corev1beta1.BackupEntry) bool {
		return be.GetStatus().GetLastOperation().GetState() == "Error" &&
			slices.Equal(be.GetStatus().GetLastError().GetCodes(), []string{"ERR_INFRA_QUOTA_EXCEEDED"})
	})
	if !strings.Contains(be.GetStatus().GetLastError().GetDescription(), "quota exhausted") {
		t.Errorf("lastError %v", be.GetStatus().GetLastError())
	}
	a.setFail(nil) // the extension retries by itself
	e.waitEntry(t, name, "Reconcile Succeeded", succeededAs("Reconcile", "local"))
	if j.index("local Reconcile "+name+" user=bob") < 0 {
		t.Errorf("the extension never saw the rotated secret:\n%s", j)
	}

	if _, err := corev1beta1.NewBackupEntryServiceClient(e.Admin).Delete(context.Background(), &metav1.DeleteRequest{Namespace: "garden", Name: name}); err != nil {
		t.Fatal(err)
	}
	agenttest.Eventually(t, "the entry gone from the hub", func() bool {
		_, err := e.entry(name)
		return status.Code(err) == codes.NotFound
	})
	if j.index("local Delete "+name) < 0 {
		t.Errorf("the extension never deleted the entry:\n%s", j)
	}
	if err := s.Client.Get(context.Background(), client.ObjectKey{Name: name}, &extEntry{}); !apierrors.IsNotFound(err) {
		t.Errorf("extension entry: %v, want NotFound", err)
	}
	if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: "garden", Name: "entry-" + name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("seed secret: %v, want NotFound", err)
	}
}

// An entry waits for its bucket: nothing is deployed while the bucket is not ready.
func TestEntryWaitsForBucket(t *testing.T) {
	e := newEnv(t)
	name := unique("shoot--dev--two")
	s := e.StartSeed(t, "local", agenttest.SeedSpec, seedtest.StartShared(t))
	e.Store(t, agenttest.Secret("garden", "generated-b2", map[string]string{"user": "alice"}),
		&corev1beta1.BackupBucket{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "BackupBucket", Metadata: &metav1.ObjectMeta{Name: "b2"},
			Spec: &corev1beta1.BackupBucketSpec{Provider: &corev1beta1.BackupBucketProvider{Type: "test", Region: "eu-1"},
				CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Namespace: "garden", Name: "creds"},
				SeedName:       proto.String("local")}},
		backupEntry(name, "b2", "local", nil))
	j := &journal{}
	start(t, s, j)
	e.waitEntry(t, name, "Processing, waiting for the bucket", func(be *corev1beta1.BackupEntry) bool {
		lo := be.GetStatus().GetLastOperation()
		return lo.GetState() == "Processing" && strings.Contains(lo.GetDescription(), `BackupBucket "b2" is not ready`)
	})
	if err := s.Client.Get(context.Background(), client.ObjectKey{Name: name}, &extEntry{}); !apierrors.IsNotFound(err) {
		t.Fatalf("extension entry deployed before its bucket is ready: %v", err)
	}
	e.patchBucketStatus(t, "b2", map[string]any{
		"lastOperation":      map[string]any{"type": "Create", "state": "Succeeded", "progress": 100, "description": "ok", "lastUpdateTime": time.Now().UTC().Format(time.RFC3339)},
		"observedGeneration": 1,
		"generatedSecretRef": map[string]string{"namespace": "garden", "name": "generated-b2"},
	})
	e.waitEntry(t, name, "Create Succeeded", succeededAs("Create", "local"))
}

// A shoot's control plane moves from seed src to seed dst: src migrates the entry (annotate migrate, wait, delete
// the extension object, clear status.seedName), and only then dst restores it with the state the ShootState keeps.
func TestEntryMigration(t *testing.T) {
	e := newEnv(t)
	src := e.StartSeed(t, "src", agenttest.SeedSpec, seedtest.StartShared(t))
	dst := e.StartSeed(t, "dst", agenttest.SeedSpec, seedtest.Start(t))
	name := unique("shoot--dev--mig")
	stored := e.Store(t, &corev1beta1.Shoot{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot",
		Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "mig"},
		Spec:     &corev1beta1.ShootSpec{SeedName: proto.String("src"), Region: "local", Provider: &corev1beta1.Provider{Type: "local"}}},
		&corev1beta1.ShootState{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "ShootState",
			Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "mig"},
			Spec: &corev1beta1.ShootStateSpec{Extensions: []*corev1beta1.ExtensionResourceState{{Kind: "BackupEntry", Name: proto.String(name),
				State: &metav1.RawExtension{Raw: []byte(`{"backups":"saved"}`)}}}}})
	e.readyBucket(t, "b3", "src")
	e.Store(t, backupEntry(name, "b3", "src", stored[0].(*corev1beta1.Shoot)))
	j := &journal{}
	start(t, src, j)
	start(t, dst, j)
	e.waitEntry(t, name, "Create Succeeded on src", succeededAs("Create", "src"))

	e.Update(t, "core.gardener.cloud", "shoots", "garden", "mig", false, func(o store.Object) { o.(*corev1beta1.Shoot).Spec.SeedName = proto.String("dst") })
	agenttest.Eventually(t, "the entry moved to dst", func() bool {
		cur, err := e.entry(name)
		if err != nil {
			return false
		}
		cur.Spec.SeedName = proto.String("dst")
		_, err = corev1beta1.NewBackupEntryServiceClient(e.Admin).Update(context.Background(), cur)
		return err == nil
	})
	e.waitEntry(t, name, "Restore Succeeded on dst", succeededAs("Restore", "dst"))

	migrated, restored := j.index("src Migrate "+name), j.index("dst Restore "+name+` state={"backups":"saved"}`)
	if migrated < 0 || restored < 0 || restored < migrated {
		t.Errorf("want src's migration before dst's restore from the saved state:\n%s", j)
	}
	if err := src.Client.Get(context.Background(), client.ObjectKey{Name: name}, &extEntry{}); !apierrors.IsNotFound(err) {
		t.Errorf("extension entry on src: %v, want NotFound", err)
	}
	if err := src.Client.Get(context.Background(), client.ObjectKey{Namespace: "garden", Name: "entry-" + name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("secret on src: %v, want NotFound", err)
	}
	ext := &extEntry{}
	if err := dst.Client.Get(context.Background(), client.ObjectKey{Name: name}, ext); err != nil {
		t.Fatal(err)
	}
	if lo := ext.Status.LastOperation; lo == nil || lo.Type != extensionsv1alpha1.LastOperationTypeRestore || lo.State != extensionsv1alpha1.LastOperationStateSucceeded {
		t.Errorf("extension entry on dst: lastOperation %+v", ext.Status.LastOperation)
	}
}
