package hub_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	certificatesv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1"
	coordinationv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/coordination/v1"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// linkEnv is a hub whose gRPC-only listener is in memory (bufconn), with fast heartbeats, and a dialer for agents.
type linkEnv struct {
	t        *testing.T
	h        *hubtest.Hub
	dialer   agentsim.Dialer
	registry *api.Registry // the hub's
	lis      *bufconn.Listener
}

func startLink(t *testing.T) *linkEnv {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	h := hubtest.Start(t, func(c *hub.Config) {
		c.GRPCListener = lis // agents use the gRPC-only listener, in memory
		c.HeartbeatInterval = 200 * time.Millisecond
	})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(h.CA)
	return &linkEnv{t: t, h: h, registry: h.Registry(), lis: lis, dialer: agentsim.Dialer{
		Target: "passthrough:///bufnet", CA: pool,
		Options: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })},
	}}
}

func (e *linkEnv) coll(group, resource string) *store.Collection {
	c, ok := e.registry.Collection(schema.GroupResource{Group: group, Resource: resource})
	if !ok {
		e.t.Fatalf("no collection %s.%s", resource, group)
	}
	return c
}

func (e *linkEnv) create(group, resource string, obj store.Object) store.Object {
	e.t.Helper()
	out, err := e.coll(group, resource).Create(context.Background(), obj)
	if err != nil {
		e.t.Fatalf("create %s %s: %v", resource, obj.GetMetadata().GetName(), err)
	}
	return out
}

func (e *linkEnv) token(seed string, expires time.Time) string {
	e.t.Helper()
	tok, err := auth.NewSeedBootstrapToken(seed, expires)
	if err != nil {
		e.t.Fatal(err)
	}
	e.create("", "secrets", tok.SecretObject())
	return tok.Token()
}

