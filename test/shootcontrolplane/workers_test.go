package shootcontrolplane_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/trellis-dev/trellis/agent/shoot"
	"github.com/trellis-dev/trellis/extsdk/provider/local"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/localmachine"
	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/seedtest"
	"github.com/trellis-dev/trellis/test/timescale"
)

// startMachines serves a local machine provider on loopback (provider-local runs in the test's process) for the
// seed's node, and runs provider-local with it. Cleanup stops the provider's machines before the seed goes.
func (e *env) startMachines(t *testing.T, cluster *seedtest.Seed, bin string) {
	t.Helper()
	if cluster.Node == nil {
		t.Fatal("machines need the seed's node")
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	srv, err := localmachine.New(localmachine.Config{Parent: cluster.Node.Slot(), Testbin: bin, Dir: filepath.Join(e.dir, "machines"),
		Token: token, Log: slog.New(slog.NewTextHandler(tWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { // ends with Shutdown below
		defer close(done)
		_ = hs.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = hs.Shutdown(context.Background())
		<-done
		if err := srv.Close(); err != nil {
			t.Errorf("machine provider: %v", err)
		}
	})
	e.machines, e.seedNode = srv, cluster.Node.Slot()
	mp := &local.MachineProvider{URL: "http://" + ln.Addr().String(), Token: token}
	agenttest.StartExtensions(t, cluster.Config, func(mgr manager.Manager) error {
		return local.Add(mgr, local.Config{BackupDir: filepath.Join(e.dir, "backup"), MachineProvider: mp,
			HealthCheckInterval: 2 * time.Second})
	})
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// webManifest is a Deployment serving localnode.ProbePage on 8080 with busybox httpd, logging "serving" first.
func webManifest(image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: %s
        imagePullPolicy: Never
        command: [sh, -c, "mkdir -p /www && printf '%s\\n' > /www/index.html && echo serving && exec httpd -f -p 8080 -h /www"]
        ports: [{containerPort: 8080}]
        readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
`, image, strings.TrimSpace(localnode.ProbePage))
}

// criticalFirst checks that node no longer has the critical-components taint and that CoreDNS was scheduled there
// only once the node's kube-proxy was ready: the agent takes the taint off then (agent/shoot/nodegate.go).
func (e *env) criticalFirst(t *testing.T, kubeconfig, node string) {
	t.Helper()
	if taints := e.ok(t, kubeconfig, "get", "node", node, "-o", "jsonpath={.spec.taints[*].key}"); strings.Contains(taints, shoot.TaintCriticalComponentsNotReady) {
		t.Errorf("node %s still has the taint %s once its system components are healthy: %s", node, shoot.TaintCriticalComponentsNotReady, taints)
	}
	out := e.ok(t, kubeconfig, "-n", "kube-system", "get", "pods", "--field-selector", "spec.nodeName="+node, "-o", "json")
	var pods corev1.PodList
	if err := json.Unmarshal([]byte(out), &pods); err != nil {
		t.Fatal(err)
	}
	at := func(p corev1.Pod, c corev1.PodConditionType) time.Time {
		for _, pc := range p.Status.Conditions {
			if pc.Type == c {
				return pc.LastTransitionTime.Time
			}
		}
		return time.Time{}
	}
	var proxyReady time.Time
	var dns []corev1.Pod
	for _, p := range pods.Items {
		switch {
		case p.Labels["app"] == "kubernetes" && p.Labels["role"] == "proxy":
			proxyReady = at(p, corev1.PodReady)
		case p.Labels["k8s-app"] == "kube-dns":
			dns = append(dns, p)
		}
	}
	if proxyReady.IsZero() || len(dns) == 0 {
		t.Fatalf("node %s runs no ready kube-proxy or no CoreDNS: %d pods", node, len(pods.Items))
	}
	for _, p := range dns {
		// Conditions have whole seconds: scheduled in the second kube-proxy became ready is in order.
		if scheduled := at(p, corev1.PodScheduled); scheduled.Before(proxyReady) {
			t.Errorf("CoreDNS %s was scheduled on %s at %v, before its kube-proxy was ready (%v)", p.Name, node, scheduled, proxyReady)
		}
	}
}

// TestShootWorkers: a shoot with one worker pool of one machine gets a real Node: provider-local's Worker has the
// local machine provider make the machine (containerd and a kubelet in a slot of their own, linked to the seed's
// node), whose kubelet joins the shoot's kube-apiserver by TLS bootstrap (the agent's bootstrap token, a CSR the
// shoot's kube-controller-manager approves and signs). The Node becomes Ready (EveryNodeReady True); the real
// kubectl, with a kubeconfig from trellisctl shoot kubeconfig (only the hub's tunnel listener as the server),
// creates a Deployment of the busybox image that becomes Available, and logs -f, exec and port-forward reach its
// pod through the hub's tunnel, the shoot's kube-apiserver and the kubelet. Hibernation removes the machine and
// everything it made on this machine (localnode Leftovers); waking up brings a new machine whose Node runs the
// Deployment again. Deleting the shoot removes the machine too. It logs create → Node Ready, create → Deployment
// Available and the machine's memory, which docs/local.md reports.
func TestShootWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a seed with a real node, a shoot control plane and a machine")
	}
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	e := startWith(t, true)
	busybox, err := localnode.ImageRef(testbin(t), "busybox")
	if err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	s := agentsim.Shoot(namespace, shootName, "local", "", "local")
	s.Spec.SecretBindingName = nil
	s.Spec.Kubernetes = &corev1beta1.Kubernetes{Version: "1.31.1"}
	s.Spec.Provider.Workers = []*corev1beta1.Worker{{Name: "pool", Minimum: &one, Maximum: &one,
		Machine: &corev1beta1.Machine{Type: "local", Image: &corev1beta1.ShootMachineImage{Name: "local", Version: proto.String("1.0.0")}}}}
	body, err := kjson.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if code, out := e.hub.Do(t, "POST", "/apis/core.gardener.cloud/v1beta1/namespaces/"+namespace+"/shoots", body); code != http.StatusCreated {
		t.Fatalf("create shoot: %d %s", code, out)
	}
	e.waitShoot(t, "create Succeeded", 4*time.Minute, succeeded)
	t.Logf("create → Succeeded: %v", time.Since(begin).Round(100*time.Millisecond))
	admin := e.issue(t, "admin")

	// The machine's Node joins and becomes Ready; the shoot's care says so.
	var node string
	within(t, 3*time.Minute, "the shoot's Node Ready", func() bool {
		out, err := e.run(admin, "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		if err != nil {
			return false
		}
		lines := strings.Fields(out)
		if len(lines) != 1 || !strings.HasSuffix(lines[0], "=True") {
			return false
		}
		node = strings.TrimSuffix(lines[0], "=True")
		return true
	})
	nodeReady := time.Since(begin)
	t.Logf("create → Node %s Ready: %v", node, nodeReady.Round(100*time.Millisecond))
	if pool := e.ok(t, admin, "get", "node", node, "-o", `jsonpath={.metadata.labels.worker\.gardener\.cloud/pool}`); pool != "pool" {
		t.Errorf("node %s has pool label %q, want pool", node, pool)
	}
	slots := e.machines.Machines()
	if _, ok := slots[node]; len(slots) != 1 || !ok {
		t.Fatalf("the machine provider runs %v, want the machine %s", slots, node)
	}
	within(t, time.Minute, "EveryNodeReady True", func() bool {
		st, _ := condition(e.shoot(t), "EveryNodeReady")
		return st == "True"
	})
	hostChains, err := localnode.HostKubeChains()
	if err != nil {
		t.Fatal(err)
	}
	// The agent's kube-proxy and CoreDNS run on the machine; the shoot's care says so.
	var sys string
	within(t, 3*time.Minute, "SystemComponentsHealthy True", func() bool {
		st, msg := condition(e.shoot(t), "SystemComponentsHealthy")
		if sys != st+": "+msg {
			sys = st + ": " + msg
			t.Logf("SystemComponentsHealthy %s", sys)
		}
		return st == "True"
	})
	t.Logf("Node Ready → SystemComponentsHealthy True: %v", (time.Since(begin) - nodeReady).Round(100*time.Millisecond))
	e.criticalFirst(t, admin, node)

	// A Deployment in the shoot runs on the machine.
	e.apply(t, admin, "web.yaml", webManifest(busybox))
	within(t, 3*time.Minute, "Deployment web Available", func() bool {
		out, err := e.run(admin, "-n", "default", "get", "deployment", "web", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
		return err == nil && out == "True"
	})
	available := time.Since(begin)
	t.Logf("create → Deployment Available: %v", available.Round(100*time.Millisecond))
	if on := e.ok(t, admin, "-n", "default", "get", "pods", "-l", "app=web", "-o", "jsonpath={.items[0].spec.nodeName}"); on != node {
		t.Fatalf("the pod runs on %q, want %s", on, node)
	}

	// logs -f, exec and port-forward: the hub's tunnel, the shoot's kube-apiserver, the machine's kubelet.
	e.logsFollow(t, admin)
	if out := e.ok(t, admin, "-n", "default", "exec", "deploy/web", "--", "cat", "/www/index.html"); out+"\n" != localnode.ProbePage {
		t.Errorf("kubectl exec: %q, want %q", out, localnode.ProbePage)
	}
	e.portForward(t, admin)

	e.clusterNetworking(t, admin, busybox, e.seedNode, slots[node])

	for name, slot := range slots {
		t.Logf("machine %s (slot %d) resident memory: %d MiB; kube-proxy %d MiB, CoreDNS (2 replicas) %d MiB", name, slot.Index,
			slot.ResidentMemory()>>20, slot.ResidentMemoryOf("kube-proxy")>>20, slot.ResidentMemoryOf("coredns")>>20)
	}

	// Hibernate: the machine goes, with everything it made; wake up: a new machine joins and runs the Deployment.
	e.patch(t, `{"spec":{"hibernation":{"enabled":true}}}`)
	e.waitShoot(t, "hibernated", 4*time.Minute, func(s *corev1beta1.Shoot) bool { return succeeded(s) && s.GetStatus().GetHibernated() })
	if left := e.machines.Machines(); len(left) != 0 {
		t.Fatalf("machines while hibernated: %v", left)
	}
	e.noLeftovers(t, slots)
	// The machine's network namespace went with kube-proxy's chains in it; the host's own tables never had any.
	if after, err := localnode.HostKubeChains(); err != nil || !slices.Equal(after, hostChains) {
		t.Errorf("the host's KUBE-* chains changed: %v before, %v after (%v)", hostChains, after, err)
	}
	woke := time.Now()
	e.patch(t, `{"spec":{"hibernation":{"enabled":false}}}`)
	e.waitShoot(t, "woken up", 4*time.Minute, func(s *corev1beta1.Shoot) bool { return succeeded(s) && !s.GetStatus().GetHibernated() })
	within(t, 3*time.Minute, "the new machine's Node Ready and the Deployment Available again", func() bool {
		nodes, err := e.run(admin, "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		if err != nil || len(strings.Fields(nodes)) != 1 || !strings.HasSuffix(nodes, "=True") || strings.HasPrefix(nodes, node+"=") {
			return false
		}
		out, err := e.run(admin, "-n", "default", "get", "deployment", "web", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
		return err == nil && out == "True"
	})
	t.Logf("wake-up → new Node Ready and Deployment Available: %v", time.Since(woke).Round(100*time.Millisecond))
	slots = e.machines.Machines()
	if len(slots) != 1 {
		t.Fatalf("the machine provider runs %v after the wake-up, want one machine", slots)
	}

	// Delete: the machine goes, with everything it made on this machine.
	e.patch(t, `{"metadata":{"annotations":{"confirmation.gardener.cloud/deletion":"true"}}}`)
	if code, out := e.hub.Do(t, "DELETE", "/apis/core.gardener.cloud/v1beta1/namespaces/"+namespace+"/shoots/"+shootName, nil); code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("delete shoot: %d %s", code, out)
	}
	e.waitShoot(t, "deleted", 4*time.Minute, func(s *corev1beta1.Shoot) bool { return s == nil })
	if left := e.machines.Machines(); len(left) != 0 {
		t.Errorf("machines after the deletion: %v", left)
	}
	e.noLeftovers(t, slots)
}

// noLeftovers checks that the machines' slots hold nothing any more (localnode Leftovers), each looked at while
// holding it (another test's node may have taken it since).
func (e *env) noLeftovers(t *testing.T, slots map[string]*localnode.Slot) {
	t.Helper()
	if errs := e.machines.StopErrors(); len(errs) > 0 {
		t.Errorf("machines' deletions failed: %v", errs)
	}
	for name, slot := range slots {
		localnode.CheckFreed(t, "machine "+name, slot.Index)
	}
}

// logsFollow runs kubectl logs -f against the web pod and waits for its first line.
func (e *env) logsFollow(t *testing.T, kubeconfig string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, e.kubectl, "--kubeconfig", kubeconfig, "-n", "default", "logs", "-f", "deploy/web")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "serving" {
		t.Fatalf("kubectl logs -f: %q, %v; want serving", line, err)
	}
	// -f keeps the stream open: the process is still running.
	select {
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
		t.Fatal("kubectl logs -f ended")
	}
	if cmd.ProcessState != nil {
		t.Fatal("kubectl logs -f exited")
	}
}

// portForward runs kubectl port-forward to the web pod's 8080 and fetches the page through it.
func (e *env) portForward(t *testing.T, kubeconfig string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, e.kubectl, "--kubeconfig", kubeconfig, "-n", "default", "port-forward", "--address", "127.0.0.1",
		"deploy/web", ":8080")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	forwarding := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) -> 8080`)
	r := bufio.NewReader(out)
	var addr string
	for addr == "" {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("kubectl port-forward: %v (%q); stderr: %s", err, line, stderr.String())
		}
		if m := forwarding.FindStringSubmatch(line); m != nil {
			addr = m[1]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, r) }() // ends when kubectl exits
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get("http://" + addr + "/index.html")
	if err != nil {
		t.Fatalf("GET through kubectl port-forward: %v", err)
	}
	page, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if string(page) != localnode.ProbePage {
		t.Fatalf("page through kubectl port-forward: %q, want %q", page, localnode.ProbePage)
	}
}

// within polls cond every 500 ms (it runs kubectl) until it holds, failing the test after d.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	d = timescale.Scale(d)
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// apply writes manifest into the test's directory as name and applies it to the shoot with kubectl.
func (e *env) apply(t *testing.T, kubeconfig, name, manifest string) {
	t.Helper()
	path := filepath.Join(e.dir, name)
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	e.ok(t, kubeconfig, "apply", "-f", path)
}

// clientManifest is a Service web in front of the Deployment web, and a pod that stays up to run commands in.
func clientManifest(image string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: client
    image: %s
    imagePullPolicy: Never
    command: [sleep, "3600"]
`, image)
}

// clusterNetworking checks what the shoot's kube-proxy and CoreDNS give its pods on the machine (slot): the pod's
// resolv.conf names the kube-dns Service, CoreDNS resolves kubernetes.default.svc.cluster.local to the kubernetes
// Service, the shoot's kube-apiserver answers at that Service's cluster IP, and another pod reaches the Service of the
// Deployment web by name. The shoot's Service rules are in the machine's network namespace only: the seed node's
// namespace, whose kube-proxy is the seed's, has none of them and still has its own.
func (e *env) clusterNetworking(t *testing.T, admin, image string, seedNode, machine *localnode.Slot) {
	t.Helper()
	e.apply(t, admin, "client.yaml", clientManifest(image))
	within(t, 2*time.Minute, "pod client Ready", func() bool {
		out, err := e.run(admin, "-n", "default", "get", "pod", "client", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return err == nil && out == "True"
	})
	dnsIP := e.ok(t, admin, "-n", "kube-system", "get", "service", "kube-dns", "-o", "jsonpath={.spec.clusterIP}")
	apiIP := e.ok(t, admin, "-n", "default", "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}")
	if resolv := e.ok(t, admin, "-n", "default", "exec", "client", "--", "cat", "/etc/resolv.conf"); !strings.Contains(resolv, "nameserver "+dnsIP) {
		t.Errorf("the pod's resolv.conf does not name kube-dns (%s): %q", dnsIP, resolv)
	}
	inPod := func(what, want string, args ...string) {
		t.Helper()
		deadline := time.Now().Add(timescale.Scale(time.Minute))
		for {
			out, err := e.run(admin, append([]string{"-n", "default", "exec", "client", "--"}, args...)...)
			if err == nil && strings.Contains(out, want) {
				t.Logf("%s: %s", what, strings.TrimSpace(out))
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v: %q, want %q in it", what, err, out, want)
			}
			time.Sleep(time.Second)
		}
	}
	inPod("CoreDNS resolves kubernetes.default.svc.cluster.local", apiIP, "nslookup", "kubernetes.default.svc.cluster.local")
	// busybox's TLS cannot talk to the kube-apiserver's ECDSA certificate, so the pod speaks plain HTTP to its TLS
	// port and gets the Go TLS server's own answer. CoreDNS, Ready above, lists and watches the shoot's API through
	// the same Service (client-go's in-cluster configuration, TLS verified with the cluster CA).
	inPod("the shoot's API through the kubernetes Service", "400 Bad Request", "sh", "-c", "wget -O- http://kubernetes.default.svc:443/ 2>&1; true")
	inPod("Service web by name from another pod", strings.TrimSpace(localnode.ProbePage), "timeout", "10", "wget", "-qO-", "http://web/index.html")

	shootRules, err := machine.NATRules()
	if err != nil {
		t.Fatal(err)
	}
	seedRules, err := seedNode.NATRules()
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"default/kubernetes:https", "default/web", "kube-system/kube-dns:dns"} {
		if !strings.Contains(shootRules, `"`+svc) {
			t.Errorf("the machine's nat table has no rule of the shoot's Service %s", svc)
		}
	}
	// The seed has Services default/kubernetes and kube-system/kube-dns of its own, but none named web.
	if strings.Contains(seedRules, `"default/web`) {
		t.Error("the seed node's nat table has a rule of the shoot's Service default/web")
	}
	if !strings.Contains(seedRules, "/kube-apiserver") {
		t.Errorf("the seed node's nat table lost the rules of the shoot's kube-apiserver Service in the seed")
	}
}
