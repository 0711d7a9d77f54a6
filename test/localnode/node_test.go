package localnode_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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

// hostKubeChains returns the KUBE-* chains of the host's own iptables (IPv4 and IPv6), which a node must never touch.
func hostKubeChains(t *testing.T) []string {
	t.Helper()
	var chains []string
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(cmd).Output()
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, ":KUBE-") {
				chains = append(chains, cmd+" "+strings.Fields(line)[0])
			}
		}
	}
	return chains
}

const page = "hello from the node\n"

// TestNode runs a seed with a node and checks what a seed needs of one: pods run; a pod resolves a Service by its DNS
// name and reaches it through its ClusterIP; the host reaches the ClusterIP too; logs and exec work through the seed's
// kube-apiserver with kubectl; a StatefulSet gets a volume from the default StorageClass. After the stop nothing of
// the node is left on the machine and the host's iptables gained no chain.
func TestNode(t *testing.T) {
	needRoot(t)
	before := hostKubeChains(t)
	s := seedtest.Start(t, seedtest.WithNode(testLog(t)))
	slot := nodeSlot(t, s)
	t.Logf("node %s started in %v; seed started in %v", s.Node.Name, s.Node.StartDuration.Round(time.Millisecond),
		s.StartDuration.Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := s.Namespace(t)
	c := s.Client

	busybox := imageRef(t, "busybox")
	labels := map[string]string{"app": "web"}
	_, err := c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: busybox, ImagePullPolicy: corev1.PullNever,
					Command: []string{"sh", "-c", "mkdir -p /www && printf '" + strings.TrimSpace(page) +
						"\\n' > /www/index.html && echo serving && exec httpd -f -p 8080 -h /www"},
					Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
				}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slot.ServiceCIDR.Contains(mustAddr(t, svc.Spec.ClusterIP)) {
		t.Errorf("Service ClusterIP %s is outside the slot's service network %s", svc.Spec.ClusterIP, slot.ServiceCIDR)
	}
	begin := time.Now()
	waitDeployment(ctx, t, c, ns, "web")
	t.Logf("2-replica Deployment available in %v", time.Since(begin).Round(time.Millisecond))

	// A pod resolves the Service by name (CoreDNS) and fetches the page through the ClusterIP (kube-proxy).
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "client", Image: busybox, ImagePullPolicy: corev1.PullNever,
			Command: []string{"sh", "-c", "nslookup web." + ns + ".svc.cluster.local && wget -q -O - http://web." + ns + "/index.html"},
		}}},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	phase := waitPodDone(ctx, t, c, ns, "client")
	logs, err := c.CoreV1().Pods(ns).GetLogs("client", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of pod client through the apiserver: %v", err)
	}
	if phase != corev1.PodSucceeded || !strings.Contains(string(logs), svc.Spec.ClusterIP) || !strings.Contains(string(logs), page) {
		t.Fatalf("pod client %s; its logs do not show the Service's ClusterIP %s and the page:\n%s", phase, svc.Spec.ClusterIP, logs)
	}

	// The host reaches the ClusterIP through its route to the node.
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + svc.Spec.ClusterIP + "/index.html")
	if err != nil {
		t.Fatalf("GET the ClusterIP from the host: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != page {
		t.Errorf("ClusterIP from the host: %q, want %q", body, page)
	}

	// kubectl logs and exec through the seed's kube-apiserver (and kubelet behind it).
	kubectl := filepath.Join(testbin(t), "node", "kubectl")
	out := run(t, kubectl, "--kubeconfig", s.KubeconfigPath, "-n", ns, "logs", "deployment/web")
	if !strings.Contains(out, "serving") {
		t.Errorf("kubectl logs: %q, want the container's output", out)
	}
	out = run(t, kubectl, "--kubeconfig", s.KubeconfigPath, "-n", ns, "exec", "deployment/web", "--", "cat", "/www/index.html")
	if out != page {
		t.Errorf("kubectl exec: %q, want %q", out, page)
	}
	var stdin bytes.Buffer
	stdin.WriteString("echo interactive $((6*7))\nexit\n")
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", s.KubeconfigPath, "-n", ns, "exec", "-i", "deployment/web", "--", "sh")
	cmd.Stdin = &stdin
	if b, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(b)) != "interactive 42" {
		t.Errorf("kubectl exec -i: %v: %q", err, b)
	}

	t.Run("StatefulSet volume", func(t *testing.T) { testStatefulSetVolume(ctx, t, c, ns, slot, busybox) })

	if t.Failed() {
		return
	}
	if err := s.Node.Stop(); err != nil {
		t.Fatalf("stop node: %v", err)
	}
	if left := slot.Leftovers(); len(left) > 0 {
		t.Errorf("left on the machine after the stop: %v", left)
	}
	if after := hostKubeChains(t); strings.Join(after, ",") != strings.Join(before, ",") {
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
		if phase := waitPodDone(ctx, t, s.Client, ns, "p"); phase != corev1.PodSucceeded {
			logs, _ := s.Client.CoreV1().Pods(ns).GetLogs("p", &corev1.PodLogOptions{}).DoRaw(ctx)
			t.Fatalf("pod in seed of node %s: %s\n%s", s.Node.Name, phase, logs)
		}
	}
	runPod(a)
	runPod(b)
	if err := a.Node.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := sa.Leftovers(); len(left) > 0 {
		t.Errorf("node %s left %v", a.Node.Name, left)
	}
	runPod(b) // the other node is untouched
	if err := b.Node.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := sb.Leftovers(); len(left) > 0 {
		t.Errorf("node %s left %v", b.Node.Name, left)
	}
}

func nodeSlot(t *testing.T, s *seedtest.Seed) *localnode.Slot {
	t.Helper()
	if s.Node == nil {
		t.Fatal("seed has no node")
	}
	return s.Node.Slot()
}

func waitDeployment(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && localnode.DeploymentAvailable(d), nil
	})
	if err != nil {
		t.Fatalf("deployment %s/%s not available: %v", ns, name, err)
	}
}

func waitPodDone(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string) corev1.PodPhase {
	t.Helper()
	var phase corev1.PodPhase
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not done (%s): %v", ns, name, phase, err)
	}
	return phase
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, stderr)
	}
	return string(out)
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
