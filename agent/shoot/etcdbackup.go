package shoot

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/shoot/credentials"
	"github.com/trellis-dev/trellis/agent/shoot/imagevector"
)

// etcd's backups, as Gardener's etcd-backup-restore takes them: a sidecar beside etcd takes full snapshots into the
// shoot's BackupEntry (the bucket directory its extension made), and an init container restores the newest one into
// an empty data directory before etcd starts.
const (
	// secretETCDBackup is the secret the BackupEntry's extension writes into the shoot's namespace (Gardener's
	// etcd-backup): bucketName, and for the local provider hostPath, the bucket root on the seed's nodes.
	secretETCDBackup = "etcd-backup"
	// portBackupRestore is the sidecar's HTTP port (Gardener's backup-restore port).
	portBackupRestore = 8080
	// etcdDataDir is etcd's --data-dir on its volume.
	etcdDataDir = "/var/etcd/data/new.etcd"
	// etcdBackupMount is where the bucket directory is mounted in the etcd pod.
	etcdBackupMount = "/var/etcd/backup"
	// defaultETCDSnapshotInterval is the time between scheduled full snapshots.
	defaultETCDSnapshotInterval = time.Hour
	// etcdSnapshotsKept is how many full snapshots the sidecar keeps.
	etcdSnapshotsKept = 7
)

// Task names of etcd's backups in the migrate flow, as Gardener's.
const (
	taskScaleDownKAPI = "Scaling Kubernetes API server replicas down to 0"
	taskSnapshotETCD  = "Creating ETCD snapshot"
	taskMigrateETCD   = "Destroying main and events etcd of the source seed"
)

// etcdBackupStore is where etcd's snapshots go on the seed's nodes.
type etcdBackupStore struct {
	// bucketDir is the bucket's directory on the node (hostPath + bucketName).
	bucketDir string
	// entry is the shoot's BackupEntry directory in the bucket.
	entry string
}

// etcdBackup returns the store of the shoot's etcd snapshots: nil when the seed has no backup, or a backup the
// sidecar cannot write to (only the local provider's bucket directories are supported; the shoot runs without
// snapshots, as the log says); an error while the BackupEntry's extension has not written etcd-backup yet.
func (op *operation) etcdBackup(ctx context.Context) (*etcdBackupStore, error) {
	if op.seed.GetSpec().GetBackup() == nil {
		return nil, nil
	}
	sec := &corev1.Secret{}
	if err := op.c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: secretETCDBackup}, sec); err != nil {
		return nil, fmt.Errorf("the backup entry's secret %s/%s (written by the backup extension): %w", op.ns, secretETCDBackup, err)
	}
	return etcdBackupStoreOf(sec.Data, op.backupEntryName(), func(msg string) { op.log.Warn(msg, "namespace", op.ns) })
}

// etcdBackupStoreOf reads an etcd-backup secret's data: bucketName and hostPath must be an absolute path and a
// single directory name, so that the volume stays inside the bucket root; a secret without hostPath is another
// provider's (warn is told, nil returned).
func etcdBackupStoreOf(data map[string][]byte, entry string, warn func(string)) (*etcdBackupStore, error) {
	root, bucket := string(data["hostPath"]), string(data["bucketName"])
	if root == "" {
		warn("the seed's backup provider gives no hostPath in " + secretETCDBackup + ": etcd runs without snapshots (only the local provider's buckets are supported)")
		return nil, nil
	}
	if !path.IsAbs(root) || path.Clean(root) != root {
		return nil, fmt.Errorf("secret %s: hostPath %q is not a clean absolute path", secretETCDBackup, root)
	}
	if bucket == "" || bucket == "." || bucket == ".." || strings.ContainsAny(bucket, "/\x00") {
		return nil, fmt.Errorf("secret %s: bucketName %q is not a single directory name", secretETCDBackup, bucket)
	}
	return &etcdBackupStore{bucketDir: path.Join(root, bucket), entry: entry}, nil
}

