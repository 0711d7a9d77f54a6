package localnode_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// needRoot skips on machines where the node cannot run: it needs root (network namespaces, cgroups, mounts).
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestNode runs a seed with a node and checks what a seed needs of one (localnode.Probe: pods run; a pod resolves a
// Service by its DNS name and reaches it through its ClusterIP; logs and exec work through the seed's kube-apiserver
// with kubectl); the host reaches the ClusterIP too; a StatefulSet gets a volume from the default StorageClass. After the stop nothing of
// the node is left on the machine and the host's iptables gained no chain.
func TestNode(t *testing.T) {
	needRoot(t)
	before := kubeChains(t)
	s := seedtest.Start(t, seedtest.WithNode(testLog(t)))
	slot := nodeSlot(t, s)
	t.Logf("node %s started in %v; seed started in %v", s.Node.Name, s.Node.StartDuration.Round(time.Millisecond),
		s.StartDuration.Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := s.Namespace(t)
	c := s.Client

	busybox := imageRef(t, "busybox")
	res, err := localnode.Probe(ctx, localnode.ProbeConfig{Client: c, Kubeconfig: s.KubeconfigPath, Namespace: ns, Testbin: testbin(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("2-replica Deployment available in %v; the client reached the Service at attempt %d", res.Available.Round(time.Millisecond), res.ClientAttempts)
	if !slot.ServiceCIDR.Contains(mustAddr(t, res.ClusterIP)) {
		t.Errorf("Service ClusterIP %s is outside the slot's service network %s", res.ClusterIP, slot.ServiceCIDR)
	}

	// The host reaches the ClusterIP through its route to the node.
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + res.ClusterIP + "/index.html")
	if err != nil {
		t.Fatalf("GET the ClusterIP from the host: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != localnode.ProbePage {
		t.Errorf("ClusterIP from the host: %q, want %q", body, localnode.ProbePage)
	}

	t.Run("StatefulSet volume", func(t *testing.T) { testStatefulSetVolume(ctx, t, c, ns, slot, busybox) })

	if t.Failed() {
		return
	}
	// The shims' sockets and runc's state are in the node's run directory (not in the shared /run/containerd/s and
	// /run/containerd/runc, where killed shims and containers leave them behind), containerd's opt directory in its
	// state directory (not /opt/containerd, which no teardown removes); Stop removes both.
	for _, dir := range []string{slot.ShimSocketDir(), filepath.Join(slot.RunDir(), "runc", "k8s.io"),
		filepath.Join(slot.StateDir(), "containerd-opt")} {
		if entries, err := os.ReadDir(dir); err != nil || len(entries) == 0 {
			t.Errorf("nothing in %s with pods running: %v", dir, err)
		}
	}
	if err := s.Node.Stop(); err != nil {
		t.Fatalf("stop node: %v", err)
	}
	localnode.CheckFreed(t, "node "+slot.Name(), slot.Index)
	if after := kubeChains(t); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("host iptables chains KUBE-* before %v, after %v", before, after)
	}
}

// testStatefulSetVolume checks that a StatefulSet's claim gets a volume of the default StorageClass on the node's disk.
func testStatefulSetVolume(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string, slot *localnode.Slot, busybox string) {
	labels := map[string]string{"app": "db"}
	_, err := c.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "db", Image: busybox, ImagePullPolicy: corev1.PullNever,
					Command:      []string{"sh", "-c", "echo stored > /data/file && exec sleep 3600"},
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
				},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pvc *corev1.PersistentVolumeClaim
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pvc, err = c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-db-0", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod, err := c.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == corev1.ClaimBound && pod.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("claim data-db-0 not bound with pod db-0 running: %v (claim %+v)", err, pvc)
	}
	if sc := ptr.Deref(pvc.Spec.StorageClassName, ""); sc != "standard" {
		t.Errorf("claim got StorageClass %q, want the default, standard", sc)
	}
	pv, err := c.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var dir string
	if pv.Spec.HostPath != nil {
		dir = pv.Spec.HostPath.Path
	} else if pv.Spec.Local != nil {
		dir = pv.Spec.Local.Path
	}
	if !strings.HasPrefix(dir, slot.StateDir()+"/") {
		t.Fatalf("volume %s at %q, want under %s", pv.Name, dir, slot.StateDir())
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		b, err := os.ReadFile(filepath.Join(dir, "file"))
		return err == nil && string(b) == "stored\n", nil
	})
	if err != nil {
		t.Errorf("the pod's write is not in %s on the node's disk", dir)
	}
}

// TestTwoNodes runs two seeds with nodes side by side: each gets its own slot (networks, names), pods run in both,
// and stopping one leaves the other working; after both stops nothing is left.
func TestTwoNodes(t *testing.T) {
	needRoot(t)
	a := seedtest.Start(t, seedtest.WithNode(nil))
	b := seedtest.Start(t, seedtest.WithNode(nil))
	sa, sb := nodeSlot(t, a), nodeSlot(t, b)
	if sa.Index == sb.Index || sa.PodCIDR.Overlaps(sb.PodCIDR) || sa.ServiceCIDR.Overlaps(sb.ServiceCIDR) {
		t.Fatalf("two nodes share networks: %+v and %+v", sa, sb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	busybox := imageRef(t, "busybox")
	runPod := func(s *seedtest.Seed) {
		t.Helper()
		ns := s.Namespace(t)
		_, err := s.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: "p", Image: busybox, ImagePullPolicy: corev1.PullNever,
				Command: []string{"nslookup", "kubernetes.default.svc.cluster.local"},
			}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if phase, err := localnode.WaitPodDone(ctx, s.Client, ns, "p"); err != nil || phase != corev1.PodSucceeded {
			logs, _ := s.Client.CoreV1().Pods(ns).GetLogs("p", &corev1.PodLogOptions{}).DoRaw(ctx)
			t.Fatalf("pod in seed of node %s: %s %v\n%s", s.Node.Name, phase, err, logs)
		}
	}
	runPod(a)
	runPod(b)
	if err := a.Node.Stop(); err != nil {
		t.Fatal(err)
	}
	localnode.CheckFreed(t, "node "+a.Node.Name, sa.Index)
	runPod(b) // the other node is untouched
	if err := b.Node.Stop(); err != nil {
		t.Fatal(err)
	}
	localnode.CheckFreed(t, "node "+b.Node.Name, sb.Index)
}

func nodeSlot(t *testing.T, s *seedtest.Seed) *localnode.Slot {
	t.Helper()
	if s.Node == nil {
		t.Fatal("seed has no node")
	}
	return s.Node.Slot()
}

// testbin returns where seedtest takes the binaries from: $KUBEBUILDER_ASSETS, else bin/testbin of the module root.
func testbin(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv(seedtest.EnvAssets); dir != "" {
		return dir
	}
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", "bin", "testbin")
}

func imageRef(t *testing.T, name string) string {
	t.Helper()
	ref, err := localnode.ImageRef(testbin(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func kubeChains(t *testing.T) []string {
	t.Helper()
	chains, err := localnode.HostKubeChains()
	if err != nil {
		t.Fatal(err)
	}
	return chains
}
