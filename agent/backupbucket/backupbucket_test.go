package backupbucket_test

import (
	"context"
	"encoding/json"
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
	metav1k "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/trellis-dev/trellis/agent/backupbucket"
	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/resources"
	"github.com/trellis-dev/trellis/test/agenttest"
)

// backupSpec adds backups of type "test" to agenttest.SeedSpec, with the credentials garden/backup-secret.
const backupSpec = `    backup:
      provider: test
      region: eu-1
      providerConfig:
        tier: cold
      credentialsRef:
        apiVersion: v1
        kind: Secret
        name: backup-secret
        namespace: garden
`

type extBucket = extensionsv1alpha1.BackupBucket

// bucketActuator is the "test" extension's BackupBucket actuator: it reads the credentials the agent put into the
// seed, generates a secret for the bucket (garden/generated-<name>, with the credentials' user), reports a
// providerStatus, and fails with the code providerConfig.fail names.
type bucketActuator struct {
	c       client.Client
	mu      sync.Mutex
	users   map[string][]string // bucket → the users of the credentials it was reconciled with, in order
	deletes map[string]int
}

func newBucketActuator(c client.Client) *bucketActuator {
	return &bucketActuator{c: c, users: map[string][]string{}, deletes: map[string]int{}}
}

func (a *bucketActuator) Reconcile(ctx context.Context, _ logr.Logger, obj *extBucket, _ *extsdk.Cluster) error {
	var cfg struct {
		Fail string `json:"fail"`
	}
	if pc := obj.Spec.ProviderConfig; pc != nil {
		if err := json.Unmarshal(pc.Raw, &cfg); err != nil {
			return err
		}
	}
	if cfg.Fail != "" {
		return extsdk.WithCodes(errors.New("the provider refuses access"), extensionsv1alpha1.ErrorCode(cfg.Fail))
	}
	creds := &corev1.Secret{}
	if err := a.c.Get(ctx, client.ObjectKey{Namespace: obj.Spec.SecretRef.Namespace, Name: obj.Spec.SecretRef.Name}, creds); err != nil {
		return err
	}
	gen := &corev1.Secret{ObjectMeta: metav1k.ObjectMeta{Namespace: "garden", Name: "generated-" + obj.Name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, a.c, gen, func() error {
		gen.Data = map[string][]byte{"bucketName": []byte(obj.Name), "user": creds.Data["user"]}
		return nil
	}); err != nil {
		return err
	}
	a.mu.Lock()
	a.users[obj.Name] = append(a.users[obj.Name], string(creds.Data["user"]))
	a.mu.Unlock()
	obj.Status.GeneratedSecretRef = &corev1.SecretReference{Namespace: gen.Namespace, Name: gen.Name}
	obj.Status.ProviderStatus = &runtime.RawExtension{Raw: []byte(`{"bucketID":"id-` + obj.Name + `"}`)}
	return nil
}

func (a *bucketActuator) Delete(ctx context.Context, _ logr.Logger, obj *extBucket, _ *extsdk.Cluster) error {
	gen := &corev1.Secret{ObjectMeta: metav1k.ObjectMeta{Namespace: "garden", Name: "generated-" + obj.Name}}
	if err := a.c.Delete(ctx, gen); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	a.mu.Lock()
	a.deletes[obj.Name]++
	a.mu.Unlock()
	return nil
}

func (a *bucketActuator) lastUser(bucket string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if u := a.users[bucket]; len(u) > 0 {
		return u[len(u)-1]
	}
	return ""
}

func (a *bucketActuator) deleted(bucket string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deletes[bucket]
}

// start runs the "test" extension and the BackupBucket controller.
func start(t *testing.T, e *env) *bucketActuator {
	t.Helper()
	a := newBucketActuator(e.seed.Client)
	agenttest.StartExtensions(t, e.seed.Cluster.Config,
		agenttest.Extension(controller.AddArgs[*extBucket]{Actuator: a, Type: "test", NewObject: func() *extBucket { return &extBucket{} }}))
	agenttest.RunController(t, func() (agenttest.Runner, error) {
		return backupbucket.New(backupbucket.Config{Base: e.seed.Base(50*time.Millisecond, time.Second), PollInterval: 50 * time.Millisecond})
	})
	return a
}

// bucket reads a BackupBucket on the hub as the admin.
func (e *env) bucket(t *testing.T, name string) (*corev1beta1.BackupBucket, error) {
	t.Helper()
	return corev1beta1.NewBackupBucketServiceClient(e.Admin).Get(context.Background(), &metav1.GetRequest{Name: name})
}

// waitBucket waits until the hub's BackupBucket name satisfies cond and returns it.
func (e *env) waitBucket(t *testing.T, name, what string, cond func(*corev1beta1.BackupBucket) bool) *corev1beta1.BackupBucket {
	t.Helper()
	var b *corev1beta1.BackupBucket
	agenttest.Eventually(t, "BackupBucket "+name+": "+what, func() bool {
		var err error
		b, err = e.bucket(t, name)
		return err == nil && cond(b)
	})
	return b
}

func succeededAs(typ string) func(*corev1beta1.BackupBucket) bool {
	return func(b *corev1beta1.BackupBucket) bool {
		lo := b.GetStatus().GetLastOperation()
		return lo.GetType() == typ && lo.GetState() == "Succeeded" && b.GetStatus().GetObservedGeneration() == b.GetMetadata().GetGeneration()
	}
}

func jsonEqual(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return string(gb) == string(wb)
}

// The seed's bucket: created on the hub from the Seed's spec.backup, deployed to the seed with the credentials,
// reconciled by the extension, its generated secret copied back, its status reported; rotated credentials reach
// the extension again.
func TestSeedBucket(t *testing.T) {
	e := newEnv(t, agenttest.SeedSpec+backupSpec, agenttest.Secret("garden", "backup-secret", map[string]string{"user": "alice"}))
	a := start(t, e)
	seed, _ := cache.Get[*corev1beta1.Seed](e.seed.Cache, resources.Seeds, "", seedName)
	uid := seed.GetMetadata().GetUid()

	b := e.waitBucket(t, uid, "Create Succeeded", succeededAs("Create"))
	spec := b.GetSpec()
	if spec.GetProvider().GetType() != "test" || spec.GetProvider().GetRegion() != "eu-1" || spec.GetSeedName() != seedName ||
		spec.GetCredentialsRef().GetName() != "backup-secret" || spec.GetCredentialsRef().GetNamespace() != "garden" ||
		!jsonEqual(t, spec.GetProviderConfig().GetRaw(), `{"tier":"cold"}`) {
		t.Errorf("the seed's bucket has spec %v", spec)
	}
	if refs := b.GetMetadata().GetOwnerReferences(); len(refs) != 1 || refs[0].GetKind() != "Seed" || refs[0].GetUid() != uid || !refs[0].GetController() {
		t.Errorf("owner references %v, want the Seed as controller", refs)
	}
	if !slices.Contains(b.GetMetadata().GetFinalizers(), "gardener") {
		t.Errorf("finalizers %v lack gardener", b.GetMetadata().GetFinalizers())
	}
	st := b.GetStatus()
	if st.GetLastError() != nil || st.GetLastOperation().GetProgress() != 100 ||
		!jsonEqual(t, st.GetProviderStatus().GetRaw(), `{"bucketID":"id-`+uid+`"}`) ||
		st.GetGeneratedSecretRef().GetName() != "generated-bucket-"+uid || st.GetGeneratedSecretRef().GetNamespace() != "garden" {
		t.Errorf("status %v", st)
	}

	gen, err := kcorev1.NewSecretServiceClient(e.Admin).Get(context.Background(), &metav1.GetRequest{Namespace: "garden", Name: "generated-bucket-" + uid})
	if err != nil {
		t.Fatalf("the generated secret on the hub: %v", err)
	}
	if string(gen.GetData()["user"]) != "alice" || string(gen.GetData()["bucketName"]) != uid {
		t.Errorf("generated secret data %v", gen.GetData())
	}
	if refs := gen.GetMetadata().GetOwnerReferences(); len(refs) != 1 || refs[0].GetKind() != "BackupBucket" || refs[0].GetName() != uid {
		t.Errorf("generated secret owners %v", refs)
	}
	if !slices.Contains(gen.GetMetadata().GetFinalizers(), "core.gardener.cloud/backupbucket") {
		t.Errorf("generated secret finalizers %v", gen.GetMetadata().GetFinalizers())
	}

	ext := &extBucket{}
	if err := e.seed.Client.Get(context.Background(), client.ObjectKey{Name: uid}, ext); err != nil {
		t.Fatal(err)
	}
	if ext.Spec.Type != "test" || ext.Spec.Region != "eu-1" || ext.Spec.SecretRef.Name != "bucket-"+uid || ext.Spec.SecretRef.Namespace != "garden" {
		t.Errorf("extension bucket spec %+v", ext.Spec)
	}
	if a.lastUser(uid) != "alice" {
		t.Errorf("the extension saw user %q, want alice", a.lastUser(uid))
	}

	// Rotated credentials: copied into the seed, the extension reconciles again, the new generated secret reaches
	// the hub.
	sc := kcorev1.NewSecretServiceClient(e.Admin)
	cur, err := sc.Get(context.Background(), &metav1.GetRequest{Namespace: "garden", Name: "backup-secret"})
	if err != nil {
		t.Fatal(err)
	}
	cur.Data["user"] = []byte("bob")
	if _, err := sc.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	e.waitBucket(t, uid, "Reconcile Succeeded", succeededAs("Reconcile"))
	agenttest.Eventually(t, "the rotated credentials in the generated secret on the hub", func() bool {
		gen, err := sc.Get(context.Background(), &metav1.GetRequest{Namespace: "garden", Name: "generated-bucket-" + uid})
		return err == nil && string(gen.GetData()["user"]) == "bob"
	})
	if a.lastUser(uid) != "bob" {
		t.Errorf("the extension saw user %q, want bob", a.lastUser(uid))
	}
}

// A bucket whose extension fails shows Error with the extension's codes and recovers when its spec is fixed; a
// deleted bucket has its extension object, its secrets in the seed and on the hub deleted before the finalizer goes.
func TestBucketErrorAndDeletion(t *testing.T) {
	name := fmt.Sprintf("extra-%d", time.Now().UnixNano()%1e9) // unique in the package's shared seed
	bucket := &corev1beta1.BackupBucket{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "BackupBucket",
		Metadata: &metav1.ObjectMeta{Name: name},
		Spec: &corev1beta1.BackupBucketSpec{Provider: &corev1beta1.BackupBucketProvider{Type: "test", Region: "eu-2"},
			ProviderConfig: &metav1.RawExtension{Raw: []byte(`{"fail":"ERR_INFRA_UNAUTHORIZED"}`)},
			CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Namespace: "garden", Name: "creds"},
			SeedName:       proto.String(seedName)}}
	e := newEnv(t, agenttest.SeedSpec, agenttest.Secret("garden", "creds", map[string]string{"user": "carol"}), bucket)
	a := start(t, e)

	b := e.waitBucket(t, name, "Error with the extension's code", func(b *corev1beta1.BackupBucket) bool {
		return b.GetStatus().GetLastOperation().GetState() == "Error" && slices.Equal(b.GetStatus().GetLastError().GetCodes(), []string{"ERR_INFRA_UNAUTHORIZED"})
	})
	if !strings.Contains(b.GetStatus().GetLastError().GetDescription(), "refuses access") {
		t.Errorf("lastError %v", b.GetStatus().GetLastError())
	}

	bc := corev1beta1.NewBackupBucketServiceClient(e.Admin)
	agenttest.Eventually(t, "the fixed providerConfig stored", func() bool {
		cur, err := bc.Get(context.Background(), &metav1.GetRequest{Name: name})
		if err != nil {
			return false
		}
		cur.Spec.ProviderConfig = &metav1.RawExtension{Raw: []byte(`{}`)}
		_, err = bc.Update(context.Background(), cur)
		return err == nil
	})
	b = e.waitBucket(t, name, "Create Succeeded after the fix", succeededAs("Create"))
	if b.GetStatus().GetLastError() != nil {
		t.Errorf("lastError %v after success", b.GetStatus().GetLastError())
	}
	if a.lastUser(name) != "carol" {
		t.Errorf("the extension saw user %q, want carol", a.lastUser(name))
	}

	if _, err := bc.Delete(context.Background(), &metav1.DeleteRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	agenttest.Eventually(t, "the bucket gone from the hub", func() bool {
		_, err := e.bucket(t, name)
		return status.Code(err) == codes.NotFound
	})
	if a.deleted(name) == 0 {
		t.Error("the extension never deleted the bucket")
	}
	if err := e.seed.Client.Get(context.Background(), client.ObjectKey{Name: name}, &extBucket{}); !apierrors.IsNotFound(err) {
		t.Errorf("extension bucket: %v, want NotFound", err)
	}
	if err := e.seed.Client.Get(context.Background(), client.ObjectKey{Namespace: "garden", Name: "bucket-" + name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("seed secret: %v, want NotFound", err)
	}
	if _, err := kcorev1.NewSecretServiceClient(e.Admin).Get(context.Background(), &metav1.GetRequest{Namespace: "garden", Name: "generated-bucket-" + name}); !notFound(err) {
		t.Errorf("generated secret on the hub: %v, want NotFound", err)
	}
}
