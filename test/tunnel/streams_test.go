package tunnel_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kcorev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// startWithNode is start with a seed that has a real node (pods run), so that kubectl's streams reach containers.
func startWithNode(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	e := &env{proxy: &serviceProxy{routes: map[string]string{}}, kubectl: kubectlPath(t), dir: t.TempDir()}
	e.hub = agenttest.StartHub(t, func(c *hub.Config) { c.TunnelListen = "127.0.0.1:0" })
	e.seed = e.hub.StartSeed(t, "local", agenttest.SeedSpec, seedtest.Start(t, seedtest.WithNode(nil)),
		func(c *agent.Config) { c.DialService = e.proxy.dial })
	return e
}

// testbinDir is the module's bin/testbin (or the assets directory the environment names).
func testbinDir() string {
	if dir := os.Getenv(seedtest.EnvAssets); dir != "" {
		return dir
	}
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", "bin", "testbin")
}

// TestKubectlStreamsThroughHub: exec (with stdin), attach, logs -f and port-forward reach a pod of a seed with a
// real node through the hub and the agent, over both of kubectl's upgrade protocols (WebSocket, its default, and
// SPDY), so that both reverse-proxy hops pass 101 upgrades and the impersonation of the hub user holds on them.
func TestKubectlStreamsThroughHub(t *testing.T) {
	e := startWithNode(t)
	kc := e.seedKubeconfig(t)
	busybox, err := localnode.ImageRef(testbinDir(), "busybox")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := e.seed.Cluster.Namespace(t)
	c := e.seed.Cluster.Client
	_, err = c.CoreV1().Pods(ns).Create(ctx, &kcorev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bb"},
		Spec: kcorev1.PodSpec{
			TerminationGracePeriodSeconds: ptr[int64](0),
			Containers: []kcorev1.Container{{
				// main echoes what an attach sends it, prefixed, so that the attach's round trip is visible.
				Name: "main", Image: busybox, ImagePullPolicy: kcorev1.PullNever, Stdin: true,
				Command: []string{"sh", "-c", "echo started; while read l; do echo \"got $l\"; done; sleep 3600"},
			}, {
				Name: "web", Image: busybox, ImagePullPolicy: kcorev1.PullNever,
				Command: []string{"sh", "-c", "mkdir -p /www && echo through-port-forward > /www/index.html && exec httpd -f -p 8080 -h /www"},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Eventually(t, "pod bb running", func() bool {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "bb", metav1.GetOptions{})
		if err != nil || p.Status.Phase != kcorev1.PodRunning {
			return false
		}
		for _, s := range p.Status.ContainerStatuses {
			if !s.Ready {
				return false
			}
		}
		return true
	})

	for _, proto := range []struct {
		name      string
		websocket string // KUBECTL_REMOTE_COMMAND_WEBSOCKETS and KUBECTL_PORT_FORWARD_WEBSOCKETS
	}{{"WebSocket", "true"}, {"SPDY", "false"}} {
		t.Run(proto.name, func(t *testing.T) {
			kubectl := func(ctx context.Context, args ...string) *exec.Cmd {
				cmd := exec.CommandContext(ctx, e.kubectl, append([]string{"--kubeconfig", kc, "-n", ns}, args...)...)
				cmd.Env = append(os.Environ(), "KUBECTL_REMOTE_COMMAND_WEBSOCKETS="+proto.websocket,
					"KUBECTL_PORT_FORWARD_WEBSOCKETS="+proto.websocket)
				return cmd
			}
			run := func(stdin string, args ...string) string {
				t.Helper()
				cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
				defer ccancel()
				cmd := kubectl(cctx, args...)
				cmd.Stdin = strings.NewReader(stdin)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				return string(out)
			}
			marker := "mark-" + strings.ToLower(proto.name)

			// exec: the command runs in the container as the impersonated hub user, and stdin reaches it.
			if out := run("", "exec", "bb", "-c", "main", "--", "sh", "-c", "echo exec $((6*7))"); strings.TrimSpace(out) != "exec 42" {
				t.Fatalf("exec: %q", out)
			}
			if out := run("piped through two proxies\n", "exec", "-i", "bb", "-c", "main", "--", "cat"); out != "piped through two proxies\n" {
				t.Fatalf("exec -i cat: %q", out)
			}

			// logs -f streams: a line written after it started arrives while it runs.
			lctx, lcancel := context.WithCancel(ctx)
			defer lcancel()
			logs := kubectl(lctx, "logs", "-f", "bb", "-c", "main")
			lines := streamLines(t, logs)
			waitLine(t, lines, "started", 30*time.Second)
			run("", "exec", "bb", "-c", "main", "--", "sh", "-c", "echo "+marker+" > /proc/1/fd/1")
			waitLine(t, lines, marker, 30*time.Second)

			// attach -i: what kubectl sends reaches the container's stdin, and its answer comes back.
			actx, acancel := context.WithCancel(ctx)
			defer acancel()
			attach := kubectl(actx, "attach", "-i", "bb", "-c", "main")
			in, err := attach.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			alines := streamLines(t, attach)
			// The attach is established when the pod's stdin starts answering; resend until it does.
			deadline := time.Now().Add(30 * time.Second)
			for got := false; !got; {
				if time.Now().After(deadline) {
					t.Fatal("attach: no answer from the container")
				}
				_, _ = fmt.Fprintln(in, "attach-"+marker)
				select {
				case l := <-alines:
					got = l == "got attach-"+marker
				case <-time.After(time.Second):
				}
			}
			waitLine(t, lines, "got attach-"+marker, 30*time.Second) // and logs -f saw it too
			acancel()
			lcancel()

			// port-forward: a local port, which kubectl chooses and names, reaches the pod's httpd through the hub.
			pctx, pcancel := context.WithCancel(ctx)
			defer pcancel()
			pf := kubectl(pctx, "port-forward", "pod/bb", ":8080", "--address", "127.0.0.1")
			plines := streamLines(t, pf)
			fwd := waitLine(t, plines, "Forwarding from 127.0.0.1:", 30*time.Second) // "... 127.0.0.1:<port> -> 8080"
			local, _, _ := strings.Cut(strings.TrimPrefix(fwd, "Forwarding from "), " ")
			for i := range 3 { // several connections over the one upgraded stream
				resp, err := http.Get("http://" + local + "/index.html")
				if err != nil {
					t.Fatalf("GET %d through port-forward: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if string(body) != "through-port-forward\n" {
					t.Fatalf("GET %d through port-forward: %d %q", i, resp.StatusCode, body)
				}
			}
			pcancel()
		})
	}
	if e.metric(t, "trellis_tunnel_bytes_total", `kind="seed-api"`, `direction="to-seed"`) == 0 {
		t.Fatal("no bytes went to the seed through a seed-api tunnel")
	}
}

// streamLines starts cmd and returns its stdout's lines (stderr merged); the process is waited for at cleanup.
func streamLines(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = w.Close(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads any more
			}
		}
	}()
	return lines
}

// waitLine reads lines until one starts with prefix and returns it.
func waitLine(t *testing.T, lines <-chan string, prefix string, d time.Duration) string {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended before a line %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line %q within %v", prefix, d)
		}
	}
}
