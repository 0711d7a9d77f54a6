package garden_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trellis-dev/trellis/extsdk/garden"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// TestGardenAccess reaches a real hub with each way of configuring the access.
func TestGardenAccess(t *testing.T) {
	h := hubtest.Start(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	profile := &corev1beta1.CloudProfile{
		Metadata: &metav1.ObjectMeta{Name: "garden-test"},
		Spec: &corev1beta1.CloudProfileSpec{
			Type:       "local",
			Kubernetes: &corev1beta1.KubernetesSettings{Versions: []*corev1beta1.ExpirableVersion{{Version: "1.35.4"}}},
			MachineImages: []*corev1beta1.MachineImage{{Name: "img", Versions: []*corev1beta1.MachineImageVersion{{
				Version: "1.0.0", Cri: []*corev1beta1.CRI{{Name: "containerd"}}, Architectures: []string{"amd64"},
			}}}},
			MachineTypes: []*corev1beta1.MachineType{{Name: "local", Cpu: "1", Gpu: "0", Memory: "1Gi"}},
			Regions:      []*corev1beta1.Region{{Name: "local"}},
		},
	}
	readProfile := func(t *testing.T, g *garden.Client) error {
		t.Helper()
		p, err := g.CloudProfiles.Get(ctx, &metav1.GetRequest{Name: "garden-test"})
		if err == nil && p.GetSpec().GetType() != "local" {
			err = fmt.Errorf("read back %v", p)
		}
		return err
	}

	// Plain Config; the address may be a URL.
	g, err := garden.New(garden.Config{Address: h.URL, CA: h.CA, Token: h.Token, SeedName: "local"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.CloudProfiles.Create(ctx, profile); err != nil {
		t.Fatal(err)
	}
	if err := readProfile(t, g); err != nil {
		t.Fatal(err)
	}

	// TRELLIS_* as trellisctl reads them.
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, h.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(garden.EnvHub, h.URL)
	t.Setenv(garden.EnvCA, caFile)
	t.Setenv(garden.EnvToken, h.Token)
	t.Setenv(garden.EnvSeedName, "local")
	cfg, err := garden.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SeedName != "local" {
		t.Errorf("seed name %q", cfg.SeedName)
	}
	g2, err := garden.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	if err := readProfile(t, g2); err != nil {
		t.Fatal(err)
	}

	// GARDEN_KUBECONFIG with a token file, as Gardener injects it; the file is read again when it changes.
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(h.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: garden
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: extension
  user:
    tokenFile: token
contexts:
- name: garden
  context: {cluster: garden, user: extension}
current-context: garden
`, h.URL, base64.StdEncoding.EncodeToString(h.CA)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(garden.EnvHub, "")
	t.Setenv(garden.EnvGardenKubeconfig, kubeconfig)
	if cfg, err = garden.ConfigFromEnv(); err != nil {
		t.Fatal(err)
	}
	g3, err := garden.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g3.Close()
	if err := readProfile(t, g3); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte("rotated-but-wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := readProfile(t, g3); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("with a wrong token in the file: %v, want Unauthenticated", err)
	}
	if err := os.WriteFile(tokenFile, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := readProfile(t, g3); err != nil {
		t.Fatalf("after rotating back: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, cfg := range map[string]garden.Config{
		"no address":         {Token: "x"},
		"no credentials":     {Address: "hub:443"},
		"token and cert":     {Address: "hub:443", Token: "x", ClientCert: []byte("c"), ClientKey: []byte("k")},
		"cert without key":   {Address: "hub:443", ClientCert: []byte("c")},
		"garbage CA":         {Address: "hub:443", Token: "x", CA: []byte("not pem")},
		"garbage client key": {Address: "hub:443", ClientCert: []byte("c"), ClientKey: []byte("k")},
	} {
		if _, err := garden.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	t.Setenv(garden.EnvHub, "")
	t.Setenv(garden.EnvGardenKubeconfig, "")
	if _, err := garden.ConfigFromEnv(); err == nil {
		t.Error("ConfigFromEnv without any variable succeeded")
	}
}
