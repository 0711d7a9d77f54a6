package shootcontrolplane_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/trellis-dev/trellis/agent/shoot/credentials"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/provider/local"
	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/auth"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/localmachine"
	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/seedtest"
	"github.com/trellis-dev/trellis/test/timescale"
)

func TestMain(m *testing.M) { agenttest.Main(m) }

const (
	project   = "dev"
	namespace = "garden-dev"
	shootName = "cp"
)

func testbin(t *testing.T) string {
	t.Helper()
	dir, err := seedtest.TestbinDir()
	if err != nil {
		t.Skip(err)
	}
	return dir
}

// env is a hub with its passthrough listener, a seed with a node, and the seed's agent running shoot control planes.
type env struct {
	// machines is the local machine provider of startWith(t, true); seedNode the slot of the seed's node it makes
	// machines beside.
	machines *localmachine.Server
	seedNode *localnode.Slot
	hub      *agenttest.Hub
	// seed is the first seed.
	seed    *agenttest.Seed
	dir     string
	kubectl string
	// bin is bin/testbin; vectorFile the agents' image vector of the control plane images built there.
	bin, vectorFile string
	// trellisctl is bin/trellisctl, built for the test: users' way to shoot kubeconfigs.
	trellisctl string
	// skew shifts the hub's clock (a time.Duration), so that the hub can issue a kubeconfig that has expired.
	skew atomic.Int64
}

func start(t *testing.T) *env { return startWith(t, false) }

// startWith starts the env; with machines, provider-local (extsdk/provider/local) serves every extension kind and
// makes its Workers' machines through a local machine provider (test/localmachine) on the seed's node.
func startWith(t *testing.T, machines bool) *env {
	t.Helper()
	e := startHub(t)
	e.seed = e.addSeedWith(t, "local", agenttest.SeedSpec, "", machines)
	return e
}

// startHub takes the test's turn among the machine's node tests (localnode.TakeTurn), starts the hub with its
// passthrough listener and stores the project and the cloud profile; seeds come with addSeed.
func startHub(t *testing.T) *env {
	t.Helper()
	localnode.TakeTurn(t)
	bin := testbin(t)
	e := &env{dir: t.TempDir(), bin: bin, kubectl: filepath.Join(bin, "node", "kubectl")}
	vector, err := localnode.ControlPlaneImageVector(bin)
	if err != nil {
		t.Skipf("no control plane images: %v", err)
	}
	e.vectorFile = filepath.Join(e.dir, "images.yaml")
	if err := os.WriteFile(e.vectorFile, vector, 0o600); err != nil {
		t.Fatal(err)
	}
	// A domain of its own: the agent learns it from the hub's Welcome and puts it into the serving certificate.
	bins := filepath.Join(e.dir, "bin")
	if err := binproc.Build(context.Background(), bins, "github.com/trellis-dev/trellis/cmd/trellisctl"); err != nil {
		t.Fatal(err)
	}
	e.trellisctl = filepath.Join(bins, "trellisctl")
	e.hub = agenttest.StartHub(t, func(c *hub.Config) {
		c.TunnelListen, c.TunnelDomain = "127.0.0.1:0", tunnelDomain
		c.Now = func() time.Time { return time.Now().Add(time.Duration(e.skew.Load())) }
	})
	cp := agentsim.CloudProfile("local")
	cp.Spec.Kubernetes = &corev1beta1.KubernetesSettings{Versions: []*corev1beta1.ExpirableVersion{{Version: "1.31.1"}}}
	cp.Spec.Regions = []*corev1beta1.Region{{Name: "local"}}
	cp.Spec.MachineImages = []*corev1beta1.MachineImage{{Name: "local", Versions: []*corev1beta1.MachineImageVersion{{
		Version: "1.0.0", Cri: []*corev1beta1.CRI{{Name: "containerd"}}, Architectures: []string{"amd64"}}}}}
	cp.Spec.MachineTypes = []*corev1beta1.MachineType{{Name: "local", Cpu: "1", Gpu: "0", Memory: "1Gi"}}
	e.hub.Store(t,
		&kcorev1.Namespace{ApiVersion: "v1", Kind: "Namespace", Metadata: &metav1.ObjectMeta{Name: namespace}},
		&corev1beta1.Project{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Project", Metadata: &metav1.ObjectMeta{Name: project},
			Spec: &corev1beta1.ProjectSpec{Namespace: proto.String(namespace)}},
		cp)
	return e
}

// addSeed starts a seed with a node and its agent running shoot control planes (seed spec as agenttest.SeedSpec),
// with stand-ins of the Infrastructure and ControlPlane extensions; with backupDir, provider-local's BackupBucket and
// BackupEntry controllers keep the seed's buckets there.
func (e *env) addSeed(t *testing.T, name, spec, backupDir string) *agenttest.Seed {
	t.Helper()
	return e.addSeedWith(t, name, spec, backupDir, false)
}

