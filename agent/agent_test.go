package agent_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1k "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/agent/identity"
	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	certificatesv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1"
	"github.com/trellis-dev/trellis/proto/resources"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/faultproxy"
)

const seedUser = "gardener.cloud:system:seed:local"

// shootFixtures are a cloud profile and, in namespace garden, shoots on seed "local", each with a secret binding and
// a secret of its own name.
func shootFixtures(shoots ...string) []store.Object {
	objs := []store.Object{agentsim.CloudProfile("local")}
	for _, name := range shoots {
		objs = append(objs, agentsim.Secret("garden", name), agentsim.SecretBinding("garden", name),
			agentsim.Shoot("garden", name, "local", name, "local"))
	}
	return objs
}

// expectedCache is what the hub holds for seed "local", given its shoots (from shootFixtures), in the form of
// cache.Snapshot: the Seed (once registered), the cloud profile, each shoot with its binding and secret, and the
// seed's ControllerInstallations with their registrations (the hub makes one of agenttest's registration of
// provider-local's types).
func (e *env) expectedCache(t *testing.T, shoots ...string) map[string]map[string]int64 {
	t.Helper()
	want := map[string]map[string]int64{
		resources.CloudProfiles: {"local": e.rv(t, "core.gardener.cloud", "cloudprofiles", "", "local")},
	}
	cis, err := e.hub.Collection(t, "core.gardener.cloud", "controllerinstallations").List(context.Background(), "", store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range cis.Items {
		ci := o.(*corev1beta1.ControllerInstallation)
		if ci.GetSpec().GetSeedRef().GetName() != "local" {
			continue
		}
		if want[resources.ControllerInstallations] == nil {
			want[resources.ControllerInstallations], want[resources.ControllerRegistrations] = map[string]int64{}, map[string]int64{}
		}
		want[resources.ControllerInstallations][ci.GetMetadata().GetName()] = e.rv(t, "core.gardener.cloud", "controllerinstallations", "", ci.GetMetadata().GetName())
		reg := ci.GetSpec().GetRegistrationRef().GetName()
		want[resources.ControllerRegistrations][reg] = e.rv(t, "core.gardener.cloud", "controllerregistrations", "", reg)
	}
	if rv := e.rv(t, "core.gardener.cloud", "seeds", "", "local"); rv != 0 {
		want[resources.Seeds] = map[string]int64{"local": rv}
	}
	for _, name := range shoots {
		for _, r := range []struct{ resource, group, hubResource string }{
			{resources.Shoots, "core.gardener.cloud", "shoots"},
			{resources.SecretBindings, "core.gardener.cloud", "secretbindings"},
			{resources.Secrets, "", "secrets"},
		} {
			if want[r.resource] == nil {
				want[r.resource] = map[string]int64{}
			}
			want[r.resource]["garden/"+name] = e.rv(t, r.group, r.hubResource, "garden", name)
		}
	}
	return want
}

// waitCache waits until the agent's cache holds exactly what the hub holds for the seed.
func (e *env) waitCache(t *testing.T, ta *agenttest.Agent, shoots ...string) {
	t.Helper()
	var diff string
	deadline := time.Now().Add(agenttest.WaitTimeout)
	for {
		if diff = cmp.Diff(e.expectedCache(t, shoots...), ta.Cache().Snapshot()); diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache differs from the hub (-hub +agent):\n%s", diff)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) hubSeed(t *testing.T) *corev1beta1.Seed {
	t.Helper()
	o, err := e.hub.Collection(t, "core.gardener.cloud", "seeds").Get(context.Background(), "", "local")
	if err != nil {
		t.Fatal(err)
	}
	return o.(*corev1beta1.Seed)
}

func gardenletReady(s *corev1beta1.Seed) bool {
	for _, c := range s.GetStatus().GetConditions() {
		if c.GetType() == "GardenletReady" && c.GetStatus() == "True" {
			return true
		}
	}
	return false
}

func certOf(t *testing.T, c *certificatesv1.CertificateSigningRequest) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(c.GetStatus().GetCertificate())
	if b == nil {
		t.Fatalf("CSR %s holds no certificate", c.GetMetadata().GetName())
	}
	x, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// sessionsEstablished is the agent's "session established" log records.
func sessionsEstablished(ta *agenttest.Agent) []agenttest.LogRecord {
	return ta.Logs.Records("session established")
}

// failures is the errors of the agent's failed connection attempts and sessions, as logged.
func failures(ta *agenttest.Agent) []error {
	var out []error
	for _, r := range ta.Logs.Records("hub connection failed; retrying") {
		if err, ok := r.Attrs["err"].Any().(error); ok {
			out = append(out, err)
		}
	}
	return out
}

// TestBootstrapSessionSyncAndRegistration: an agent without credentials bootstraps with a token, stores its
// kubeconfig in the seed as gardenlet does (garden/gardenlet-kubeconfig), opens a session with the new certificate,
// syncs its seed's objects into the cache, registers its Seed, heartbeats the seed's health and follows changes.
func TestBootstrapSessionSyncAndRegistration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.hub.Store(t, shootFixtures("a", "b")...)

	// The default kubeconfig Secret, garden/gardenlet-kubeconfig; earlier runs in this process may have left one.
	_, err := e.seed.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1k.ObjectMeta{Name: "garden"}}, metav1k.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	deleteSecret := func() {
		err := e.seed.Client.CoreV1().Secrets("garden").Delete(ctx, "gardenlet-kubeconfig", metav1k.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
	deleteSecret()
	t.Cleanup(deleteSecret)
	cfg := e.config(t)
	cfg.HubClientConnection.KubeconfigSecret = config.SecretReference{}

	// The agent reaches its seed through a proxy, to make the seed unreachable later on.
	seedURL, err := url.Parse(e.seed.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	seedProxy, err := faultproxy.Listen(seedURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = seedProxy.Close() })
	seedCfg := rest.CopyConfig(e.seed.Config)
	seedCfg.Host = "https://" + seedProxy.Addr()
	cfg.SeedClientConnection.Kubeconfig = ""
	ta := agenttest.StartAgent(t, cfg, func(c *agent.Config) { c.SeedRESTConfig = seedCfg })

	agenttest.Eventually(t, "connected", ta.Connected)
	wctx, cancel := context.WithTimeout(ctx, agenttest.WaitTimeout)
	defer cancel()
	if err := ta.Cache().WaitForSync(wctx); err != nil {
		t.Fatal(err)
	}
	e.waitCache(t, ta, "a", "b")
	if n := ta.Status().CSRsSent; n != 1 {
		t.Fatalf("CSRs sent = %d, want 1", n)
	}

	// The kubeconfig Secret: Gardener's layout, the hub's address and CA, the client certificate and key.
	sec := e.secret(t, "garden")
	kc, err := clientcmd.Load(sec.Data["kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	if kc.CurrentContext != "gardenlet" || kc.Contexts["gardenlet"] == nil || kc.Contexts["gardenlet"].Cluster != "gardenlet" || kc.Contexts["gardenlet"].AuthInfo != "gardenlet" {
		t.Fatalf("kubeconfig contexts: current %q, %+v", kc.CurrentContext, kc.Contexts)
	}
	if kc.Clusters["gardenlet"] == nil || kc.AuthInfos["gardenlet"] == nil {
		t.Fatalf("kubeconfig clusters %v, users %v", kc.Clusters, kc.AuthInfos)
	}
	if got, want := kc.Clusters["gardenlet"].Server, "https://"+e.proxy.Addr(); got != want {
		t.Fatalf("server = %q, want %q", got, want)
	}
	if string(kc.Clusters["gardenlet"].CertificateAuthorityData) != string(e.hub.CA) ||
		len(kc.AuthInfos["gardenlet"].ClientCertificateData) == 0 || len(kc.AuthInfos["gardenlet"].ClientKeyData) == 0 {
		t.Fatal("the kubeconfig lacks the hub's CA, the client certificate or the client key")
	}
	creds, err := identity.ParseKubeconfig(sec.Data["kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	if err := creds.CheckSubject("local"); err != nil {
		t.Fatal(err)
	}
	if !ta.CertificateNotAfter().Equal(creds.NotAfter()) {
		t.Fatalf("CertificateNotAfter %v, the stored certificate's %v", ta.CertificateNotAfter(), creds.NotAfter())
	}
	// The stored certificate verifies against the hub's CA for client authentication.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.hub.CA)
	if _, err := creds.Certificate.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the stored certificate does not verify: %v", err)
	}

	// The hub recorded one CSR, from the bootstrap token, for the seed's subject, Kubernetes' usages and the
	// configured validity, and signed it with the stored certificate.
	csrs := e.csrs(t)
	if len(csrs) != 1 {
		t.Fatalf("%d CSRs in the hub, want 1", len(csrs))
	}
	spec := csrs[0].GetSpec()
	if !strings.HasPrefix(spec.GetUsername(), "system:bootstrap:") || spec.GetExpirationSeconds() != int32(config.DefaultValidity/time.Second) ||
		!cmp.Equal(spec.GetUsages(), identity.Usages) {
		t.Fatalf("CSR spec: user %q, expirationSeconds %d, usages %v", spec.GetUsername(), spec.GetExpirationSeconds(), spec.GetUsages())
	}
	if x := certOf(t, csrs[0]); !x.Equal(creds.Certificate.Leaf) {
		t.Fatal("the stored certificate is not the one the hub signed")
	}

	// The Seed, registered by the agent under its certificate; the hub's session marks it ready and records the
	// expiry of the certificate the session presented.
	agenttest.Eventually(t, "the seed registered", func() bool { return ta.Status().SeedRegistered })
	agenttest.Eventually(t, "GardenletReady=True and the certificate's expiry in the Seed", func() bool {
		s := e.hubSeed(t)
		return gardenletReady(s) && s.GetStatus().GetClientCertificateExpirationTimestamp().AsTime().Equal(creds.NotAfter())
	})
	s := e.hubSeed(t)
	if s.GetSpec().GetProvider().GetType() != "local" || s.GetSpec().GetIngress().GetDomain() != "ingress.local.seed.example.com" ||
		s.GetMetadata().GetLabels()["base"] != "test" {
		t.Fatalf("registered Seed: labels %v, spec %v", s.GetMetadata().GetLabels(), s.GetSpec())
	}
	e.waitCache(t, ta, "a", "b") // the Seed itself is assigned too

	// Heartbeats at the hub's shorter interval, acknowledged.
	agenttest.Eventually(t, "a heartbeat acknowledged", func() bool { return ta.Status().HeartbeatAckLatency > 0 })
	if got := sessionsEstablished(ta)[0].Attrs["heartbeatInterval"].Duration(); got != agenttest.HubHeartbeat {
		t.Fatalf("heartbeat interval %v, want the hub's %v", got, agenttest.HubHeartbeat)
	}

	// The seed becomes unreachable: heartbeats report it unhealthy and the hub withdraws the seed's presence;
	// reachable again, presence is recorded again. The session stays up throughout.
	const presenceWrites = `trellis_agentlink_etcd_writes_total{purpose="presence"}`
	writes := e.metric(t, presenceWrites)
	seedTarget := seedProxy.Target()
	seedProxy.SetTarget(closedAddr(t))
	seedProxy.CutAll()
	agenttest.Eventually(t, "the seed unhealthy", func() bool { return len(ta.Logs.Records("seed unhealthy")) > 0 })
	agenttest.Eventually(t, "the hub withdrawing presence", func() bool { return e.metric(t, presenceWrites) > writes })
	writes = e.metric(t, presenceWrites)
	seedProxy.SetTarget(seedTarget)
	agenttest.Eventually(t, "the seed healthy again", func() bool { return len(ta.Logs.Records("seed healthy again")) > 0 })
	agenttest.Eventually(t, "the hub recording presence again", func() bool { return e.metric(t, presenceWrites) > writes })
	if st := ta.Status(); st.Sessions != 1 || !st.Connected {
		t.Fatalf("sessions %d, connected %v: the session did not survive the seed's outage", st.Sessions, st.Connected)
	}

	// Changes after the sync reach the cache and its handlers: shoot a changes, shoot b (with its binding and
	// secret) leaves the seed.
	var updates, deletes atomic.Int32
	remove := ta.Cache().AddEventHandler(resources.Shoots, cache.HandlerFuncs{
		// The hub's controllers update the shoot too (its status label): count the change to changed=yes.
		UpdateFunc: func(old, obj proto.Message) {
			if old.(*corev1beta1.Shoot).GetMetadata().GetLabels()["changed"] != "yes" &&
				obj.(*corev1beta1.Shoot).GetMetadata().GetLabels()["changed"] == "yes" {
				updates.Add(1)
			}
		},
		DeleteFunc: func(obj proto.Message) {
			if obj.(*corev1beta1.Shoot).GetMetadata().GetName() == "b" {
				deletes.Add(1)
			}
		},
	})
	defer remove()
	_, err = e.hub.Collection(t, "core.gardener.cloud", "shoots").GuaranteedUpdate(ctx, "garden", "a", false, func(cur store.Object) (store.Object, error) {
		s := proto.Clone(cur).(*corev1beta1.Shoot)
		s.Metadata.Labels = map[string]string{"changed": "yes"}
		return s, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.hub.Collection(t, "core.gardener.cloud", "shoots").Delete(ctx, "garden", "b", nil); err != nil {
		t.Fatal(err)
	}
	e.waitCache(t, ta, "a")
	agenttest.Eventually(t, "the handler events", func() bool { return updates.Load() == 1 && deletes.Load() == 1 })
	if st := ta.Status(); st.LastError != nil || st.Sessions != 1 {
		t.Fatalf("last error %v, sessions %d", st.LastError, st.Sessions)
	}
}

// TestStoredCredentialsReusedAfterRestart: a restarted agent (a new process, the same seed Secret) connects with the
// stored credentials: no bootstrap token needed, no new CSR at the hub.
func TestStoredCredentialsReusedAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := agenttest.StartAgent(t, e.config(t))
	agenttest.Eventually(t, "the first agent connected and registered", func() bool { return first.Connected() && first.Status().SeedRegistered })
	first.Stop()
	stored := e.secret(t, e.ns)
	creds := e.storedCredentials(t)

	cfg := e.config(t)
	cfg.HubClientConnection.BootstrapToken = "" // consumed anyway
	second := agenttest.StartAgent(t, cfg)
	agenttest.Eventually(t, "the second agent connected", second.Connected)
	if n := second.Status().CSRsSent; n != 0 {
		t.Fatalf("the second agent sent %d CSRs, want 0", n)
	}
	if n := len(e.csrs(t)); n != 1 {
		t.Fatalf("%d CSRs in the hub, want 1 (the first agent's bootstrap)", n)
	}
	if !second.CertificateNotAfter().Equal(creds.NotAfter()) {
		t.Fatalf("the second agent uses a certificate until %v, the stored one is valid until %v", second.CertificateNotAfter(), creds.NotAfter())
	}
	if got := e.secret(t, e.ns).ResourceVersion; got != stored.ResourceVersion {
		t.Fatalf("the kubeconfig Secret was written again (resourceVersion %s → %s)", stored.ResourceVersion, got)
	}
	agenttest.Eventually(t, "the second agent's seed registration", func() bool { return second.Status().SeedRegistered })
}

// TestNoCredentialsAndNoToken: without a kubeconfig Secret and without a token the agent says so and keeps trying,
// without bothering the hub.
func TestNoCredentialsAndNoToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config(t)
	cfg.HubClientConnection.BootstrapToken = ""
	ta := agenttest.StartAgent(t, cfg)
	agenttest.Eventually(t, "ErrNoCredentials", func() bool { return errors.Is(ta.Status().LastError, agent.ErrNoCredentials) })
	if msg := ta.Status().LastError.Error(); !strings.Contains(msg, e.ns+"/gardenlet-kubeconfig") || !strings.Contains(msg, "bootstrapTokenFile") {
		t.Fatalf("the error does not name the Secret and the token options: %s", msg)
	}
	agenttest.Eventually(t, "retries", func() bool { return len(failures(ta)) >= 3 })
	if ta.Connected() || e.proxy.Accepted() != 0 || len(e.csrs(t)) != 0 {
		t.Fatalf("connected %v, connections to the hub %d, CSRs %d; want none", ta.Connected(), e.proxy.Accepted(), len(e.csrs(t)))
	}
}

// TestBootstrapTokenRejectedThenFixed: the hub refuses an expired bootstrap token; the agent reports it clearly, keeps
// retrying and bootstraps once the operator writes a valid token into the token file. The error is cleared once the
// session is up.
func TestBootstrapTokenRejectedThenFixed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expired := e.hub.BootstrapToken(t, "local", time.Now().Add(-time.Minute))
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(expired+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(t)
	cfg.HubClientConnection.BootstrapToken, cfg.HubClientConnection.BootstrapTokenFile = "", tokenFile
	ta := agenttest.StartAgent(t, cfg)

	agenttest.Eventually(t, "the refusal reported", func() bool {
		var be *agent.BootstrapError
		err := ta.Status().LastError
		return errors.As(err, &be) && status.Code(be) == codes.Unauthenticated && strings.Contains(err.Error(), "expired")
	})
	agenttest.Eventually(t, "retries", func() bool { return len(failures(ta)) >= 3 })
	if ta.Connected() || len(e.csrs(t)) != 0 {
		t.Fatalf("connected %v, %d CSRs with an expired token", ta.Connected(), len(e.csrs(t)))
	}

	if err := os.WriteFile(tokenFile, []byte(e.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agenttest.Eventually(t, "connected", ta.Connected)
	if err := ta.Status().LastError; err != nil {
		t.Fatalf("LastError after the session started: %v", err)
	}
	id, _, _ := auth.ParseBootstrapToken(e.token)
	if _, err := e.hub.Collection(t, "", "secrets").Get(context.Background(), "kube-system", auth.BootstrapTokenSecretName(id)); !apierrors.IsNotFound(err) {
		t.Fatalf("the bootstrap token was not consumed: %v", err)
	}
	if n := len(e.csrs(t)); n != 1 {
		t.Fatalf("%d CSRs, want 1", n)
	}
}

// checkRotated checks the second certificate after a rotation: stored, in use, from a CSR the agent made with its
// seed identity over the session, with a new key and the same subject.
func checkRotated(t *testing.T, e *env, ta *agenttest.Agent, before *x509.Certificate) *identity.Credentials {
	t.Helper()
	after := e.storedCredentials(t)
	if after.Certificate.Leaf.SerialNumber.Cmp(before.SerialNumber) == 0 {
		t.Fatal("the stored certificate did not change")
	}
	if after.Certificate.Leaf.PublicKey.(*ecdsa.PublicKey).Equal(before.PublicKey) {
		t.Fatal("the rotated certificate has the old key")
	}
	if after.Certificate.Leaf.Subject.String() != before.Subject.String() {
		t.Fatalf("the subject changed: %s", after.Certificate.Leaf.Subject)
	}
	if !ta.CertificateNotAfter().Equal(after.NotAfter()) {
		t.Fatalf("CertificateNotAfter %v, the rotated certificate's %v", ta.CertificateNotAfter(), after.NotAfter())
	}
	var fromSeed bool
	for _, c := range e.csrs(t) {
		fromSeed = fromSeed || c.GetSpec().GetUsername() == seedUser && certOf(t, c).Equal(after.Certificate.Leaf)
	}
	if !fromSeed {
		t.Fatal("the stored certificate is not from a CSR of the seed's identity")
	}
	// The next session resumes from the versions the agent holds.
	recs := sessionsEstablished(ta)
	if last := recs[len(recs)-1]; !last.Attrs["resumed"].Bool() {
		t.Fatalf("the session after the rotation did not resume: %v", last.Attrs)
	}
	return after
}

// TestRotationOnRenewCertificate: an operator annotates the Seed renew-kubeconfig; the hub asks the agent to
// renew, the agent rotates over the live session, stores the new kubeconfig and reconnects with it, without a
// restart. The hub clears the annotation, and nothing rotates again.
func TestRotationOnRenewCertificate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.hub.Store(t, shootFixtures("a")...)
	ta := agenttest.StartAgent(t, e.config(t))
	agenttest.Eventually(t, "connected and registered", func() bool { return ta.Connected() && ta.Status().SeedRegistered })
	e.waitCache(t, ta, "a")
	before := e.storedCredentials(t).Certificate.Leaf
	sessions := ta.Status().Sessions

	_, err := e.hub.Collection(t, "core.gardener.cloud", "seeds").GuaranteedUpdate(context.Background(), "", "local", false, func(cur store.Object) (store.Object, error) {
		s := proto.Clone(cur).(*corev1beta1.Seed)
		if s.Metadata.Annotations == nil {
			s.Metadata.Annotations = map[string]string{}
		}
		s.Metadata.Annotations["gardener.cloud/operation"] = "renew-kubeconfig"
		return s, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The hub clears the annotation only after it sent the certificate, while the agent reconnects at once: the new
	// session may still see the Seed annotated and ask again (a race in hub/agentlink, seen in about one run in
	// eight). Each renewal the agent honours is one rotation and one new session; the test waits for the hub to
	// settle.
	settled := func() bool {
		st := ta.Status()
		_, annotated := e.hubSeed(t).GetMetadata().GetAnnotations()["gardener.cloud/operation"]
		return st.CSRsSent >= 2 && st.Sessions == sessions+st.CSRsSent-1 && st.Connected && !annotated
	}
	for deadline := time.Now().Add(agenttest.WaitTimeout); ; {
		agenttest.Eventually(t, "rotated, the annotation cleared and a new session", settled)
		n := ta.Status().CSRsSent
		time.Sleep(3 * agenttest.HubHeartbeat) // no further rotation
		if ta.Status().CSRsSent == n && settled() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rotations go on: %d CSRs sent", ta.Status().CSRsSent)
		}
	}
	st := ta.Status()
	if st.CSRsSent > 2 {
		t.Logf("the hub asked for %d renewals for one renew-kubeconfig annotation", st.CSRsSent-1)
	}
	if n := len(e.csrs(t)); n != int(st.CSRsSent) {
		t.Fatalf("%d CSRs at the hub, %d sent", n, st.CSRsSent)
	}
	checkRotated(t, e, ta, before)
	for _, r := range ta.Logs.Records("rotating the client certificate") {
		if !strings.Contains(r.Attrs["reason"].String(), "renew-kubeconfig") {
			t.Fatalf("rotation for %q", r.Attrs["reason"].String())
		}
	}
	e.waitCache(t, ta, "a")
}

// TestRotationAtDeadline: the client certificate rotates on its own at its rotation deadline. The hub signs for at
// least 10 minutes, so the test moves the first certificate's deadline to now; the next one is drawn as usual,
// within 70–90 % of the new certificate's validity.
func TestRotationAtDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var calls atomic.Int32
	ta := agenttest.StartAgent(t, e.config(t), func(c *agent.Config) {
		c.RotationDeadline = func(_, _, drawn time.Time) time.Time {
			if calls.Add(1) == 1 {
				return time.Now()
			}
			return drawn
		}
	})
	agenttest.Eventually(t, "a rotation and a new session", func() bool {
		st := ta.Status()
		return st.CSRsSent == 2 && st.Sessions >= 2 && st.Connected
	})
	var bootstrapped *x509.Certificate
	for _, c := range e.csrs(t) {
		if c.GetSpec().GetUsername() != seedUser {
			bootstrapped = certOf(t, c)
		}
	}
	if bootstrapped == nil {
		t.Fatal("no bootstrap CSR at the hub")
	}
	after := checkRotated(t, e, ta, bootstrapped)
	if recs := ta.Logs.Records("rotating the client certificate"); len(recs) != 1 || !strings.Contains(recs[0].Attrs["reason"].String(), "rotation deadline") {
		t.Fatalf("rotations: %v", recs)
	}
	dl := ta.Status().RotationDeadline
	life := after.NotAfter().Sub(after.NotBefore())
	lo, hi := after.NotBefore().Add(life*70/100), after.NotBefore().Add(life*90/100)
	if dl.Before(lo) || dl.After(hi) {
		t.Fatalf("the next rotation deadline %v is outside [%v, %v]", dl, lo, hi)
	}
	time.Sleep(3 * agenttest.HubHeartbeat)
	if n := ta.Status().CSRsSent; n != 2 {
		t.Fatalf("CSRs sent = %d after the rotation, want 2 (no further rotation)", n)
	}
}

// TestHeartbeatTimeoutReconnects: the link goes silent (a black hole, as on a partitioned network); the agent drops
// the session after three of the hub's heartbeat intervals without an acknowledgement, as the hub does on its side,
// and reconnects once the network heals.
func TestHeartbeatTimeoutReconnects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ta := agenttest.StartAgent(t, e.config(t))
	agenttest.Eventually(t, "connected and acknowledged", func() bool { return ta.Connected() && ta.Status().HeartbeatAckLatency > 0 })

	start := time.Now()
	e.proxy.Blackhole(true)
	agenttest.Eventually(t, "the session dropped", func() bool { return errors.Is(ta.Status().LastError, agent.ErrHeartbeatTimeout) })
	// The last acknowledgement came at most one interval before the black hole; the agent drops the session once
	// three intervals passed since.
	if d := time.Since(start); d < 2*agenttest.HubHeartbeat {
		t.Fatalf("dropped after %v, before three intervals of %v could pass", d, agenttest.HubHeartbeat)
	}
	agenttest.Eventually(t, "the hub ending its side", func() bool { return len(e.hubSessions()) == 0 })
	if ta.Connected() {
		t.Fatal("still connected")
	}

	// Healed: the connection attempt that lost its handshake in the black hole is cut, as a real network's
	// connection timeout would (gRPC's is 20 s).
	e.proxy.Blackhole(false)
	e.proxy.CutAll()
	agenttest.Eventually(t, "reconnected", func() bool { return ta.Status().Sessions >= 2 && ta.Connected() })
	if err := ta.Status().LastError; err != nil {
		t.Fatalf("LastError after reconnecting: %v", err)
	}
	if n := ta.Status().CSRsSent; n != 1 {
		t.Fatalf("CSRs sent = %d, want 1", n)
	}
}

// TestHubRestartResumeDropsWhatLeft: the hub shuts down and ends the session ("the hub is shutting down"); while the
// agent is away, a shoot leaves the seed. The agent reconnects to the restarted hub (same store, same CA), resumes
// from the versions it holds, and the SyncComplete drops what left the seed from its cache.
func TestHubRestartResumeDropsWhatLeft(t *testing.T) {
	t.Parallel()
	e := openEnv(t)
	dir := t.TempDir()
	// Both hubs keep their data in dir. hubtest reads the CA and the admin token from the directory it made (it does
	// not follow a changed DataDir), so that directory becomes a link to dir.
	dataDir := func(t *testing.T) func(*hub.Config) {
		return func(c *hub.Config) {
			if err := os.Remove(c.DataDir); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(dir, c.DataDir); err != nil {
				t.Fatal(err)
			}
		}
	}
	tok, err := auth.NewSeedBootstrapToken("local", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	e.token = tok.Token()
	cfg := e.config(t)
	cfg.HubClientConnection.CAFile = filepath.Join(dir, "pki", "ca.crt") // the hub writes it when it starts
	ta := agenttest.StartAgent(t, cfg)

	var versions map[string]int64
	ok := t.Run("first hub", func(t *testing.T) { // the hub stops at the end of the subtest
		e.startHub(t, dataDir(t))
		e.hub.Store(t, tok.SecretObject())
		e.hub.Store(t, shootFixtures("a", "b")...)
		e.proxy.SetTarget(e.hub.GRPCAddr())
		agenttest.Eventually(t, "connected", ta.Connected)
		e.waitCache(t, ta, "a", "b")
		agenttest.Eventually(t, "the seed registered", func() bool { return ta.Status().SeedRegistered })
		e.waitCache(t, ta, "a", "b")
		versions = ta.Cache().SyncedVersions()
	})
	if !ok {
		t.FailNow()
	}
	agenttest.Eventually(t, "the hub's shutdown reported", func() bool {
		for _, err := range failures(ta) {
			if status.Code(errors.Unwrap(err)) == codes.Unavailable && strings.Contains(err.Error(), "shutting down") {
				return true
			}
		}
		return false
	})
	if ta.Connected() {
		t.Fatal("connected without a hub")
	}

	// The hub restarts; shoot b leaves the seed before the agent is back.
	e.startHub(t, dataDir(t))
	if _, _, err := e.hub.Collection(t, "core.gardener.cloud", "shoots").Delete(context.Background(), "garden", "b", nil); err != nil {
		t.Fatal(err)
	}
	if got := ta.Cache().SyncedVersions(); !cmp.Equal(got, versions) {
		t.Fatalf("the cache changed while the agent was away: %v, was %v", got, versions)
	}
	e.proxy.SetTarget(e.hub.GRPCAddr())
	agenttest.Eventually(t, "reconnected", func() bool { return ta.Connected() && ta.Status().Sessions == 2 })
	if recs := sessionsEstablished(ta); !recs[1].Attrs["resumed"].Bool() {
		t.Fatalf("the session after the restart did not resume: %v", recs[1].Attrs)
	}
	e.waitCache(t, ta, "a")
	if st := ta.Status(); st.CSRsSent != 1 || st.LastError != nil {
		t.Fatalf("CSRs sent %d (want 1), last error %v", st.CSRsSent, st.LastError)
	}
}

// TestIdleAgentAdvancesItsVersions: while nothing changes for its seed, the hub's heartbeat acks carry the versions
// through which it has sent everything (every ten heartbeat intervals), and the agent records them, so an idle agent
// resumes from a recent version after a restart instead of an old one. The test writes Secrets no object of the seed
// references (the hub sends the agent nothing for them) until one such write is covered by the agent's versions
// without any batch in between (its cache unchanged); a batch for the seed meanwhile (the hub's loops) starts over.
func TestIdleAgentAdvancesItsVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.hub.Store(t, shootFixtures("a")...)
	ta := agenttest.StartAgent(t, e.config(t))
	agenttest.Eventually(t, "the seed registered", func() bool { return ta.Status().SeedRegistered })
	e.waitCache(t, ta, "a")
	deadline := time.Now().Add(agenttest.WaitTimeout)
	for i := 0; ; i++ {
		before := ta.Cache().Snapshot()
		name := fmt.Sprintf("unrelated-%d", i)
		e.hub.Store(t, agentsim.Secret("garden", name))
		rv := e.rv(t, "", "secrets", "garden", name)
		// Ten heartbeat intervals after the versions last sent, and then the next ack; twice that.
		wait := time.Now().Add(24 * agenttest.HubHeartbeat)
		for time.Now().Before(wait) && ta.Cache().SyncedVersions()[resources.Secrets] < rv {
			time.Sleep(20 * time.Millisecond)
		}
		got := ta.Cache().SyncedVersions()[resources.Secrets]
		switch changed := !cmp.Equal(before, ta.Cache().Snapshot()); {
		case got >= rv && !changed:
			return
		case got < rv && !changed:
			t.Fatalf("the idle agent's version of secrets is %d after %s, want at least %d (the hub's acks carry it)", got, 24*agenttest.HubHeartbeat, rv)
		case time.Now().After(deadline):
			t.Fatal("a batch for the seed came in every attempt")
		}
	}
}

// TestSeedRegistrationUpdatesExistingSeed: a Seed that exists (an earlier agent's, or an operator's) gets the
// configured spec, labels and annotations; its other labels stay.
func TestSeedRegistrationUpdatesExistingSeed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config(t)
	old := proto.Clone(cfg.SeedConfig.Seed).(*corev1beta1.Seed) // the same networks and ingress domain: immutable
	old.ApiVersion, old.Kind = "core.gardener.cloud/v1beta1", "Seed"
	old.Spec.Provider.Type = "old"
	old.Metadata.Labels = map[string]string{"keep": "me", "base": "old"}
	e.hub.RegisterExtensions(t, "provider-old", "ControlPlane/old")
	// Through the API, as an operator: admission defaults it as it does the agent's update.
	if _, err := corev1beta1.NewSeedServiceClient(e.hub.GRPC(t)).Create(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	ta := agenttest.StartAgent(t, cfg)
	agenttest.Eventually(t, "the seed registered", func() bool { return ta.Status().SeedRegistered })
	if recs := ta.Logs.Records("seed registered"); len(recs) != 1 || recs[0].Attrs["action"].String() != "updated" {
		t.Fatalf("seed registration: %v", recs)
	}
	s := e.hubSeed(t)
	if s.GetSpec().GetProvider().GetType() != "local" || s.GetSpec().GetIngress().GetDomain() != "ingress.local.seed.example.com" {
		t.Fatalf("spec not updated: %v", s.GetSpec())
	}
	if l := s.GetMetadata().GetLabels(); l["keep"] != "me" || l["base"] != "test" {
		t.Fatalf("labels = %v", l)
	}
}
