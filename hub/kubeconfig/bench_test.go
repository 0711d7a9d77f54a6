package kubeconfig_test

import (
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub/kubeconfig"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// BenchmarkIssue: what one kubeconfig costs the hub past its reads: parsing the shoot's client CA (RSA, as the
// agent's), a new ECDSA key, the signature and the kubeconfig's YAML.
func BenchmarkIssue(b *testing.B) {
	client, cluster := hubtest.NewCA(b, "ca-client", true), hubtest.NewCA(b, "ca-cluster", true)
	b.ReportAllocs()
	for b.Loop() {
		ca, err := kubeconfig.ParseCA(client.CertPEM, client.KeyPEM)
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		certPEM, keyPEM, _, err := kubeconfig.IssueClientCert(ca, "user", kubeconfig.GroupAdmins, now, now.Add(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := kubeconfig.Build(kubeconfig.Kubeconfig{Namespace: "garden-dev", Shoot: "local", Server: "https://127.0.0.1:8445",
			ServerName: "api.local.dev.tunnel.trellis.local", CA: cluster.CertPEM, CertPEM: certPEM, KeyPEM: keyPEM}); err != nil {
			b.Fatal(err)
		}
	}
}
