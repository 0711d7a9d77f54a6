package helmrelease

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/test/seedtest"
)

// The seed tests share one real kube-apiserver (with kube-controller-manager: deployment and replica set
// controllers, no nodes) and keep apart by namespace; the other tests do not start it.
func TestMain(m *testing.M) { seedtest.Main(m) }

// chartFiles are the files of a chart by path in its directory.
type chartFiles map[string]string

// buildChart writes files into a chart directory named name under a temporary directory and returns the directory
// packed as Helm packs it: a gzipped tar whose entries are under name/.
func buildChart(t testing.TB, name string, files chartFiles) []byte {
	t.Helper()
	root := filepath.Join(t.TempDir(), name)
	for path, content := range files {
		p := filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(filepath.Dir(root), path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// chartYAML is a Chart.yaml.
func chartYAML(name, version string) string {
	return "apiVersion: v2\nname: " + name + "\nversion: " + version + "\ntype: application\n"
}

// configMapChart is a chart with one ConfigMap, named after the release, whose data.greeting is .Values.greeting.
func configMapChart(t testing.TB, version string, extra chartFiles) []byte {
	files := chartFiles{
		"Chart.yaml":  chartYAML("ext", version),
		"values.yaml": "greeting: default\n",
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
  labels:
    chart: {{ .Chart.Name }}-{{ .Chart.Version }}
data:
  greeting: {{ .Values.greeting | quote }}
`,
	}
	for k, v := range extra {
		files[k] = v
	}
	return buildChart(t, "ext", files)
}

// deploymentChart is a chart with a Deployment named after the release with .Values.replicas replicas of an image
// that is never pulled (the seed has no nodes).
func deploymentChart(t testing.TB) []byte {
	return buildChart(t, "workload", chartFiles{
		"Chart.yaml":  chartYAML("workload", "1.0.0"),
		"values.yaml": "replicas: 1\n",
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels:
      app: {{ .Release.Name }}
  template:
    metadata:
      labels:
        app: {{ .Release.Name }}
    spec:
      containers:
      - name: main
        image: registry.invalid/none:1
`,
	})
}

// testLog logs to the test's output (shown with -v or when the test fails), Helm's debug lines included.
func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newSeedManager returns a Manager for the shared seed, with cfg's other fields.
func newSeedManager(t testing.TB, cfg Config) (*Manager, *seedtest.Seed) {
	t.Helper()
	s := seedtest.StartShared(t)
	cfg.REST = s.Config
	if cfg.Log == nil {
		cfg.Log = testLog(t)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// newOfflineManager returns a Manager whose seed does not exist, for what needs none (Render, Fetch).
func newOfflineManager(t testing.TB, cfg Config) *Manager {
	t.Helper()
	cfg.REST = &rest.Config{Host: "https://127.0.0.1:1"}
	if cfg.Log == nil {
		cfg.Log = testLog(t)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// eventually polls cond every 200 ms until it returns "" or timeout passes, then fails with its last answer.
func eventually(t testing.TB, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
