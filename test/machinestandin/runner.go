package machinestandin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/test/binproc"
)

// Config configures a Runner.
type Config struct {
	// Name names the runner's process in logs (default: the Deployment's name).
	Name string
	// Binary is the agent binary (bin/trellis-agent).
	Binary string
	// Kubeconfig is a kubeconfig of the shoot's kube-apiserver: the runner reads the Deployment with it, and the
	// agent uses it as its seed cluster.
	Kubeconfig string
	// Dir holds the volumes' files, the configuration and the process's log.
	Dir string
	// Namespace and Deployment locate the agent in the shoot; defaults garden and trellis-agent.
	Namespace, Deployment string
	// Extensions are the extension controllers the runner plays too: the Deployments of an extension's chart that
	// the shoot's agent installs into namespaces extension-* of the shoot (its seed cluster) for the seed's
	// ControllerInstallations.
	Extensions []Extension
	// Interval is how often the shoot is looked at; default 500 ms.
	Interval time.Duration
	// Log receives the runner's logs; nil discards.
	Log *slog.Logger
}

// Extension is an extension controller the runner plays: every Deployment named Deployment in a namespace
// extension-* of the shoot runs as Binary, with the shoot as its cluster through --kubeconfig.
type Extension struct {
	Deployment, Binary string
}

// Runner runs the agent that a Deployment in a shoot describes, and the extensions' Deployments it is given, as host
// processes. Create it with New and run it with Run.
type Runner struct {
	cfg    Config
	client kubernetes.Interface
	agent  *workload
	// extensions are the extension workloads by namespace/name; only Run's goroutine touches the map.
	extensions map[string]*workload
}

// workload is one Deployment the runner plays with one process.
type workload struct {
	r                     *Runner
	namespace, deployment string
	binary, name, dir     string
	// kubeconfigFlag: the process gets the shoot's kubeconfig as --kubeconfig (extensions); the agent gets it in its
	// configuration file instead (seedClientConnection.kubeconfig).
	kubeconfigFlag bool
	running        string // the template's digest of the running process
	proc           atomic.Pointer[binproc.Process]
	starts         atomic.Int64
}