// addSeedWith is addSeed; with machines, provider-local serves every extension kind instead of the stand-ins and
// makes the Workers' machines through a local machine provider on the seed's node (startMachines).
func (e *env) addSeedWith(t *testing.T, name, spec, backupDir string, machines bool) *agenttest.Seed {
	t.Helper()
	cluster := seedtest.Start(t, seedtest.WithNode(nil), seedtest.WithNodeImages(localnode.ControlPlaneArchives(e.bin)...))
	seed := e.hub.StartSeed(t, name, spec, cluster)
	seed.Agent.Stop()
	cfg := seed.AgentConfig
	cfg.Controllers.Disabled = false
	d := func(v time.Duration) *kmetav1.Duration { return &kmetav1.Duration{Duration: v} }
	cfg.Controllers.Shoot.RetryMinDelay = d(200 * time.Millisecond)
	cfg.Controllers.Shoot.RetryMaxDelay = d(2 * time.Second)
	cfg.Controllers.Shoot.TaskTimeout = d(timescale.Scale(2 * time.Minute))
	cfg.Controllers.Shoot.ControlPlane.ImageVector = e.vectorFile
	cfg.Controllers.ShootCare.SyncPeriod = d(2 * time.Second)
	agenttest.StartAgent(t, cfg)
	if machines {
		e.startMachines(t, cluster, e.bin)
		return seed
	}
	exts := []func(manager.Manager) error{
		agenttest.Stub(func() *extensionsv1alpha1.Infrastructure { return &extensionsv1alpha1.Infrastructure{} }, func(o *extensionsv1alpha1.Infrastructure) {
			o.Status.ProviderStatus = &runtime.RawExtension{Raw: []byte(`{"apiVersion":"local.provider.extensions.gardener.cloud/v1alpha1","kind":"InfrastructureStatus"}`)}
		}),
		agenttest.Stub(func() *extensionsv1alpha1.ControlPlane { return &extensionsv1alpha1.ControlPlane{} }, nil),
	}
	if backupDir != "" {
		exts = append(exts, func(m manager.Manager) error { return local.AddBackup(m, local.Config{BackupDir: backupDir}) })
	}
	agenttest.StartExtensions(t, cluster.Config, exts...)
	return seed
}

func (e *env) shoot(t *testing.T) *corev1beta1.Shoot {
	t.Helper()
	o, err := e.hub.Collection(t, "core.gardener.cloud", "shoots").Get(context.Background(), namespace, shootName)
	if err != nil {
		return nil
	}
	return o.(*corev1beta1.Shoot)
}

// patch merge-patches the shoot through the hub's API.
func (e *env) patch(t *testing.T, patch string) {
	t.Helper()
	code, out := e.hub.Do(t, "PATCH", "/apis/core.gardener.cloud/v1beta1/namespaces/"+namespace+"/shoots/"+shootName, patch,
		"Content-Type", "application/merge-patch+json")
	if code != http.StatusOK {
		t.Fatalf("patch shoot %s: %d %s", patch, code, out)
	}
}