func (e *linkEnv) agent(seed string) *agentsim.Agent {
	e.t.Helper()
	cert, err := agentsim.Bootstrap(context.Background(), e.dialer, e.token(seed, time.Now().Add(time.Hour)), seed, nil, nil)
	if err != nil {
		e.t.Fatalf("bootstrap %s: %v", seed, err)
	}
	return &agentsim.Agent{Seed: seed, Dialer: e.dialer, Cert: cert, HeartbeatInterval: 100 * time.Millisecond, KeepObjects: true}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func rvOf(o store.Object) int64 {
	rv, _ := strconv.ParseInt(o.GetMetadata().GetResourceVersion(), 10, 64)
	return rv
}

// expected computes, from the store and independently of the seed graph, what an agent of seed holds for the
// fixtures' kinds: its Seed, shoots with spec.seedName or status.seedName = seed, their secret bindings, the
// bindings' secrets and their cloud profiles.
func (e *linkEnv) expected(seed string) map[string]map[string]int64 {
	ctx := context.Background()
	out := map[string]map[string]int64{}
	put := func(res, key string, o store.Object) {
		if out[res] == nil {
			out[res] = map[string]int64{}
		}
		out[res][key] = rvOf(o)
	}
	if s, err := e.coll("core.gardener.cloud", "seeds").Get(ctx, "", seed); err == nil {
		put("seeds.core.gardener.cloud", seed, s)
	}
	shoots, err := e.coll("core.gardener.cloud", "shoots").List(ctx, "", store.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, o := range shoots.Items {
		sh := o.(*corev1beta1.Shoot)
		if sh.GetSpec().GetSeedName() != seed && sh.GetStatus().GetSeedName() != seed {
			continue
		}
		ns := sh.GetMetadata().GetNamespace()
		put("shoots.core.gardener.cloud", ns+"/"+sh.GetMetadata().GetName(), sh)
		if b, err := e.coll("core.gardener.cloud", "secretbindings").Get(ctx, ns, sh.GetSpec().GetSecretBindingName()); err == nil {
			put("secretbindings.core.gardener.cloud", ns+"/"+b.GetMetadata().GetName(), b)
			ref := b.(*corev1beta1.SecretBinding).GetSecretRef()
			if s, err := e.coll("", "secrets").Get(ctx, ref.GetNamespace(), ref.GetName()); err == nil {
				put("secrets", ref.GetNamespace()+"/"+ref.GetName(), s)
			}
		}
		if cp, err := e.coll("core.gardener.cloud", "cloudprofiles").Get(ctx, "", sh.GetSpec().GetCloudProfileName()); err == nil {
			put("cloudprofiles.core.gardener.cloud", cp.GetMetadata().GetName(), cp)
		}
	}
	// The seed's ControllerInstallations (the hub makes them for registered extension types its shoots use) with
	// their registrations and deployments.
	cis, err := e.coll("core.gardener.cloud", "controllerinstallations").List(ctx, "", store.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, o := range cis.Items {
		ci := o.(*corev1beta1.ControllerInstallation)
		if ci.GetSpec().GetSeedRef().GetName() != seed {
			continue
		}
		put("controllerinstallations.core.gardener.cloud", ci.GetMetadata().GetName(), ci)
		if r, err := e.coll("core.gardener.cloud", "controllerregistrations").Get(ctx, "", ci.GetSpec().GetRegistrationRef().GetName()); err == nil {
			put("controllerregistrations.core.gardener.cloud", r.GetMetadata().GetName(), r)
		}
		if n := ci.GetSpec().GetDeploymentRef().GetName(); n != "" {
			if d, err := e.coll("core.gardener.cloud", "controllerdeployments").Get(ctx, "", n); err == nil {
				put("controllerdeployments.core.gardener.cloud", n, d)
			}
		}
	}
	return out
}

func equalState(a, b map[string]map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for r, m := range a {
		if len(m) != len(b[r]) {
			return false
		}
		for k, v := range m {
			if w, ok := b[r][k]; !ok || w != v {
				return false
			}
		}
	}
	return true
}

func (e *linkEnv) run(a *agentsim.Agent) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	return func() { cancel(); <-done }
}

func TestAgentLinkBootstrapSessionAssignments(t *testing.T) {
	e := startLink(t)
	ctx := context.Background()
	for _, s := range []string{"a", "b"} {
		e.create("core.gardener.cloud", "seeds", agentsim.Seed(s))
	}
	e.create("core.gardener.cloud", "cloudprofiles", agentsim.CloudProfile("local"))
	for _, b := range []string{"creds-a", "creds-b"} {
		e.create("", "secrets", agentsim.Secret("garden-dev", b))
		e.create("core.gardener.cloud", "secretbindings", agentsim.SecretBinding("garden-dev", b))
	}
	e.create("core.gardener.cloud", "shoots", agentsim.Shoot("garden-dev", "one", "a", "creds-a", "local"))
	e.create("core.gardener.cloud", "shoots", agentsim.Shoot("garden-dev", "other", "b", "creds-b", "local"))

	// Bootstrap: the token buys one certificate, then it is gone.
	token := e.token("a", time.Now().Add(time.Hour))
	cert, err := agentsim.Bootstrap(ctx, e.dialer, token, "a", nil, nil)
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	if leaf.Subject.CommonName != "gardener.cloud:system:seed:a" || !slices.Equal(leaf.Subject.Organization, []string{"gardener.cloud:system:seeds"}) {
		t.Fatalf("certificate subject %v", leaf.Subject)
	}
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Fatalf("certificate lacks client auth: %v", leaf.ExtKeyUsage)
	}
	if _, err := agentsim.Bootstrap(ctx, e.dialer, token, "a", nil, nil); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("reusing a consumed bootstrap token: got %v, want Unauthenticated", err)
	}

	// Session: the agent of a receives a's objects, never b's.
	a := &agentsim.Agent{Seed: "a", Dialer: e.dialer, Cert: cert, HeartbeatInterval: 100 * time.Millisecond, KeepObjects: true}
	e.run(a)
	select {
	case <-a.Synced():
	case <-time.After(20 * time.Second):
		t.Fatal("agent did not sync")
	}
	eventually(t, "agent a holds exactly seed a's objects", func() bool { return equalState(a.Snapshot(), e.expected("a")) })
	if _, ok := a.Snapshot()["shoots.core.gardener.cloud"]["garden-dev/other"]; ok {
		t.Fatal("agent of seed a received a shoot of seed b")
	}
	if _, ok := a.Snapshot()["secrets"]["garden-dev/creds-b"]; ok {
		t.Fatal("agent of seed a received a secret only seed b's shoot references")
	}
	sec, ok := a.Object("secrets", "garden-dev/creds-a")
	if !ok || string(sec.Message.ProtoReflect().Interface().(interface{ GetData() map[string][]byte }).GetData()["token"]) != "s3cr3t-creds-a" {
		t.Fatalf("secret data did not arrive decrypted: %+v", sec)
	}

	// Heartbeats keep the Seed ready, its certificate expiry recorded, and its Lease present.
	eventually(t, "GardenletReady=True and the certificate expiry on Seed a", func() bool {
		s, err := e.coll("core.gardener.cloud", "seeds").Get(ctx, "", "a")
		if err != nil {
			return false
		}
		st := s.(*corev1beta1.Seed).GetStatus()
		for _, c := range st.GetConditions() {
			if c.GetType() == "GardenletReady" && c.GetStatus() == "True" {
				return st.GetClientCertificateExpirationTimestamp().GetSeconds() == leaf.NotAfter.Unix()
			}
		}
		return false
	})
	eventually(t, "the seed's Lease", func() bool {
		l, err := e.coll("coordination.k8s.io", "leases").Get(ctx, "gardener-system-seed-lease", "a")
		return err == nil && l.(*coordinationv1.Lease).GetSpec().GetHolderIdentity() == "a"
	})
	l, _ := e.coll("coordination.k8s.io", "leases").Get(ctx, "gardener-system-seed-lease", "a")
	if d := l.(*coordinationv1.Lease).GetSpec().GetLeaseDurationSeconds(); d != 1 {
		t.Fatalf("leaseDurationSeconds = %d with a 200ms heartbeat; want 1 (whole seconds, at least one)", d)
	}

	// Changes flow: a modified shoot, a shoot moving in and out, a deleted binding.
	shoots := e.coll("core.gardener.cloud", "shoots")
	mod := func(name, seed string) {
		_, err := shoots.GuaranteedUpdate(ctx, "garden-dev", name, false, func(cur store.Object) (store.Object, error) {
			s := cur.(*corev1beta1.Shoot)
			s.Spec.SeedName = proto.String(seed)
			s.Metadata.Labels = map[string]string{"touched": strconv.FormatInt(time.Now().UnixNano(), 10)}
			return s, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	mod("one", "a")
	mod("other", "a")
	eventually(t, "shoot other moved to a, with its binding and secret", func() bool {
		_, ok := a.Snapshot()["secrets"]["garden-dev/creds-b"]
		return ok && equalState(a.Snapshot(), e.expected("a"))
	})
	mod("other", "b")
	eventually(t, "shoot other moved back to b and its references dropped", func() bool {
		_, ok := a.Snapshot()["secrets"]["garden-dev/creds-b"]
		return !ok && equalState(a.Snapshot(), e.expected("a"))
	})
}

func TestAgentLinkBootstrapRefusals(t *testing.T) {
	e := startLink(t)
	ctx := context.Background()
	cases := []struct {
		name   string
		token  func() string
		seed   string
		usages []string
		mutate func(*x509.CertificateRequest)
		code   codes.Code
		msg    string
	}{
		{name: "expired token", token: func() string { return e.token("a", time.Now().Add(-time.Minute)) }, seed: "a", code: codes.Unauthenticated, msg: "expired"},
		{name: "unknown token", token: func() string { return "abcdef.0123456789abcdef" }, seed: "a", code: codes.Unauthenticated},
		{name: "CN of another seed", token: func() string { return e.token("a", time.Now().Add(time.Hour)) }, seed: "b", code: codes.PermissionDenied, msg: `is for seed "a", not "b"`},
		{name: "extra SANs", token: func() string { return e.token("a", time.Now().Add(time.Hour)) }, seed: "a", code: codes.PermissionDenied, msg: "subject alternative names",
			mutate: func(r *x509.CertificateRequest) { r.DNSNames = []string{"evil.example.com"} }},
		{name: "URI SAN", token: func() string { return e.token("a", time.Now().Add(time.Hour)) }, seed: "a", code: codes.PermissionDenied, msg: "subject alternative names",
			mutate: func(r *x509.CertificateRequest) { r.URIs = []*url.URL{{Scheme: "spiffe", Host: "x"}} }},
		{name: "wrong usages", token: func() string { return e.token("a", time.Now().Add(time.Hour)) }, seed: "a", code: codes.PermissionDenied, msg: "usages",
			usages: []string{"digital signature", "key encipherment", "client auth", "server auth"}},
		{name: "wrong organization", token: func() string { return e.token("a", time.Now().Add(time.Hour)) }, seed: "a", code: codes.PermissionDenied, msg: "organization",
			mutate: func(r *x509.CertificateRequest) { r.Subject.Organization = []string{"system:masters"} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := agentsim.Bootstrap(ctx, e.dialer, c.token(), c.seed, c.usages, c.mutate)
			if status.Code(err) != c.code || !strings.Contains(status.Convert(err).Message(), c.msg) {
				t.Fatalf("got %v, want %s containing %q", err, c.code, c.msg)
			}
		})
	}
	// Refused requests stay recorded, unapproved and unsigned.
	res, err := e.coll("certificates.k8s.io", "certificatesigningrequests").List(ctx, "", store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 5 {
		t.Fatalf("want the 5 refused CSRs recorded, got %d", len(res.Items))
	}
	for _, o := range res.Items {
		c := o.(*certificatesv1.CertificateSigningRequest)
		if len(c.GetStatus().GetCertificate()) > 0 || len(c.GetStatus().GetConditions()) > 0 {
			t.Fatalf("refused CSR %s was approved or signed: %v", c.GetMetadata().GetName(), c.GetStatus())
		}
	}
	// The tokens of refused requests were not consumed: the right request still works with one.
	tok := e.token("a", time.Now().Add(time.Hour))
	if _, err := agentsim.Bootstrap(ctx, e.dialer, tok, "b", nil, nil); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("wrong seed: %v", err)
	}
	if _, err := agentsim.Bootstrap(ctx, e.dialer, tok, "a", nil, nil); err != nil {
		t.Fatalf("a refused request must not consume the token: %v", err)
	}
	// A client certificate cannot be used to talk as another seed.
	a := e.agent("a")
	a.Seed = "b"
	if err := a.Session(ctx); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("hello for seed b with seed a's certificate: %v", err)
	}
}

func dialRaw(e *linkEnv, a *agentsim.Agent) (*grpc.ClientConn, error) {
	pool := e.dialer.CA
	tc := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{a.Cert}}
	return grpc.NewClient(e.dialer.Target, append([]grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc))}, e.dialer.Options...)...)
}