// New returns a runner for cfg; it starts nothing.
func New(cfg Config) (*Runner, error) {
	if cfg.Binary == "" || cfg.Kubeconfig == "" || cfg.Dir == "" {
		return nil, errors.New("machinestandin: Binary, Kubeconfig and Dir are required")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "garden"
	}
	if cfg.Deployment == "" {
		cfg.Deployment = "trellis-agent"
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Deployment
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 500 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("machinestandin: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, client: cs, extensions: map[string]*workload{}}
	r.agent = &workload{r: r, namespace: cfg.Namespace, deployment: cfg.Deployment, binary: cfg.Binary, name: cfg.Name, dir: cfg.Dir}
	return r, nil
}

// Starts counts the agent's starts (a changed pod template restarts it).
func (r *Runner) Starts() int64 { return r.agent.starts.Load() }

// Running reports whether the agent's process runs.
func (r *Runner) Running() bool { return r.agent.isRunning() }

// LogPath is the agent's log file.
func (r *Runner) LogPath() string { return r.agent.logPath() }

// ExtensionLogPaths are the log files of the extension processes started so far (their directories stay).
func (r *Runner) ExtensionLogPaths() []string {
	paths, _ := filepath.Glob(filepath.Join(r.cfg.Dir, "extension-*", "*.log"))
	return paths
}

func (w *workload) isRunning() bool {
	p := w.proc.Load()
	return p != nil && p.Running()
}

func (w *workload) logPath() string { return filepath.Join(w.dir, w.name+".log") }

// Run looks at the shoot every Interval until ctx ends: it starts a process when its Deployment appears, restarts
// it when the pod template changes, and stops it when the Deployment is gone (or being deleted), for the agent and
// for every extension Deployment. While a process runs, the runner reports the Deployment's pods as a kubelet would
// (markPods). The runner acts only while the shoot has no Nodes: a shoot with real machines runs the pods itself, and
// the runner stops what it started. It returns nil when ctx ends, once the processes stopped.
func (r *Runner) Run(ctx context.Context) error {
	defer r.stopAll()
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		switch machines, err := r.shootHasNodes(ctx); {
		case err != nil:
			if ctx.Err() == nil {
				r.cfg.Log.Warn("stand-in machine runner: list the shoot's Nodes", "err", err)
			}
		case machines:
			r.stopAll()
		default:
			r.agent.sync(ctx)
			if err := r.syncExtensions(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Log.Warn("stand-in machine runner: extensions", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// shootHasNodes tells whether the shoot has real machines (Nodes), which run the Deployments' pods themselves.
func (r *Runner) shootHasNodes(ctx context.Context) (bool, error) {
	nodes, err := r.client.CoreV1().Nodes().List(ctx, kmetav1.ListOptions{Limit: 1})
	if err != nil {
		return false, err
	}
	return len(nodes.Items) > 0, nil
}

// stopAll stops every process the runner started (a shoot with Nodes runs the pods itself; or the runner ends).
func (r *Runner) stopAll() {
	for _, w := range append([]*workload{r.agent}, slices.Collect(maps.Values(r.extensions))...) {
		if w.running != "" || w.isRunning() {
			r.cfg.Log.Info("stand-in machine runner: stopping", "deployment", w.namespace+"/"+w.deployment)
		}
		w.stop()
		w.running = ""
	}
}

// syncExtensions finds the extension Deployments in namespaces extension-* and brings their processes in line.
func (r *Runner) syncExtensions(ctx context.Context) error {
	var errs []error
	for _, ext := range r.cfg.Extensions {
		deps, err := r.client.AppsV1().Deployments("").List(ctx, kmetav1.ListOptions{FieldSelector: "metadata.name=" + ext.Deployment})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, d := range deps.Items {
			if !strings.HasPrefix(d.Namespace, "extension-") {
				continue
			}
			key := d.Namespace + "/" + d.Name
			if _, ok := r.extensions[key]; !ok {
				r.extensions[key] = &workload{r: r, namespace: d.Namespace, deployment: d.Name, binary: ext.Binary,
					name: d.Name, dir: filepath.Join(r.cfg.Dir, d.Namespace), kubeconfigFlag: true}
			}
		}
	}
	for key, w := range r.extensions {
		w.sync(ctx)
		if w.running == "" && !w.isRunning() {
			delete(r.extensions, key) // gone; found again if it comes back
		}
	}
	return errors.Join(errs...)
}

// sync takes one step with the workload and logs a failure.
func (w *workload) sync(ctx context.Context) {
	digest, err := w.step(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		w.r.cfg.Log.Warn("stand-in machine runner: step failed", "deployment", w.namespace+"/"+w.deployment, "err", err)
	case err == nil:
		w.running = digest
	}
}

// step brings the process in line with the Deployment and returns the digest of the template it runs ("" for none).
func (w *workload) step(ctx context.Context) (string, error) {
	r := w.r
	d, err := r.client.AppsV1().Deployments(w.namespace).Get(ctx, w.deployment, kmetav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && (d.DeletionTimestamp != nil || d.Spec.Replicas != nil && *d.Spec.Replicas == 0)):
		if w.running != "" {
			r.cfg.Log.Info("stand-in machine runner: the Deployment is gone; stopping its process", "deployment", w.namespace+"/"+w.deployment)
		}
		w.stop()
		return "", nil
	case err != nil:
		return w.running, err
	}
	b, err := json.Marshal(d.Spec.Template)
	if err != nil {
		return w.running, err
	}
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	if digest == w.running && w.isRunning() {
		return w.running, w.markPods(ctx, d)
	}
	w.stop()
	args, env, err := w.prepare(ctx, d)
	if err != nil {
		return "", err
	}
	p, err := binproc.Start(binproc.Config{Name: w.name, Path: w.binary, Args: args, LogPath: w.logPath(), Env: env})
	if err != nil {
		return "", err
	}
	w.proc.Store(p)
	w.starts.Add(1)
	r.cfg.Log.Info("stand-in machine runner: started", "deployment", w.namespace+"/"+w.deployment, "pid", p.PID(), "args", args)
	return digest, w.markPods(ctx, d)
}

// markPods reports the Deployment's pods of the running template as a kubelet reports a pod whose containers run
// and are ready: phase Running, the conditions PodScheduled, Initialized, ContainersReady and Ready True, every
// container running and ready. The pods are not bound to a node (the shoot has none); the ReplicaSet and Deployment
// controllers of the shoot count them, so the Deployment turns Available as with a real machine.
func (w *workload) markPods(ctx context.Context, d *appsv1.Deployment) error {
	sel, err := kmetav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return err
	}
	pods, err := w.r.client.CoreV1().Pods(w.namespace).List(ctx, kmetav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return err
	}
	var errs []error
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodRunning && podReady(p) {
			continue
		}
		now := kmetav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &now
		p.Status.PodIP, p.Status.PodIPs = "127.0.0.1", []corev1.PodIP{{IP: "127.0.0.1"}}
		p.Status.Conditions = nil
		for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		p.Status.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				Ready: true, Started: ptrTo(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
		if _, err := w.r.client.CoreV1().Pods(w.namespace).UpdateStatus(ctx, p, kmetav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ptrTo[T any](v T) *T { return &v }

func (w *workload) stop() {
	if p := w.proc.Load(); p != nil {
		if err := p.Stop(15 * time.Second); err != nil {
			w.r.cfg.Log.Warn("stand-in machine runner: stop", "deployment", w.namespace+"/"+w.deployment, "err", err)
		}
	}
}

// root is where the pod's file system is laid out.
func (w *workload) root() string { return filepath.Join(w.dir, "fs") }

// prepare writes the files of the container's volumes under root, rewrites the configuration file for the host and
// returns the process's arguments and environment.
func (w *workload) prepare(ctx context.Context, d *appsv1.Deployment) ([]string, []string, error) {
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return nil, nil, errors.New("the Deployment has no container")
	}
	c := d.Spec.Template.Spec.Containers[0]
	if err := os.RemoveAll(w.root()); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return nil, nil, err
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		volumes[v.Name] = v
	}
	var mounts []string
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return nil, nil, fmt.Errorf("volume %s of mount %s is not in the pod", m.Name, m.MountPath)
		}
		files, err := w.volumeFiles(ctx, v)
		if err != nil {
			return nil, nil, err
		}
		dir := filepath.Join(w.root(), m.MountPath)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, err
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				return nil, nil, err
			}
		}
		mounts = append(mounts, m.MountPath)
	}
	env := w.env(c)
	vars := map[string]string{}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		vars[k] = v
	}
	var args []string
	for _, a := range c.Args {
		a = expand(a, vars)
		flag, value, hasValue := strings.Cut(a, "=")
		switch {
		case flag == "--config" && hasValue && !w.kubeconfigFlag:
			path, err := w.hostConfig(w.hostPath(mounts, value), mounts)
			if err != nil {
				return nil, nil, err
			}
			a = flag + "=" + path
		case listenFlags[flag] && hasValue && value != "0":
			a = flag + "=127.0.0.1:0"
		case hasValue:
			a = flag + "=" + w.hostPath(mounts, value)
		}
		args = append(args, a)
	}
	if w.kubeconfigFlag {
		args = append(args, "--kubeconfig="+w.r.cfg.Kubeconfig)
	}
	return args, env, nil
}

