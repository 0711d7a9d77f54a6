package machinestandin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
	// Interval is how often the shoot is looked at; default 500 ms.
	Interval time.Duration
	// Log receives the runner's logs; nil discards.
	Log *slog.Logger
}

// Runner runs the agent that a Deployment in a shoot describes, as a host process. Create it with New and run it
// with Run.
type Runner struct {
	cfg    Config
	client kubernetes.Interface
	proc   atomic.Pointer[binproc.Process]
	starts atomic.Int64
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
	return &Runner{cfg: cfg, client: cs}, nil
}

// Starts counts the agent's starts (a changed pod template restarts it).
func (r *Runner) Starts() int64 { return r.starts.Load() }

// Running reports whether the agent's process runs.
func (r *Runner) Running() bool {
	p := r.proc.Load()
	return p != nil && p.Running()
}

// LogPath is the agent's log file.
func (r *Runner) LogPath() string { return filepath.Join(r.cfg.Dir, r.cfg.Name+".log") }

// Run looks at the shoot every Interval until ctx ends: it starts the agent when the Deployment appears, restarts
// it when the pod template changes, and stops it when the Deployment is gone (or being deleted) or the shoot has a
// Node (a real machine runs the pod). It returns nil when
// ctx ends, once the process stopped.
func (r *Runner) Run(ctx context.Context) error {
	defer r.stop()
	var running string // the template's digest of the running process
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		digest, err := r.step(ctx, running)
		switch {
		case err != nil && ctx.Err() == nil:
			r.cfg.Log.Warn("stand-in machine runner: step failed", "deployment", r.cfg.Namespace+"/"+r.cfg.Deployment, "err", err)
		case err == nil:
			running = digest
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// step brings the process in line with the Deployment and returns the digest of the template it runs ("" for none).
func (r *Runner) step(ctx context.Context, running string) (string, error) {
	// A shoot with real machines (Nodes) runs the agent's pod itself: the stand-in has nothing to do.
	nodes, err := r.client.CoreV1().Nodes().List(ctx, kmetav1.ListOptions{Limit: 1})
	if err != nil {
		return running, err
	}
	if len(nodes.Items) > 0 {
		if running != "" || r.Running() {
			r.cfg.Log.Info("stand-in machine runner: the shoot has Nodes, which run the agent's pod; stopping the stand-in")
		}
		r.stop()
		return "", nil
	}
	d, err := r.client.AppsV1().Deployments(r.cfg.Namespace).Get(ctx, r.cfg.Deployment, kmetav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && (d.DeletionTimestamp != nil || d.Spec.Replicas != nil && *d.Spec.Replicas == 0)):
		if running != "" {
			r.cfg.Log.Info("stand-in machine runner: the Deployment is gone; stopping the agent")
		}
		r.stop()
		return "", nil
	case err != nil:
		return running, err
	}
	b, err := json.Marshal(d.Spec.Template)
	if err != nil {
		return running, err
	}
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	if digest == running && r.Running() {
		return running, nil
	}
	r.stop()
	args, err := r.prepare(ctx, d)
	if err != nil {
		return "", err
	}
	p, err := binproc.Start(binproc.Config{Name: r.cfg.Name, Path: r.cfg.Binary, Args: args, LogPath: r.LogPath(),
		Env: []string{"POD_IP=127.0.0.1", "POD_NAMESPACE=" + r.cfg.Namespace}})
	if err != nil {
		return "", err
	}
	r.proc.Store(p)
	r.starts.Add(1)
	r.cfg.Log.Info("stand-in machine runner: started the agent", "pid", p.PID(), "args", args)
	return digest, nil
}

func (r *Runner) stop() {
	if p := r.proc.Load(); p != nil {
		if err := p.Stop(15 * time.Second); err != nil {
			r.cfg.Log.Warn("stand-in machine runner: stop", "err", err)
		}
	}
}

// root is where the pod's file system is laid out.
func (r *Runner) root() string { return filepath.Join(r.cfg.Dir, "fs") }

// prepare writes the files of the container's volumes under root, rewrites the configuration file for the host and
// returns the agent's arguments.
func (r *Runner) prepare(ctx context.Context, d *appsv1.Deployment) ([]string, error) {
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return nil, errors.New("the Deployment has no container")
	}
	c := d.Spec.Template.Spec.Containers[0]
	if err := os.RemoveAll(r.root()); err != nil {
		return nil, err
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		volumes[v.Name] = v
	}
	var mounts []string
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("volume %s of mount %s is not in the pod", m.Name, m.MountPath)
		}
		files, err := r.volumeFiles(ctx, v)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(r.root(), m.MountPath)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				return nil, err
			}
		}
		mounts = append(mounts, m.MountPath)
	}
	var args []string
	for _, a := range c.Args {
		flag, value, hasValue := strings.Cut(a, "=")
		switch {
		case flag == "--config" && hasValue:
			path, err := r.hostConfig(r.hostPath(mounts, value), mounts)
			if err != nil {
				return nil, err
			}
			a = flag + "=" + path
		case (flag == "--health-probes-address" || flag == "--metrics-address") && hasValue:
			a = flag + "=127.0.0.1:0"
		case hasValue:
			a = flag + "=" + r.hostPath(mounts, value)
		}
		args = append(args, a)
	}
	return args, nil
}

// volumeFiles are the files of a configMap or secret volume (its items, or every key); an optional source that is
// missing gives none; an emptyDir none.
func (r *Runner) volumeFiles(ctx context.Context, v corev1.Volume) (map[string][]byte, error) {
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
		cm, err := r.client.CoreV1().ConfigMaps(r.cfg.Namespace).Get(ctx, v.ConfigMap.Name, kmetav1.GetOptions{})
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
		s, err := r.client.CoreV1().Secrets(r.cfg.Namespace).Get(ctx, v.Secret.SecretName, kmetav1.GetOptions{})
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
func (r *Runner) hostPath(mounts []string, p string) string {
	for _, m := range mounts {
		if p == m || strings.HasPrefix(p, strings.TrimSuffix(m, "/")+"/") {
			return filepath.Join(r.root(), p)
		}
	}
	return p
}

// hostConfig rewrites the agent's configuration file at path for the host: paths under the mounts into root, and
// the seed cluster reached through the runner's kubeconfig. It returns the rewritten file's path.
func (r *Runner) hostConfig(path string, mounts []string) (string, error) {
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
			return r.hostPath(mounts, x)
		}
		return v
	}
	walk(cfg)
	seed, _ := cfg["seedClientConnection"].(map[string]any)
	if seed == nil {
		seed = map[string]any{}
		cfg["seedClientConnection"] = seed
	}
	seed["kubeconfig"] = r.cfg.Kubeconfig
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(r.cfg.Dir, "config.yaml")
	return dst, os.WriteFile(dst, out, 0o600)
}
