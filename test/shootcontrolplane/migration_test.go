package shootcontrolplane_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/timescale"
)

// backupSpec adds backups of provider-local to agenttest.SeedSpec, with the credentials garden/backup-local.
const backupSpec = `    backup:
      provider: local
      region: local
      credentialsRef:
        apiVersion: v1
        kind: Secret
        name: backup-local
        namespace: garden
`

// snapshots lists the full snapshots of etcd in the local buckets under root (<bucket>/<entry>/full-*.db).
func snapshots(t *testing.T, root string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root, "*", "*", "full-*.db"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestShootMigrationKeepsData: on two seeds with nodes and local backup buckets, a shoot's etcd snapshots land in its
// BackupEntry; ConfigMaps created with kubectl survive the migration of the shoot to the other seed, also one written
// after the last snapshot before it (the source scales kube-apiserver down, takes a final snapshot and deletes etcd
// with its volume, the destination's etcd restores the snapshot before it starts), reached with the same kubeconfig
// through the hub; deletion removes the
// control plane, its volume, the BackupEntry and its snapshots. It logs the snapshot's size and duration and the
// migration's duration that docs/shoots.md reports.
func TestShootMigrationKeepsData(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two seeds with real nodes and a shoot control plane")
	}
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	ctx := context.Background()
	e := startHub(t)
	if _, err := e.hub.Collection(t, "", "namespaces").Create(ctx, &kcorev1.Namespace{ApiVersion: "v1", Kind: "Namespace",
		Metadata: &metav1.ObjectMeta{Name: "garden"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	e.hub.Store(t, agenttest.Secret("garden", "backup-local", map[string]string{"kind": "local"}))
	backups := t.TempDir()
	e.seed = e.addSeed(t, "local", agenttest.SeedSpec+backupSpec, backups)
	other := e.addSeed(t, "other", agenttest.SeedSpec+backupSpec, backups)

	c := e.createShoot(t, "local")
	ns := e.shoot(t).GetStatus().GetTechnicalId()
	e.ok(t, c.kubeconfig, "create", "namespace", "demo")
	e.ok(t, c.kubeconfig, "-n", "demo", "create", "configmap", "kept", "--from-literal=answer=42")

	// The sidecar's first snapshot is taken when etcd starts; an on-demand one through the etcd client Service
	// holds the config map.
	agenttest.Eventually(t, "a scheduled snapshot in the bucket", func() bool { return len(snapshots(t, backups)) > 0 })
	svc := &corev1.Service{}
	if err := e.seed.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "etcd-main-client"}, svc); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+net.JoinHostPort(svc.Spec.ClusterIP, "8080")+"/snapshot/full", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var snap struct {
		Name      string  `json:"name"`
		SizeBytes int64   `json:"sizeBytes"`
		Seconds   float64 `json:"seconds"`
	}
	if err := json.Unmarshal(body, &snap); resp.StatusCode != http.StatusOK || err != nil || snap.SizeBytes == 0 {
		t.Fatalf("POST /snapshot/full: %d %s %v", resp.StatusCode, body, err)
	}
	t.Logf("etcd full snapshot on demand: %s, %d KiB in %v", snap.Name, snap.SizeBytes>>10,
		time.Duration(snap.Seconds*float64(time.Second)).Round(time.Millisecond))

	// Written after that snapshot: only the migration's final snapshot holds it.
	e.ok(t, c.kubeconfig, "-n", "demo", "create", "configmap", "late", "--from-literal=answer=43")

	// Migrate to the other seed.
	begin := time.Now()
	code, out := e.hub.Do(t, "PATCH", "/apis/core.gardener.cloud/v1beta1/namespaces/"+namespace+"/shoots/"+shootName+"/binding",
		`{"spec":{"seedName":"other"}}`, "Content-Type", "application/merge-patch+json")
	if code != http.StatusOK {
		t.Fatalf("bind the shoot to seed other: %d %s", code, out)
	}
	e.waitShoot(t, "restored on seed other", 5*time.Minute, func(s *corev1beta1.Shoot) bool {
		lo := s.GetStatus().GetLastOperation()
		return s.GetStatus().GetSeedName() == "other" && lo.GetType() == "Restore" && lo.GetState() == "Succeeded"
	})
	restored := time.Since(begin)
	for !e.apiAnswers(t, c.cert, c.key, c.clusterCA) {
		if time.Since(begin) > timescale.Scale(5*time.Minute) {
			t.Fatal("the migrated shoot's API does not answer through the hub")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("migration: binding → Restore Succeeded on the other seed %v, → API answering through the hub %v",
		restored.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond))
	for name, want := range map[string]string{"kept": "42", "late": "43"} {
		if got := e.ok(t, c.kubeconfig, "-n", "demo", "get", "configmap", name, "-o", "jsonpath={.data.answer}"); got != want {
			t.Fatalf("config map %s after the migration %q, want %s", name, got, want)
		}
	}
	if err := e.seed.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace %s on the source seed: %v, want gone", ns, err)
	}
	sts := &appsv1.StatefulSet{}
	if err := other.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "etcd-main"}, sts); err != nil {
		t.Fatal(err)
	}
	if len(sts.Spec.Template.Spec.InitContainers) != 1 || len(sts.Spec.Template.Spec.Containers) != 2 {
		t.Fatalf("etcd on the other seed has %d init containers and %d containers, want the restore and the sidecar",
			len(sts.Spec.Template.Spec.InitContainers), len(sts.Spec.Template.Spec.Containers))
	}

	// Delete: the control plane, its volume, the BackupEntry and its snapshots go.
	e.patch(t, `{"metadata":{"annotations":{"confirmation.gardener.cloud/deletion":"true"}}}`)
	if code, out := e.hub.Do(t, "DELETE", "/apis/core.gardener.cloud/v1beta1/namespaces/"+namespace+"/shoots/"+shootName, nil); code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("delete shoot: %d %s", code, out)
	}
	e.waitShoot(t, "deleted", 3*time.Minute, func(s *corev1beta1.Shoot) bool { return s == nil })
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := other.Client.List(ctx, pvcs, client.InNamespace(ns)); err != nil || len(pvcs.Items) != 0 {
		t.Fatalf("etcd's volumes after the deletion: %d %v", len(pvcs.Items), err)
	}
	agenttest.Eventually(t, "the BackupEntry and its snapshots gone", func() bool {
		code, body := e.hub.Do(t, "GET", "/apis/core.gardener.cloud/v1beta1/namespaces/"+namespace+"/backupentries", nil)
		var l struct {
			Items []json.RawMessage `json:"items"`
		}
		return code == http.StatusOK && json.Unmarshal(body, &l) == nil && len(l.Items) == 0 && len(snapshots(t, backups)) == 0
	})
}
