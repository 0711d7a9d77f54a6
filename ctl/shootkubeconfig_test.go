package ctl_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/hub"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/test/hubtest"
	"google.golang.org/protobuf/proto"
)

// TestShootKubeconfig: trellisctl shoot kubeconfig asks the hub for the landscape example's admin or viewer
// kubeconfig and prints it or writes it; the hub's refusals reach the user.
func TestShootKubeconfig(t *testing.T) {
	h := hubtest.Start(t, hubtest.WithoutControllers("shoot-maintenance", "shoot-hibernation"), func(c *hub.Config) {
		c.DisableScheduler = true
		c.TunnelAdvertiseAddress = "127.0.0.1:9445"
	})
	h.RegisterExtensions(t, "provider-local", hubtest.LocalExtensions()...) // the examples' types
	c := newCLI(t, h)
	c.ok("apply", "-f", "../test/landscape/examples")

	contains(t, "unscheduled", c.fails("shoot", "kubeconfig", "local", "-p", "local"), "not scheduled to a seed yet")
	shoots, _ := h.Registry().Collection(schema.GroupResource{Group: "core.gardener.cloud", Resource: "shoots"})
	for i := 0; ; i++ { // the hub's controllers write the shoot too
		o, err := shoots.Get(context.Background(), "garden-local", "local")
		if err != nil {
			t.Fatal(err)
		}
		s := proto.Clone(o).(*corev1beta1.Shoot)
		s.Spec.SeedName = proto.String("local")
		if _, err = shoots.Update(context.Background(), s); err == nil {
			break
		} else if i == 10 {
			t.Fatal(err)
		}
	}
	contains(t, "no client CA", c.fails("shoot", "kubeconfig", "local", "-n", "garden-local"), "the shoot's client CA is not published yet")
	cluster, client := hubtest.NewCA(t, "ca-cluster", false), hubtest.NewCA(t, "ca-client", false)
	h.PublishShootCAs(t, "garden-local", "local", cluster, &client)
	contains(t, "short", c.fails("shoot", "kubeconfig", "local", "-p", "local", "--duration", "5m"), "--duration: at least 10m")

	check := func(raw []byte, group string, d time.Duration) {
		t.Helper()
		cfg, err := clientcmd.Load(raw)
		if err != nil {
			t.Fatalf("kubeconfig: %v\n%s", err, raw)
		}
		cl := cfg.Clusters["garden-local--local-external"]
		if cl == nil || cl.Server != "https://127.0.0.1:9445" || cl.TLSServerName != "api.local.local.tunnel.trellis.local" {
			t.Fatalf("cluster: %+v", cl)
		}
		block, _ := pem.Decode(cfg.AuthInfos["garden-local--local"].ClientCertificateData)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(cert.Subject.Organization, ",") != group || cert.CheckSignatureFrom(client.Cert) != nil {
			t.Errorf("certificate %s, want group %s, signed by the client CA", cert.Subject, group)
		}
		if want := time.Now().Add(d); cert.NotAfter.Before(want.Add(-time.Minute)) || cert.NotAfter.After(want.Add(time.Minute)) {
			t.Errorf("NotAfter %s, want about %s", cert.NotAfter, want)
		}
	}
	check([]byte(c.ok("shoot", "kubeconfig", "local", "-p", "local")), "system:masters", time.Hour)
	file := filepath.Join(t.TempDir(), "shoot.kubeconfig")
	if out := c.ok("shoot", "kubeconfig", "local", "-n", "garden-local", "--viewer", "--duration", "30m", "-o", file); out != "" {
		t.Errorf("with -o, stdout: %q", out)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig file mode %v", fi.Mode().Perm())
	}
	check(raw, "gardener.cloud:system:viewers", 30*time.Minute)
}