// waitShoot waits until cond holds for the shoot, failing with its last operation after timeout.
func (e *env) waitShoot(t *testing.T, what string, timeout time.Duration, cond func(*corev1beta1.Shoot) bool) {
	t.Helper()
	timeout = timescale.Scale(timeout)
	begin := time.Now()
	deadline := begin.Add(timeout)
	for {
		s := e.shoot(t)
		if cond(s) {
			t.Logf("%s after %v", what, time.Since(begin).Round(100*time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			lo := s.GetStatus().GetLastOperation()
			t.Fatalf("%s: not after %v; last operation %s %s %d%% (%s), errors %v", what, timeout, lo.GetType(), lo.GetState(),
				lo.GetProgress(), lo.GetDescription(), s.GetStatus().GetLastErrors())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func succeeded(s *corev1beta1.Shoot) bool {
	return s.GetStatus().GetLastOperation().GetState() == "Succeeded" &&
		s.GetStatus().GetObservedGeneration() == s.GetMetadata().GetGeneration()
}

// clientCA reads the shoot's published client CA (InternalSecret <shoot>.ca-client) and cluster CA bundle
// (ConfigMap <shoot>.ca-cluster); ok is false while either is missing.
func (e *env) clientCA(t *testing.T) (caCert, caKey, clusterCA []byte, ok bool) {
	t.Helper()
	ctx := context.Background()
	is, err := e.hub.Collection(t, "core.gardener.cloud", "internalsecrets").Get(ctx, namespace, shootName+".ca-client")
	if err != nil {
		return nil, nil, nil, false
	}
	cm, err := e.hub.Collection(t, "", "configmaps").Get(ctx, namespace, shootName+".ca-cluster")
	if err != nil {
		return nil, nil, nil, false
	}
	data := is.(*corev1beta1.InternalSecret).GetData()
	return data["ca.crt"], data["ca.key"], []byte(cm.(*kcorev1.ConfigMap).GetData()["ca.crt"]), true
}

// clientCert issues a client certificate for user in groups, signed by the client CA.
func clientCert(t *testing.T, caCert, caKey []byte, user string, groups ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	cb, _ := pem.Decode(caCert)
	kb, _ := pem.Decode(caKey)
	if cb == nil || kb == nil {
		t.Fatal("the client CA is not PEM")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: user, Organization: groups},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// tunnelDomain is the hub's domain of shoot API names.
const tunnelDomain = "shoots.test.example"

// serverName is the shoot's name on the hub's passthrough listener.
func serverName() string { return fmt.Sprintf("api.%s.%s.%s", shootName, project, tunnelDomain) }

// apiAnswers reports whether the shoot's kube-apiserver answers /readyz through the hub's listener for user.
func (e *env) apiAnswers(t *testing.T, cert, key, clusterCA []byte) bool {
	t.Helper()
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(clusterCA)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: serverName(), Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("https://" + e.hub.TunnelAddr() + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// kubeconfig writes a kubeconfig for the shoot through the hub's listener with a client certificate.
func (e *env) kubeconfig(t *testing.T, name string, cert, key, clusterCA []byte) string {
	t.Helper()
	files := map[string][]byte{name + ".crt": cert, name + ".key": key, "ca.crt": clusterCA}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(e.dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: shoot
  cluster:
    server: https://%s
    tls-server-name: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: shoot
  context: {cluster: shoot, user: %s}
current-context: shoot
`, e.hub.TunnelAddr(), serverName(), filepath.Join(e.dir, "ca.crt"), name, filepath.Join(e.dir, name+".crt"),
		filepath.Join(e.dir, name+".key"), name)
	p := filepath.Join(e.dir, name+".kubeconfig")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// shootKubeconfig has bin/trellisctl write the shoot's kubeconfig (trellisctl shoot kubeconfig, with flags such as
// --viewer) to <dir>/<name>.kubeconfig as the hub's admin, and returns its path.
func (e *env) shootKubeconfig(name string, flags ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(time.Minute))
	defer cancel()
	path := filepath.Join(e.dir, name+".kubeconfig")
	cmd := exec.CommandContext(ctx, e.trellisctl, append([]string{"shoot", "kubeconfig", shootName, "-p", project, "--file", path}, flags...)...)
	cmd.Env = []string{"TRELLIS_HUB=" + e.hub.URL, "TRELLIS_CA=" + filepath.Join(e.hub.DataDir, "pki", "ca.crt"), "TRELLIS_TOKEN=" + e.hub.Token,
		"HOME=" + e.dir, "TRELLISCONFIG=" + filepath.Join(e.dir, "trellisconfig")}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("trellisctl shoot kubeconfig %s: %w\n%s", strings.Join(flags, " "), err, out)
	}
	return path, nil
}

// issue is shootKubeconfig, failing the test on an error.
func (e *env) issue(t *testing.T, name string, flags ...string) string {
	t.Helper()
	path, err := e.shootKubeconfig(name, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// credentials reads the client certificate, key and cluster CA bundle of an issued kubeconfig, checking that its
// server is the hub's tunnel listener (kubectl is given no other address) under the shoot's tunnel name.
func (e *env) credentials(t *testing.T, path string) (cert, key, clusterCA []byte) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kc := cfg.Contexts[cfg.CurrentContext]
	if kc == nil || cfg.Clusters[kc.Cluster] == nil || cfg.AuthInfos[kc.AuthInfo] == nil {
		t.Fatalf("%s: no cluster or user for the current context %q", path, cfg.CurrentContext)
	}
	c, u := cfg.Clusters[kc.Cluster], cfg.AuthInfos[kc.AuthInfo]
	if c.Server != "https://"+e.hub.TunnelAddr() || c.TLSServerName != serverName() {
		t.Fatalf("%s: server %s (%s), want the hub's tunnel listener https://%s (%s)", path, c.Server, c.TLSServerName, e.hub.TunnelAddr(), serverName())
	}
	return u.ClientCertificateData, u.ClientKeyData, c.CertificateAuthorityData
}

// configMap writes a manifest of the config map name in the namespace demo with data answer.
func (e *env) configMap(t *testing.T, name, answer string) string {
	t.Helper()
	p := filepath.Join(e.dir, name+"-"+answer+".yaml")
	m := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: demo}\ndata: {answer: %q}\n", name, answer)
	if err := os.WriteFile(p, []byte(m), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// watchAndApply runs kubectl get configmaps -w in the namespace demo while kubectl apply (client-side, then
// server-side) creates and changes config maps, and waits until the watch has seen every change; while the watch is
// open, the hub counts a tunnel to the shoot's API.
func (e *env) watchAndApply(t *testing.T, kubeconfig string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(2*time.Minute))
	defer cancel()
	watch := exec.CommandContext(ctx, e.kubectl, "--kubeconfig", kubeconfig, "-n", "demo", "get", "configmaps", "-w",
		"-o", `jsonpath={.metadata.name}={.data.answer}{"\n"}`)
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() { // ends with the watch's output, when the watch is killed below
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	defer func() {
		cancel()
		for range lines { // until the reader ends
		}
		_ = watch.Wait()
	}()
	seen := func(want string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the watch ended before it saw %s", want)
				}
				if l == want {
					return
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("the watch did not see %s in 30s", want)
			}
		}
	}
	seen("kept=42")
	if open := e.shootTunnels(t); open < 1 {
		t.Fatalf("the hub counts %v open shoot tunnels while kubectl watches", open)
	}
	e.ok(t, kubeconfig, "apply", "-f", e.configMap(t, "applied", "1"))
	seen("applied=1")
	e.ok(t, kubeconfig, "apply", "-f", e.configMap(t, "applied", "2"))
	seen("applied=2")
	e.ok(t, kubeconfig, "apply", "--server-side", "-f", e.configMap(t, "ssa", "3"))
	seen("ssa=3")
	e.ok(t, kubeconfig, "apply", "--server-side", "-f", e.configMap(t, "ssa", "4"))
	seen("ssa=4")
	if got := e.ok(t, kubeconfig, "-n", "demo", "get", "configmap", "ssa", "-o", "jsonpath={.metadata.managedFields[0].manager}/{.metadata.managedFields[0].operation}"); got != "kubectl/Apply" {
		t.Fatalf("the server-side applied config map's field manager is %s, want kubectl/Apply", got)
	}
}

// shootTunnels is the hub's gauge of open tunnels to shoots' API servers (trellis_tunnel_open{kind="shoot-api"}).
func (e *env) shootTunnels(t *testing.T) float64 {
	t.Helper()
	code, body := e.hub.Do(t, "GET", "/metrics", nil)
	if code != http.StatusOK {
		t.Fatalf("metrics: %d", code)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, `trellis_tunnel_open{kind="shoot-api"} `); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}

func (e *env) run(kubeconfig string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(time.Minute))
	defer cancel()
	out, err := exec.CommandContext(ctx, e.kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (e *env) ok(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := e.run(kubeconfig, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// condition returns the status and message of a shoot condition.
func condition(s *corev1beta1.Shoot, typ string) (string, string) {
	for _, c := range s.GetStatus().GetConditions() {
		if c.GetType() == typ {
			return c.GetStatus(), c.GetMessage()
		}
	}
	return "", ""
}

// startupGuarded checks that every container of the control plane's pods that has a liveness probe starts under a
// startup probe of the same check with at least four minutes' budget, so that a kube-apiserver or etcd slow to start
// on a loaded seed is not killed before it is up (a restart loop seen on a slow machine), and that its readiness and
// liveness probes allow a loaded seed's slow answers (at least 10 s each, half a minute of failures before they act:
// 1 s answers and 3 s of failures took etcd and then the shoot's API out of service for minutes); it logs the
// restarts.
func (e *env) startupGuarded(t *testing.T, ns string) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := e.seed.Client.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	restarts, guarded := map[string]int32{}, 0
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if c.LivenessProbe == nil {
				continue
			}
			sp := c.StartupProbe
			if sp == nil || !reflect.DeepEqual(sp.ProbeHandler, c.LivenessProbe.ProbeHandler) {
				t.Errorf("pod %s container %s: liveness probe %+v without a startup probe of the same check (%+v)", p.Name, c.Name, c.LivenessProbe.ProbeHandler, sp)
				continue
			}
			if budget := time.Duration(sp.InitialDelaySeconds+sp.PeriodSeconds*sp.FailureThreshold) * time.Second; budget < 4*time.Minute {
				t.Errorf("pod %s container %s: the startup probe allows %v, want at least 4m", p.Name, c.Name, budget)
			}
			for kind, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				if pr == nil {
					continue
				}
				if acts := time.Duration(pr.PeriodSeconds*pr.FailureThreshold) * time.Second; pr.TimeoutSeconds < 10 || acts < 30*time.Second {
					t.Errorf("pod %s container %s: %s probe allows %d s an answer and acts after %v of failures, want at least 10 s and 30s",
						p.Name, c.Name, kind, pr.TimeoutSeconds, acts)
				}
			}
			guarded++
		}
		for _, cs := range p.Status.ContainerStatuses {
			restarts[p.Name+"/"+cs.Name] = cs.RestartCount
		}
	}
	if guarded < 4 { // etcd-main, etcd-events, kube-apiserver, kube-controller-manager
		t.Errorf("%d containers of the control plane have startup and liveness probes, want at least 4", guarded)
	}
	t.Logf("control plane containers' restarts: %v", restarts)
}

// controlPlaneMemory sums the resident memory (cgroup v1 memory.stat total_rss) of the pods of the shoot's namespace.
func (e *env) controlPlaneMemory(t *testing.T, ns string) (total int64, per map[string]int64) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := e.seed.Client.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	per = map[string]int64{}
	for _, p := range pods.Items {
		dir := podCgroup(string(p.UID))
		if dir == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "total_rss "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				per[p.Labels["role"]+"/"+p.Name] = n
				total += n
			}
		}
	}
	return total, per
}

// podCgroup finds the memory cgroup of a pod (kubelet's cgroupfs driver: .../kubepods/<class>/pod<uid>).
func podCgroup(uid string) string {
	var found string
	_ = filepath.WalkDir("/sys/fs/cgroup/memory", func(p string, d os.DirEntry, err error) error {
		if err != nil || found != "" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			return nil
		}
		if d.Name() == "pod"+uid {
			found = p
			return filepath.SkipAll
		}
		if strings.Count(p, "/") > 9 {
			return filepath.SkipDir
		}
		return nil
	})
	return found
}

// created is a shoot created by createShoot: its admin kubeconfig, the credentials in it, and the client CA.
type created struct {
	kubeconfig                   string
	caCert, clusterCA, cert, key []byte
	begin                        time.Time
}

// createShoot creates the workerless shoot on seed, waits until its API answers through the hub with a kubeconfig
// from trellisctl and its create Succeeded, and logs both durations.
func (e *env) createShoot(t *testing.T, seed string) created {
	t.Helper()
	s := agentsim.Shoot(namespace, shootName, seed, "", "local")
	s.Spec.SecretBindingName = nil
	s.Spec.Kubernetes = &corev1beta1.Kubernetes{Version: "1.31.1"}
	body, err := kjson.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	c := created{begin: time.Now()}
	if code, out := e.hub.Do(t, "POST", "/apis/core.gardener.cloud/v1beta1/namespaces/"+namespace+"/shoots", body); code != http.StatusCreated {
		t.Fatalf("create shoot: %d %s", code, out)
	}
	// The user's way in: trellisctl shoot kubeconfig, once the agent has published the shoot's client CA.
	var answered time.Duration
	limit := timescale.Scale(3 * time.Minute)
	deadline := time.Now().Add(limit)
	for answered == 0 {
		if c.kubeconfig == "" {
			if ca, _, _, ok := e.clientCA(t); ok {
				if p, err := e.shootKubeconfig("admin"); err == nil {
					c.caCert, c.kubeconfig = ca, p
					c.cert, c.key, c.clusterCA = e.credentials(t, p)
				}
			}
		}
		if c.kubeconfig != "" && e.apiAnswers(t, c.cert, c.key, c.clusterCA) {
			answered = time.Since(c.begin)
			break
		}
		if time.Now().After(deadline) {
			lo := e.shoot(t).GetStatus().GetLastOperation()
			t.Fatalf("the shoot's API does not answer after %v; last operation %s %d%% (%s)", limit, lo.GetState(), lo.GetProgress(), lo.GetDescription())
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.waitShoot(t, "create Succeeded", 3*time.Minute, succeeded)
	t.Logf("create → API answering through the hub: %v; create → Succeeded: %v", answered.Round(100*time.Millisecond),
		time.Since(c.begin).Round(100*time.Millisecond))
	return c
}

// TestWorkerlessShootControlPlane: a workerless shoot on a seed with a node gets a real control plane; kubectl, with
// kubeconfigs from bin/trellisctl shoot kubeconfig (given only the hub's TLS-passthrough listener as the server),
// reaches it through the hub and the seed's agent, lists, watches (get -w sees the changes) and applies (client- and
// server-side); a --viewer kubeconfig reads but cannot write; an expired one is refused. A CA rotation keeps
// kubeconfigs issued before and after its start working while prepared and refuses the one issued before once
// completed. Hibernation takes the API away (APIServerAvailable
// False) and keeps etcd's volume; waking up brings the objects back; deletion removes the control plane and its
// volume. It logs the durations and the control plane's memory that docs/shoots.md reports.
func TestWorkerlessShootControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a seed with a real node and a shoot control plane")
	}
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	e := start(t)
	c := e.createShoot(t, "local")
	caCert, clusterCA, admin := c.caCert, c.clusterCA, c.kubeconfig
	ns := e.shoot(t).GetStatus().GetTechnicalId()

	e.ok(t, admin, "create", "namespace", "demo")
	e.ok(t, admin, "-n", "demo", "create", "configmap", "kept", "--from-literal=answer=42")
	if got := e.ok(t, admin, "-n", "demo", "get", "configmap", "kept", "-o", "jsonpath={.data.answer}"); got != "42" {
		t.Fatalf("config map read back %q, want 42", got)
	}
	if who := e.ok(t, admin, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); who != auth.AdminUser {
		t.Fatalf("the shoot sees %q, want the hub user %s", who, auth.AdminUser)
	}
	if got := e.ok(t, admin, "get", "namespaces", "-o", "name"); !strings.Contains(got, "namespace/demo") || !strings.Contains(got, "namespace/kube-system") {
		t.Fatalf("kubectl get namespaces: %s", got)
	}
	e.watchAndApply(t, admin)
	// Events go to etcd-events (kube-apiserver's --etcd-servers-overrides), everything else to etcd-main.
	event := filepath.Join(e.dir, "event.yaml")
	if err := os.WriteFile(event, []byte("apiVersion: v1\nkind: Event\nmetadata: {name: kept.1, namespace: demo}\n"+
		"involvedObject: {kind: ConfigMap, name: kept, namespace: demo}\nreason: Tested\nmessage: stored in etcd-events\ntype: Normal\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.ok(t, admin, "apply", "-f", event)
	if n := e.etcdKeys(t, ns, "etcd-events-client", "/registry/events/demo/"); n != 1 {
		t.Fatalf("etcd-events holds %d events of the namespace demo, want 1", n)
	}
	if n := e.etcdKeys(t, ns, "etcd-main-client", "/registry/events/"); n != 0 {
		t.Fatalf("etcd-main holds %d events, want none", n)
	}
	if n := e.etcdKeys(t, ns, "etcd-main-client", "/registry/configmaps/demo/kept"); n != 1 {
		t.Fatalf("etcd-main holds %d config maps demo/kept, want 1", n)
	}

	viewer := e.issue(t, "viewer", "--viewer")
	agenttest.Eventually(t, "the viewer reads config maps", func() bool {
		out, err := e.run(viewer, "-n", "demo", "get", "configmap", "kept", "-o", "jsonpath={.data.answer}")
		return err == nil && out == "42"
	})
	if out, err := e.run(viewer, "-n", "demo", "create", "configmap", "no", "--from-literal=a=b"); err == nil || !strings.Contains(out, "forbidden") {
		t.Fatalf("the viewer created a config map: %v %s", err, out)
	}
	if out, err := e.run(viewer, "-n", "demo", "apply", "--server-side", "-f", e.configMap(t, "denied", "1")); err == nil || !strings.Contains(out, "forbidden") {
		t.Fatalf("the viewer applied a config map: %v %s", err, out)
	}
	if out, err := e.run(viewer, "-n", "demo", "get", "secrets"); err == nil || !strings.Contains(out, "forbidden") {
		t.Fatalf("the viewer listed secrets: %v %s", err, out)
	}
	// A certificate of another CA authenticates nobody.
	otherCA, otherCAKey := selfSignedCA(t)
	otherCert, otherKey := clientCert(t, otherCA, otherCAKey, "mallory", "system:masters")
	other := e.kubeconfig(t, "other", otherCert, otherKey, clusterCA)
	if out, err := e.run(other, "get", "namespaces"); err == nil || strings.Contains(out, "demo") {
		t.Fatalf("a client certificate of another CA listed namespaces: %v %s", err, out)
	}
	// A kubeconfig that has expired is refused: the hub issues one, of the shortest duration, an hour ago by its clock.
	e.skew.Store(int64(-time.Hour))
	expired, err := e.shootKubeconfig("expired", "--duration", "10m")
	e.skew.Store(0)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := e.run(expired, "-n", "demo", "get", "configmap", "kept"); err == nil || !strings.Contains(out, "Unauthorized") {
		t.Fatalf("an expired kubeconfig: %v %s", err, out)
	}
	agenttest.Eventually(t, "APIServerAvailable and ControlPlaneHealthy True", func() bool {
		st, _ := condition(e.shoot(t), "APIServerAvailable")
		hp, _ := condition(e.shoot(t), "ControlPlaneHealthy")
		return st == "True" && hp == "True"
	})
	total, per := e.controlPlaneMemory(t, ns)
	t.Logf("control plane memory (cgroup total_rss): %d MiB %v", total>>20, per)
	e.startupGuarded(t, ns)

	// Rotate the CAs: while Prepared, kubeconfigs issued before and after the start work; after completing, the one
	// issued before the start is refused. Each phase replaces the kube-apiserver pod: the old one stops on its own,
	// ending its watches, instead of being killed when its grace period runs out.
	exits := e.watchExits(t, ns, "role=apiserver", "kube-apiserver")
	e.patch(t, `{"metadata":{"annotations":{"gardener.cloud/operation":"rotate-ca-start"}}}`)
	e.waitShoot(t, "CA rotation prepared", 3*time.Minute, func(s *corev1beta1.Shoot) bool {
		return succeeded(s) && s.GetStatus().GetCredentials().GetRotation().GetCertificateAuthorities().GetPhase() == "Prepared"
	})
	newCA, _, bothCAs, ok := e.clientCA(t)
	if !ok || string(newCA) == string(caCert) || !strings.Contains(string(bothCAs), strings.TrimSpace(string(clusterCA))) {
		t.Fatal("the published client CA did not change, or the cluster CA bundle lacks the old CA")
	}
	rotated := e.issue(t, "rotated")
	for name, kc := range map[string]string{"old": admin, "new": rotated} {
		if got, err := e.run(kc, "-n", "demo", "get", "configmap", "kept", "-o", "jsonpath={.data.answer}"); err != nil || got != "42" {
			t.Fatalf("while the CA rotation is prepared, the %s kubeconfig: %v %s", name, err, got)
		}
	}
	e.patch(t, `{"metadata":{"annotations":{"gardener.cloud/operation":"rotate-ca-complete"}}}`)
	e.waitShoot(t, "CA rotation completed", 3*time.Minute, func(s *corev1beta1.Shoot) bool {
		return succeeded(s) && s.GetStatus().GetCredentials().GetRotation().GetCertificateAuthorities().GetPhase() == "Completed"
	})
	// Completed is reported once the old kube-apiserver pods are gone: a kubeconfig issued now works at once.
	completed := e.issue(t, "completed")
	if got, err := e.run(completed, "-n", "demo", "get", "configmap", "kept", "-o", "jsonpath={.data.answer}"); err != nil || got != "42" {
		t.Fatalf("the kubeconfig issued right after the CA rotation completed: %v %s", err, got)
	}
	// The components' kubeconfigs of the old CA are cleaned up: kube-controller-manager's current one is left.
	kubeconfigs := &corev1.SecretList{}
	if err := e.seed.Client.List(context.Background(), kubeconfigs, client.InNamespace(ns), client.MatchingLabels{"gardener.cloud/purpose": "kubeconfig"}); err != nil {
		t.Fatal(err)
	}
	if len(kubeconfigs.Items) != 1 {
		var names []string
		for _, s := range kubeconfigs.Items {
			names = append(names, s.Name)
		}
		t.Fatalf("kubeconfig secrets after the CA rotation: %v, want kube-controller-manager's current one", names)
	}
	if out, err := e.run(admin, "-n", "demo", "get", "configmap", "kept"); err == nil {
		t.Fatalf("the old kubeconfig still works after the CA rotation: %s", out)
	}
	if got, err := e.run(rotated, "-n", "demo", "get", "configmap", "kept", "-o", "jsonpath={.data.answer}"); err != nil || got != "42" {
		t.Fatalf("after the CA rotation, the kubeconfig issued while prepared: %v %s", err, got)
	}
	admin = completed
	adminCert, adminKey, clusterCA := e.credentials(t, admin)
	if ended := exits(); len(ended) < 2 {
		t.Errorf("kube-apiserver containers that ended during the CA rotation: %v, want the two replaced pods'", ended)
	} else {
		for pod, st := range ended {
			// 137: SIGKILL, the kubelet's when the grace period ran out. On a loaded machine kube-apiserver may end its
			// shutdown with an error of its own (exit code 1 once in make test): it still stopped by itself.
			switch st.ExitCode {
			case 137:
				t.Errorf("the replaced kube-apiserver %s was killed (exit code 137, %s): it did not stop within its grace period", pod, st.Reason)
			case 0:
			default:
				t.Logf("the replaced kube-apiserver %s stopped with exit code %d (%s: %s)", pod, st.ExitCode, st.Reason, st.Message)
			}
		}
	}

	// Hibernate: the API goes away, etcd's volume stays.
	e.patch(t, `{"spec":{"hibernation":{"enabled":true}}}`)
	e.waitShoot(t, "hibernated", 3*time.Minute, func(s *corev1beta1.Shoot) bool { return succeeded(s) && s.GetStatus().GetHibernated() })
	if e.apiAnswers(t, adminCert, adminKey, clusterCA) {
		t.Fatal("the hibernated shoot's API answers")
	}
	agenttest.Eventually(t, "APIServerAvailable False while hibernated", func() bool {
		st, _ := condition(e.shoot(t), "APIServerAvailable")
		return st == "False"
	})
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := e.seed.Client.List(context.Background(), pvcs, client.InNamespace(ns)); err != nil || len(pvcs.Items) != 2 {
		t.Fatalf("etcd's volumes while hibernated: %v %v", len(pvcs.Items), err)
	}

	// Wake up: the objects are back.
	woke := time.Now()
	e.patch(t, `{"spec":{"hibernation":{"enabled":false}}}`)
	for !e.apiAnswers(t, adminCert, adminKey, clusterCA) {
		if limit := timescale.Scale(3 * time.Minute); time.Since(woke) > limit {
			t.Fatalf("the woken shoot's API does not answer after %v", limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("wake-up → API answering: %v", time.Since(woke).Round(100*time.Millisecond))
	if got := e.ok(t, admin, "-n", "demo", "get", "configmap", "kept", "-o", "jsonpath={.data.answer}"); got != "42" {
		t.Fatalf("config map after wake-up %q, want 42", got)
	}
	e.waitShoot(t, "woken up", 3*time.Minute, func(s *corev1beta1.Shoot) bool { return succeeded(s) && !s.GetStatus().GetHibernated() })

	// Delete: the control plane and its volume go.
	e.patch(t, `{"metadata":{"annotations":{"confirmation.gardener.cloud/deletion":"true"}}}`)
	if code, out := e.hub.Do(t, "DELETE", "/apis/core.gardener.cloud/v1beta1/namespaces/"+namespace+"/shoots/"+shootName, nil); code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("delete shoot: %d %s", code, out)
	}
	e.waitShoot(t, "deleted", 3*time.Minute, func(s *corev1beta1.Shoot) bool { return s == nil })
	if err := e.seed.Client.List(context.Background(), pvcs, client.InNamespace(ns)); err != nil || len(pvcs.Items) != 0 {
		t.Fatalf("etcd's volumes after the deletion: %d %v", len(pvcs.Items), err)
	}
	pods := &corev1.PodList{}
	if err := e.seed.Client.List(context.Background(), pods, client.InNamespace(ns)); err != nil || len(pods.Items) != 0 {
		t.Fatalf("control plane pods after the deletion: %d %v", len(pods.Items), err)
	}
	agenttest.Eventually(t, "the client CA unpublished", func() bool { _, _, _, ok := e.clientCA(t); return !ok })
}

// watchExits watches the pods of namespace ns that match selector from now on and returns what stops the watch and
// gives how each pod's container ended (its terminated state, by pod name), for those that ended meanwhile.
func (e *env) watchExits(t *testing.T, ns, selector, container string) func() map[string]corev1.ContainerStateTerminated {
	t.Helper()
	c, err := client.NewWithWatch(e.seed.Cluster.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(context.Background(), &corev1.PodList{}, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ended, done := map[string]corev1.ContainerStateTerminated{}, make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == container && cs.State.Terminated != nil {
					ended[p.Name] = *cs.State.Terminated
				}
			}
		}
	}()
	return func() map[string]corev1.ContainerStateTerminated {
		w.Stop()
		<-done
		return ended
	}
}

// selfSignedCA is a CA the shoot does not trust.
func selfSignedCA(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// etcdKeys counts the keys under prefix in the shoot's etcd behind the seed Service service (etcd-main-client,
// etcd-events-client).
func (e *env) etcdKeys(t *testing.T, ns, service, prefix string) int64 {
	t.Helper()
	cli := e.etcdClient(t, ns, service)
	defer cli.Close()
	gctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cli.Get(gctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("count %s in %s: %v", prefix, service, err)
	}
	return r.Count
}

// etcdClient is a client of the shoot's etcd behind the seed Service service (etcd-main-client,
// etcd-events-client), reached at its cluster IP with the control plane's etcd client certificate.
func (e *env) etcdClient(t *testing.T, ns, service string) *clientv3.Client {
	t.Helper()
	ctx := context.Background()
	certs := &corev1.SecretList{}
	if err := e.seed.Client.List(ctx, certs, client.InNamespace(ns), client.MatchingLabels{credentials.LabelName: "etcd-client"}); err != nil || len(certs.Items) == 0 {
		t.Fatalf("the etcd client certificate: %d %v", len(certs.Items), err)
	}
	bundle, svc := &corev1.Secret{}, &corev1.Service{}
	if err := e.seed.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: credentials.NameCAETCDBundle}, bundle); err != nil {
		t.Fatal(err)
	}
	if err := e.seed.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: service}, svc); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certs.Items[0].Data[credentials.DataKeyCertificate], certs.Items[0].Data[credentials.DataKeyPrivateKey])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle.Data[credentials.DataKeyCertificateBundle])
	// etcd's client checks the certificate against the address it dials (the cluster IP, which the certificate does
	// not name): check it against the Service's name instead.
	name := service + "." + ns + ".svc"
	verify := func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%s presented no certificate", name)
		}
		opts := x509.VerifyOptions{Roots: roots, DNSName: name, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(opts)
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://" + net.JoinHostPort(svc.Spec.ClusterIP, "2379")}, DialTimeout: 10 * time.Second,
		TLS: &tls.Config{InsecureSkipVerify: true, VerifyConnection: verify, //nolint:gosec // verified by VerifyConnection
			Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	return cli
}