// addToPod adds the restore init container, the backup sidecar and the bucket's volume to etcd's pod. The init
// container runs as root: it hands the restored data and the entry directory to the user etcd and the sidecar run
// as (the bucket directory is made by the extension, as root).
func (b *etcdBackupStore) addToPod(spec *corev1.PodSpec, img string, interval time.Duration) {
	store := etcdBackupMount + "/" + b.entry
	mounts := []corev1.VolumeMount{{Name: etcdMain, MountPath: "/var/etcd/data"}, {Name: "backup", MountPath: etcdBackupMount}}
	spec.InitContainers = []corev1.Container{{
		Name: "restore", Image: img, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"/usr/local/bin/etcd-backup-restore", "restore", "--data-dir=" + etcdDataDir, "--store=" + store,
			"--name=" + etcdMain + "-0", "--peer-url=http://127.0.0.1:2380",
			fmt.Sprintf("--owner=%d:%d", nonRootUser, nonRootUser)},
		VolumeMounts:    mounts,
		SecurityContext: &corev1.SecurityContext{RunAsUser: ptr(int64(0)), RunAsGroup: ptr(int64(0)), RunAsNonRoot: ptr(false)},
	}}
	spec.Containers = append(spec.Containers, corev1.Container{
		Name: "backup-restore", Image: img, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"/usr/local/bin/etcd-backup-restore", "server", "--store=" + store,
			fmt.Sprintf("--endpoints=https://127.0.0.1:%d", portETCDClient),
			"--cacert=/var/etcd/ssl/ca/" + credentials.DataKeyCertificateBundle,
			"--cert=/var/etcd/ssl/server/" + credentials.DataKeyCertificate,
			"--key=/var/etcd/ssl/server/" + credentials.DataKeyPrivateKey,
			"--interval=" + interval.String(), "--keep=" + strconv.Itoa(etcdSnapshotsKept),
			fmt.Sprintf("--listen=:%d", portBackupRestore)},
		Ports: []corev1.ContainerPort{{Name: "backuprestore", ContainerPort: portBackupRestore}},
		VolumeMounts: []corev1.VolumeMount{{Name: "backup", MountPath: etcdBackupMount},
			{Name: "ca", MountPath: "/var/etcd/ssl/ca"}, {Name: "server-tls", MountPath: "/var/etcd/ssl/server"}},
		SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false)},
	})
	// DirectoryOrCreate: a provider-local that runs as a pod may keep its buckets in a volume of its own (the chart's
	// default emptyDir), where the node has no such directory; etcd's snapshots then stay on the node.
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "backup", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
		Path: b.bucketDir, Type: ptr(corev1.HostPathDirectoryOrCreate)}}})
}

// etcdBackupImage is the image of the backup sidecar and restore step.
func (op *operation) etcdBackupImage() (string, error) {
	return op.image(imagevector.ETCDBackupRestore)
}

// scaleDownKubeAPIServer scales kube-controller-manager, kube-scheduler and kube-apiserver to zero, so that etcd's
// final snapshot holds every write.
func (op *operation) scaleDownKubeAPIServer(ctx context.Context) error {
	return op.scaleDown(ctx, op.controlPlaneWorkloads()[:3])
}

// snapshotETCD asks etcd's backup sidecar for a full snapshot (POST /snapshot/full at the etcd client Service), as
// Gardener's migration does before etcd goes: the destination restores from it. An etcd without the sidecar (a seed
// without backups) or scaled to zero (a hibernated shoot: its data is in its last snapshot) is skipped.
func (op *operation) snapshotETCD(ctx context.Context) error {
	sts := &appsv1.StatefulSet{}
	if err := op.c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: etcdMain}, sts); err != nil {
		if isNotFound(err) {
			return nil
		}
		return err
	}
	if ptrValue(sts.Spec.Replicas, 1) == 0 || !hasContainer(sts.Spec.Template.Spec.Containers, "backup-restore") {
		op.log.Warn("etcd has no backup sidecar running: no final snapshot before the migration", "namespace", op.ns)
		return nil
	}
	svc := &corev1.Service{}
	if err := op.c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: serviceETCDClient}, svc); err != nil {
		return fmt.Errorf("read the etcd client service: %w", err)
	}
	tr := &http.Transport{}
	if op.c.cfg.DialService != nil {
		tr.DialContext = op.c.cfg.DialService
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: op.timeout()}
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(portBackupRestore)) + "/snapshot/full"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return err
	}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("etcd snapshot: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd snapshot: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	op.log.Info("etcd snapshot taken before the migration", "namespace", op.ns, "duration", time.Since(start).Round(time.Millisecond),
		"result", strings.TrimSpace(string(body)))
	return nil
}

// hasContainer reports whether cs has a container of that name.
func hasContainer(cs []corev1.Container, name string) bool {
	for _, c := range cs {
		if c.Name == name {
			return true
		}
	}
	return false
}