// listenFlags are the flags of the agent's and the extensions' endpoints (health probes, metrics), which listen on
// loopback ports of the system's choice instead.
var listenFlags = map[string]bool{"--health-probes-address": true, "--metrics-address": true,
	"--health-probe-bind-address": true, "--metrics-bind-address": true}

// env is the container's environment as the pod would have it: its values, and of the downward API the pod's
// namespace and name (the Deployment's) and its IP (loopback).
func (w *workload) env(c corev1.Container) []string {
	env := []string{"POD_IP=127.0.0.1", "POD_NAMESPACE=" + w.namespace}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.namespace":
				env = append(env, e.Name+"="+w.namespace)
			case "metadata.name":
				env = append(env, e.Name+"="+w.deployment)
			case "status.podIP", "status.hostIP":
				env = append(env, e.Name+"=127.0.0.1")
			}
		}
	}
	return env
}

// expand replaces $(VAR) references of the container's environment in s, as the kubelet expands arguments.
func expand(s string, vars map[string]string) string {
	for k, v := range vars {
		s = strings.ReplaceAll(s, "$("+k+")", v)
	}
	return s
}

// volumeFiles are the files of a configMap or secret volume (its items, or every key); an optional source that is
// missing gives none; an emptyDir none.
func (w *workload) volumeFiles(ctx context.Context, v corev1.Volume) (map[string][]byte, error) {
	files := map[string][]byte{}
	pick := func(data map[string][]byte, items []corev1.KeyToPath) {
		if len(items) == 0 {
			for k, b := range data {
				files[k] = b
			}
			return
		}
		for _, it := range items {
			if b, ok := data[it.Key]; ok {
				files[it.Path] = b
			}
		}
	}
	switch {
	case v.ConfigMap != nil:
		cm, err := w.r.client.CoreV1().ConfigMaps(w.namespace).Get(ctx, v.ConfigMap.Name, kmetav1.GetOptions{})
		if apierrors.IsNotFound(err) && v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
			return files, nil
		} else if err != nil {
			return nil, fmt.Errorf("config map %s of volume %s: %w", v.ConfigMap.Name, v.Name, err)
		}
		data := map[string][]byte{}
		for k, s := range cm.Data {
			data[k] = []byte(s)
		}
		pick(data, v.ConfigMap.Items)
	case v.Secret != nil:
		s, err := w.r.client.CoreV1().Secrets(w.namespace).Get(ctx, v.Secret.SecretName, kmetav1.GetOptions{})
		if apierrors.IsNotFound(err) && v.Secret.Optional != nil && *v.Secret.Optional {
			return files, nil
		} else if err != nil {
			return nil, fmt.Errorf("secret %s of volume %s: %w", v.Secret.SecretName, v.Name, err)
		}
		pick(s.Data, v.Secret.Items)
	case v.EmptyDir != nil:
	default:
		return nil, fmt.Errorf("volume %s: only configMap, secret and emptyDir volumes are supported", v.Name)
	}
	return files, nil
}

// hostPath maps a path under one of the mount paths into root; other values are returned as they are.
func (w *workload) hostPath(mounts []string, p string) string {
	for _, m := range mounts {
		if p == m || strings.HasPrefix(p, strings.TrimSuffix(m, "/")+"/") {
			return filepath.Join(w.root(), p)
		}
	}
	return p
}

// hostConfig rewrites the agent's configuration file at path for the host: paths under the mounts into root, and
// the seed cluster reached through the runner's kubeconfig. It returns the rewritten file's path.
func (w *workload) hostConfig(path string, mounts []string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("the agent's configuration: %w", err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return "", fmt.Errorf("the agent's configuration: %w", err)
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			return w.hostPath(mounts, x)
		}
		return v
	}
	walk(cfg)
	seed, _ := cfg["seedClientConnection"].(map[string]any)
	if seed == nil {
		seed = map[string]any{}
		cfg["seedClientConnection"] = seed
	}
	seed["kubeconfig"] = w.r.cfg.Kubeconfig
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(w.dir, "config.yaml")
	return dst, os.WriteFile(dst, out, 0o600)
}
