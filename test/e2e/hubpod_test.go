package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trellis-dev/trellis/agent/helmrelease"
	"github.com/trellis-dev/trellis/deploy/charts"
	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// hubPodNamespace and hubPodRelease are where TestHubChartOnNode installs the hub.
const (
	hubPodNamespace = "trellis-system"
	hubPodRelease   = "trellis-hub"
)

// TestHubChartOnNode installs deploy/charts/trellis-hub as an operator would, onto a seed with a real node (its
// embedded etcd on a PersistentVolumeClaim of the node's local-path StorageClass), from an image of the hub built
// here, with a serving certificate from a Secret (tls.existingSecret). kubectl reaches the hub's pod with the
// generated admin token and creates and lists a CloudProfile; after the pod is deleted, the StatefulSet's new pod
// serves the same data with the same token.
func TestHubChartOnNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a seed with a real node")
	}
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	bins := binaries(t, "hub", "github.com/trellis-dev/trellis/cmd/trellis-hub")
	dir := t.TempDir()
	archive, repository, tag, err := landscape.BinaryImage(filepath.Join(bins, "trellis-hub"), dir)
	if err != nil {
		t.Fatal(err)
	}
	logf.SetLogger(logr.Discard()) // envtest logs through controller-runtime's global logger
	seed := seedtest.Start(t, seedtest.WithNode(nil), seedtest.WithNodeImages(archive))
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	core := seed.Client.CoreV1()

	// The serving certificate, for the Service's name; the test dials the pod's IP with that name.
	serverName := hubPodRelease + "." + hubPodNamespace + ".svc"
	chain, key, err := certutil.GenerateSelfSignedCertKey(serverName, nil, []string{serverName})
	if err != nil {
		t.Fatal(err)
	}
	leaf, caPEM := pem.Decode(chain)
	if leaf == nil || len(caPEM) == 0 {
		t.Fatal("no CA in the generated chain")
	}
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: kmetav1.ObjectMeta{Name: hubPodNamespace}},
		kmetav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Secrets(hubPodNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: kmetav1.ObjectMeta{Name: "hub-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain, corev1.TLSPrivateKeyKey: key},
	}, kmetav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	archiveChart, err := charts.Archive(charts.TrellisHub)
	if err != nil {
		t.Fatal(err)
	}
	releases, err := helmrelease.New(helmrelease.Config{REST: seed.Config, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{
		"image":     map[string]any{"repository": repository, "tag": tag, "pullPolicy": "Never"},
		"tls":       map[string]any{"existingSecret": "hub-tls"},
		"etcd":      map[string]any{"embedded": map[string]any{"persistence": map[string]any{"size": "1Gi"}}},
		"logFormat": "text",
		// A machine shared with other tests: small requests.
		"resources": map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "64Mi"}, "limits": map[string]any{"memory": "1Gi"}},
	}
	begin := time.Now()
	if _, _, err := releases.Apply(ctx, archiveChart, hubPodRelease, hubPodNamespace, values); err != nil {
		t.Fatalf("install the hub's chart: %v", err)
	}
	pod := waitHubPod(ctx, t, seed, "")
	t.Logf("the hub's pod %s ready at %s %v after the install", pod.Name, pod.Status.PodIP, time.Since(begin).Round(100*time.Millisecond))

	// Its data is on a volume of the node's StorageClass.
	pvc, err := core.PersistentVolumeClaims(hubPodNamespace).Get(ctx, "data-"+pod.Name, kmetav1.GetOptions{})
	if err != nil || pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("the hub's data volume: %v %v", pvc, err)
	}
	tokenSecret, err := core.Secrets(hubPodNamespace).Get(ctx, hubPodRelease+"-admin-token", kmetav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenSecret.Data["token"]))

	// kubectl against the hub's pod with the admin token.
	kubectl := filepath.Join(testBinDir(t), "node", "kubectl")
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(podIP string, args ...string) string {
		t.Helper()
		base := []string{"--server", "https://" + net.JoinHostPort(podIP, "8443"), "--certificate-authority", caFile,
			"--tls-server-name", serverName, "--token", token, "--kubeconfig", os.DevNull}
		cmd := exec.CommandContext(ctx, kubectl, append(base, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	profile := filepath.Join(dir, "cloudprofile.yaml")
	if err := os.WriteFile(profile, []byte(`apiVersion: core.gardener.cloud/v1beta1
kind: CloudProfile
metadata:
  name: hub-pod
spec:
  type: local
  kubernetes:
    versions:
    - version: 1.31.1
  machineImages:
  - name: local
    versions:
    - version: 1.0.0
  machineTypes:
  - name: local
    cpu: "1"
    gpu: "0"
    memory: 1Gi
  regions:
  - name: local
`), 0o600); err != nil {
		t.Fatal(err)
	}
	run(pod.Status.PodIP, "create", "-f", profile)
	if out := run(pod.Status.PodIP, "get", "cloudprofiles", "-o", "name"); !strings.Contains(out, "cloudprofile.core.gardener.cloud/hub-pod") {
		t.Fatalf("kubectl get cloudprofiles: %s", out)
	}

	// A new pod of the StatefulSet serves the same data, with the same token.
	if err := core.Pods(hubPodNamespace).Delete(ctx, pod.Name, kmetav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	begin = time.Now()
	again := waitHubPod(ctx, t, seed, string(pod.UID))
	t.Logf("the hub's new pod ready at %s %v after the delete", again.Status.PodIP, time.Since(begin).Round(100*time.Millisecond))
	if out := run(again.Status.PodIP, "get", "cloudprofile", "hub-pod", "-o", "jsonpath={.spec.regions[0].name}"); out != "local" {
		t.Fatalf("the cloud profile after the restart: %q", out)
	}

	// The hub answers the health endpoints the probes use, over the certificate of the Secret.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}}}
	code, body, err := binproc.Do(ctx, hc, http.MethodGet, "https://"+net.JoinHostPort(again.Status.PodIP, "8443")+"/readyz", "", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("/readyz: %d %v %s", code, err, body)
	}
}

// waitHubPod waits until the hub's StatefulSet has a Ready pod whose UID is not notUID and returns it.
func waitHubPod(ctx context.Context, t *testing.T, seed *seedtest.Seed, notUID string) *corev1.Pod {
	t.Helper()
	var last string
	for {
		pods, err := seed.Client.CoreV1().Pods(hubPodNamespace).List(ctx, kmetav1.ListOptions{
			LabelSelector: "app.kubernetes.io/instance=" + hubPodRelease})
		if err == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if string(p.UID) != notUID && p.DeletionTimestamp == nil && podIsReady(p) {
					return p
				}
				last = fmt.Sprintf("%s %s %v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
			}
		}
		select {
		case <-ctx.Done():
			var logs string
			if pods != nil {
				for _, p := range pods.Items {
					b, _ := seed.Client.CoreV1().Pods(hubPodNamespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
					logs += fmt.Sprintf("== %s ==\n%s\n", p.Name, b)
				}
			}
			t.Fatalf("the hub's pod is not ready: last %s\n%s", last, logs)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
