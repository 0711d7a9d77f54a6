package localnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/trellis-dev/trellis/test/timescale"
)

// ProbePage is what the probe's web server serves.
const ProbePage = "hello from the node\n"

// clientAttempt is the line the probe's client pod logs when it reached the Service.
var clientAttempt = regexp.MustCompile(`attempt (\d+)`)

// ProbeConfig says where Probe runs.
type ProbeConfig struct {
	// Client and Kubeconfig (a file, for kubectl) reach the seed.
	Client     kubernetes.Interface
	Kubeconfig string
	// Namespace is where the probe's objects go; it must exist.
	Namespace string
	// Testbin is bin/testbin: kubectl in node/, the busybox image in images/.
	Testbin string
}

// ProbeResult is what Probe found.
type ProbeResult struct {
	// ClusterIP is the web Service's.
	ClusterIP string
	// Available is how long the 2-replica web Deployment took to be available.
	Available time.Duration
	// ClientAttempts is how many tries the client pod took to resolve the Service and fetch the page (it retries
	// until kube-proxy has programmed the new ClusterIP).
	ClientAttempts int
}

// Probe checks what a seed needs of its node, end to end through the seed's kube-apiserver: a 2-replica web
// Deployment (busybox httpd) becomes available; a pod resolves the web Service's DNS name (CoreDNS) and fetches
// ProbePage through its ClusterIP (kube-proxy); the pod's logs are read through the apiserver; kubectl logs, exec
// and an interactive exec reach the containers (apiserver to kubelet to containerd).
func Probe(ctx context.Context, pc ProbeConfig) (ProbeResult, error) {
	var res ProbeResult
	busybox, err := ImageRef(pc.Testbin, "busybox")
	if err != nil {
		return res, err
	}
	c, ns := pc.Client, pc.Namespace
	labels := map[string]string{"app": "web"}
	_, err = c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: busybox, ImagePullPolicy: corev1.PullNever,
					Command: []string{"sh", "-c", "mkdir -p /www && printf '" + strings.TrimSpace(ProbePage) +
						"\\n' > /www/index.html && echo serving && exec httpd -f -p 8080 -h /www"},
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
					ReadinessProbe: &corev1.Probe{PeriodSeconds: 1,
						ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}},
				}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return res, err
	}
	svc, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return res, err
	}
	res.ClusterIP = svc.Spec.ClusterIP
	begin := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timescale.Scale(2*time.Minute), true, func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && DeploymentAvailable(d), nil
	})
	if err != nil {
		return res, fmt.Errorf("deployment web not available: %w", err)
	}
	res.Available = time.Since(begin)

	_, err = c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "client", Image: busybox, ImagePullPolicy: corev1.PullNever,
			// kube-proxy programs a new Service's ClusterIP a moment after the Service exists (at least its
			// minSyncPeriod, longer on a loaded machine), and until then a SYN to it goes unanswered: a client
			// retries, as users' clients do, each attempt bounded so that one lost SYN cannot take TCP's two minutes.
			Command: []string{"sh", "-c", "for i in $(seq 30); do " +
				"if timeout 5 nslookup web." + ns + ".svc.cluster.local && timeout 5 wget -q -O - http://web." + ns + "/index.html; " +
				"then echo \"attempt $i\"; exit 0; fi; sleep 1; done; exit 1"},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return res, err
	}
	phase, waitErr := WaitPodDone(ctx, c, ns, "client")
	logs, err := c.CoreV1().Pods(ns).GetLogs("client", &corev1.PodLogOptions{}).DoRaw(ctx)
	if waitErr != nil {
		return res, fmt.Errorf("%w; its logs (%v):\n%s", waitErr, err, logs)
	}
	if err != nil {
		return res, fmt.Errorf("logs of pod client through the apiserver: %w", err)
	}
	if m := clientAttempt.FindSubmatch(logs); m != nil {
		res.ClientAttempts, _ = strconv.Atoi(string(m[1]))
	}
	if phase != corev1.PodSucceeded || !strings.Contains(string(logs), svc.Spec.ClusterIP) || !strings.Contains(string(logs), ProbePage) {
		return res, fmt.Errorf("pod client %s; its logs do not show the Service's ClusterIP %s and the page:\n%s", phase, svc.Spec.ClusterIP, logs)
	}

	kubectl := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(pc.Testbin, "node", "kubectl"),
			append([]string{"--kubeconfig", pc.Kubeconfig, "-n", ns}, args...)...)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
		return out.String(), nil
	}
	var errs []error
	if out, err := kubectl("", "logs", "deployment/web"); err != nil || !strings.Contains(out, "serving") {
		errs = append(errs, fmt.Errorf("kubectl logs: %q, %v; want the container's output", out, err))
	}
	if out, err := kubectl("", "exec", "deployment/web", "--", "cat", "/www/index.html"); err != nil || out != ProbePage {
		errs = append(errs, fmt.Errorf("kubectl exec: %q, %v; want %q", out, err, ProbePage))
	}
	if out, err := kubectl("echo interactive $((6*7))\nexit\n", "exec", "-i", "deployment/web", "--", "sh"); err != nil ||
		strings.TrimSpace(out) != "interactive 42" {
		errs = append(errs, fmt.Errorf("kubectl exec -i: %q, %v", out, err))
	}
	return res, errors.Join(errs...)
}

// WaitPodDone waits for a pod to succeed or fail and returns its phase.
func WaitPodDone(ctx context.Context, c kubernetes.Interface, ns, name string) (corev1.PodPhase, error) {
	var phase corev1.PodPhase
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timescale.Scale(2*time.Minute), true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	if err != nil {
		return phase, fmt.Errorf("pod %s/%s not done (%s): %w", ns, name, phase, err)
	}
	return phase, nil
}
