package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/auth"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/agentsim"
)

// The objects of the benchmark. One Project, CloudProfile and SecretBinding (with its Secret) are shared by all
// shoots: every agent receives them, and the hub encodes them once (shared objects are memoized per state).
const (
	project      = "bench"
	namespace    = "garden-bench"
	cloudProfile = "bench-local"
	credsName    = "bench-creds"
	updateLabel  = "bench.trellis.dev/update"
	cacheFile    = "bench-agents.json" // in the data dir: setup marker and the agents' keys and certificates
	certValidity = 3600                // seconds; agentsim asks for this
)

func seedName(i int) string  { return fmt.Sprintf("bench-%05d", i) }
func shootName(i int) string { return fmt.Sprintf("shoot-%05d", i) }

const (
	seedsResource  = "seeds.core.gardener.cloud"
	shootsResource = "shoots.core.gardener.cloud"
)

// client is the admin's gRPC access to the hub: a few connections, calls spread over them.
type client struct {
	conns []*grpc.ClientConn
	next  atomic.Uint32
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return true }

func dialAdmin(h *hub, conns int) (*client, error) {
	c := &client{}
	for range conns {
		cc, err := grpc.NewClient("passthrough:///"+h.addr,
			grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: h.pool, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"})),
			grpc.WithPerRPCCredentials(bearer(h.token)),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
		if err != nil {
			c.close()
			return nil, err
		}
		c.conns = append(c.conns, cc)
	}
	return c, nil
}

func (c *client) conn() *grpc.ClientConn {
	return c.conns[int(c.next.Add(1))%len(c.conns)]
}

func (c *client) close() {
	for _, cc := range c.conns {
		_ = cc.Close()
	}
}

// forEach runs fn(i) for i in [0,n) on conc workers and returns the first error (the others stop early).
func forEach(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

func ignoreExists(err error) error {
	if status.Code(err) == codes.AlreadyExists {
		return nil
	}
	return err
}

// createShared creates the namespace, project, cloud profile, secret and secret binding every shoot uses, and the
// ControllerRegistration of the seeds' and shoots' extension types (provider local, the gardenlinux image), which the
// hub wants before it admits them (Gardener's ExtensionValidator); as in a real garden, the hub then keeps a
// ControllerInstallation of it per seed.
func createShared(ctx context.Context, c *client) error {
	cc := c.conn()
	var res []*corev1beta1.ControllerResource
	for _, k := range []string{"ControlPlane", "Infrastructure", "Worker"} {
		res = append(res, &corev1beta1.ControllerResource{Kind: k, Type: "local"})
	}
	res = append(res, &corev1beta1.ControllerResource{Kind: "OperatingSystemConfig", Type: "gardenlinux"})
	if _, err := corev1beta1.NewControllerRegistrationServiceClient(cc).Create(ctx, &corev1beta1.ControllerRegistration{
		ApiVersion: "core.gardener.cloud/v1beta1", Kind: "ControllerRegistration",
		Metadata: &metav1.ObjectMeta{Name: "bench-extensions"}, Spec: &corev1beta1.ControllerRegistrationSpec{Resources: res},
	}); ignoreExists(err) != nil {
		return fmt.Errorf("controller registration: %w", err)
	}
	if _, err := kcorev1.NewNamespaceServiceClient(cc).Create(ctx, &kcorev1.Namespace{ApiVersion: "v1", Kind: "Namespace",
		Metadata: &metav1.ObjectMeta{Name: namespace, Labels: map[string]string{"gardener.cloud/role": "project", "project.gardener.cloud/name": project}},
	}); ignoreExists(err) != nil {
		return fmt.Errorf("namespace: %w", err)
	}
	ns := namespace
	if _, err := corev1beta1.NewProjectServiceClient(cc).Create(ctx, &corev1beta1.Project{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Project",
		Metadata: &metav1.ObjectMeta{Name: project}, Spec: &corev1beta1.ProjectSpec{Namespace: &ns},
	}); ignoreExists(err) != nil {
		return fmt.Errorf("project: %w", err)
	}
	if _, err := corev1beta1.NewCloudProfileServiceClient(cc).Create(ctx, &corev1beta1.CloudProfile{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "CloudProfile",
		Metadata: &metav1.ObjectMeta{Name: cloudProfile},
		Spec: &corev1beta1.CloudProfileSpec{
			Type:       "local",
			Kubernetes: &corev1beta1.KubernetesSettings{Versions: []*corev1beta1.ExpirableVersion{{Version: "1.35.4"}, {Version: "1.34.7"}}},
			MachineImages: []*corev1beta1.MachineImage{{Name: "gardenlinux", Versions: []*corev1beta1.MachineImageVersion{{
				Version: "1877.5.0", Cri: []*corev1beta1.CRI{{Name: "containerd"}}, Architectures: []string{"amd64"},
			}}}},
			MachineTypes: []*corev1beta1.MachineType{{Name: "local", Cpu: "2", Gpu: "0", Memory: "4Gi"}},
			Regions:      []*corev1beta1.Region{{Name: "local"}},
		},
	}); ignoreExists(err) != nil {
		return fmt.Errorf("cloud profile: %w", err)
	}
	if _, err := kcorev1.NewSecretServiceClient(cc).Create(ctx, &kcorev1.Secret{ApiVersion: "v1", Kind: "Secret",
		Metadata: &metav1.ObjectMeta{Namespace: namespace, Name: credsName}, Type: "Opaque",
		Data: map[string][]byte{"token": []byte("bench-provider-token")},
	}); ignoreExists(err) != nil {
		return fmt.Errorf("secret: %w", err)
	}
	if _, err := corev1beta1.NewSecretBindingServiceClient(cc).Create(ctx, &corev1beta1.SecretBinding{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "SecretBinding",
		Metadata:  &metav1.ObjectMeta{Namespace: namespace, Name: credsName},
		SecretRef: &metav1.SecretReference{Name: credsName, Namespace: namespace},
		Provider:  &corev1beta1.SecretBindingProvider{Type: "local"},
	}); ignoreExists(err) != nil {
		return fmt.Errorf("secret binding: %w", err)
	}
	return nil
}

func seedObject(i int) *corev1beta1.Seed {
	return &corev1beta1.Seed{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Seed",
		Metadata: &metav1.ObjectMeta{Name: seedName(i), Labels: map[string]string{"bench.trellis.dev/fleet": "agents"}},
		Spec: &corev1beta1.SeedSpec{
			Provider: &corev1beta1.SeedProvider{Type: "local", Region: "local"},
			Networks: &corev1beta1.SeedNetworks{Pods: "10.1.0.0/16", Services: "10.2.0.0/16", Nodes: proto.String("10.3.0.0/16")},
		}}
}

func shootObject(i int) *corev1beta1.Shoot {
	minimum, maximum := int32(1), int32(3)
	return &corev1beta1.Shoot{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot",
		Metadata: &metav1.ObjectMeta{Namespace: namespace, Name: shootName(i), Labels: map[string]string{updateLabel: "0"}},
		Spec: &corev1beta1.ShootSpec{
			SeedName:          proto.String(seedName(i)),
			CloudProfile:      &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: cloudProfile},
			SecretBindingName: proto.String(credsName),
			Region:            "local",
			Kubernetes:        &corev1beta1.Kubernetes{Version: "1.35.4"},
			Provider: &corev1beta1.Provider{Type: "local", Workers: []*corev1beta1.Worker{{
				Name: "pool", Minimum: &minimum, Maximum: &maximum, Machine: &corev1beta1.Machine{Type: "local"},
			}}},
		}}
}

// createFleetObjects creates seed i and shoot i for every i.
func createFleetObjects(ctx context.Context, c *client, n, conc int) error {
	if err := forEach(ctx, n, conc, func(ctx context.Context, i int) error {
		_, err := corev1beta1.NewSeedServiceClient(c.conn()).Create(ctx, seedObject(i))
		if ignoreExists(err) != nil {
			return fmt.Errorf("seed %s: %w", seedName(i), err)
		}
		return nil
	}); err != nil {
		return err
	}
	return forEach(ctx, n, conc, func(ctx context.Context, i int) error {
		_, err := corev1beta1.NewShootServiceClient(c.conn()).Create(ctx, shootObject(i))
		if ignoreExists(err) != nil {
			return fmt.Errorf("shoot %s: %w", shootName(i), err)
		}
		return nil
	})
}

// createTokens creates a bootstrap token for each seed and returns the tokens.
func createTokens(ctx context.Context, c *client, seeds []int, conc int) ([]string, error) {
	tokens := make([]string, len(seeds))
	err := forEach(ctx, len(seeds), conc, func(ctx context.Context, k int) error {
		tok, err := auth.NewSeedBootstrapToken(seedName(seeds[k]), time.Now().Add(2*time.Hour))
		if err != nil {
			return err
		}
		if _, err := kcorev1.NewSecretServiceClient(c.conn()).Create(ctx, tok.SecretObject()); err != nil {
			return fmt.Errorf("bootstrap token of %s: %w", seedName(seeds[k]), err)
		}
		tokens[k] = tok.Token()
		return nil
	})
	return tokens, err
}

// bootstrap exchanges the tokens for certificates, conc at a time; it returns the certificates and each exchange's
// duration; done is called after each success.
func bootstrap(ctx context.Context, d agentsim.Dialer, seeds []int, tokens []string, conc int, done func()) ([]tls.Certificate, []time.Duration, error) {
	certs := make([]tls.Certificate, len(seeds))
	lat := make([]time.Duration, len(seeds))
	err := forEach(ctx, len(seeds), conc, func(ctx context.Context, k int) error {
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			start := time.Now()
			actx, cancel := context.WithTimeout(ctx, 90*time.Second)
			certs[k], err = agentsim.Bootstrap(actx, d, tokens[k], seedName(seeds[k]), nil, nil)
			cancel()
			lat[k] = time.Since(start)
			// Transient failures (the hub busy, a connection refused) are retried with the same token: it is
			// consumed only once the certificate exists.
			if err == nil || (status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded) || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("bootstrap %s: %w", seedName(seeds[k]), err)
		}
		done()
		return nil
	})
	return certs, lat, err
}

// cache is what the data dir keeps between runs (-reuse): that the objects of N seeds exist, and the agents' keys
// and certificates.
type cache struct {
	N           int           `json:"n"`
	ObjectsMade bool          `json:"objectsMade"`
	Agents      []cachedAgent `json:"agents"`
}

type cachedAgent struct {
	Seed    string `json:"seed"`
	CertPEM string `json:"certPEM"`
	KeyPEM  string `json:"keyPEM"`
}

func loadCache(dataDir string) (*cache, error) {
	data, err := os.ReadFile(filepath.Join(dataDir, cacheFile))
	if err != nil {
		return nil, err
	}
	var c cache
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", cacheFile, err)
	}
	return &c, nil
}

func (c *cache) save(dataDir string) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	path := filepath.Join(dataDir, cacheFile)
	if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func encodeAgent(seed string, cert tls.Certificate) (cachedAgent, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return cachedAgent{}, err
	}
	var certPEM []byte
	for _, der := range cert.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return cachedAgent{Seed: seed, CertPEM: string(certPEM), KeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))}, nil
}

// certs decodes the cached certificates of seeds 0..n-1; it returns the indexes whose certificate is missing or
// expires before minValid.
func (c *cache) certs(n int, minValid time.Time) ([]tls.Certificate, []int) {
	out := make([]tls.Certificate, n)
	byseed := map[string]cachedAgent{}
	for _, a := range c.Agents {
		byseed[a.Seed] = a
	}
	var missing []int
	for i := range n {
		a, ok := byseed[seedName(i)]
		if !ok {
			missing = append(missing, i)
			continue
		}
		cert, err := tls.X509KeyPair([]byte(a.CertPEM), []byte(a.KeyPEM))
		if err != nil || cert.Leaf == nil || cert.Leaf.NotAfter.Before(minValid) {
			missing = append(missing, i)
			continue
		}
		out[i] = cert
	}
	return out, missing
}

// setCerts records certificates for seeds (replacing older ones).
func (c *cache) setCerts(seeds []int, certs []tls.Certificate) error {
	idx := map[string]int{}
	for k, a := range c.Agents {
		idx[a.Seed] = k
	}
	for k, i := range seeds {
		a, err := encodeAgent(seedName(i), certs[k])
		if err != nil {
			return err
		}
		if at, ok := idx[a.Seed]; ok {
			c.Agents[at] = a
		} else {
			idx[a.Seed] = len(c.Agents)
			c.Agents = append(c.Agents, a)
		}
	}
	slices.SortFunc(c.Agents, func(a, b cachedAgent) int {
		switch {
		case a.Seed < b.Seed:
			return -1
		case a.Seed > b.Seed:
			return 1
		}
		return 0
	})
	return nil
}

// listVersions returns name → resourceVersion of every object of a collection (paged), and the list's revision,
// from a hub state not older than revision notOlder (0: any).
func listVersions(ctx context.Context, c *client, resource string, notOlder int64) (map[string]int64, int64, error) {
	out := map[string]int64{}
	var rev int64
	cont := ""
	for {
		req := &metav1.ListRequest{Limit: 2000, Continue: cont}
		if notOlder > 0 && cont == "" {
			req.ResourceVersion = strconv.FormatInt(notOlder, 10)
		}
		var items []*metav1.ObjectMeta
		var lm *metav1.ListMeta
		switch resource {
		case seedsResource:
			l, err := corev1beta1.NewSeedServiceClient(c.conn()).List(ctx, req)
			if err != nil {
				return nil, 0, err
			}
			for _, o := range l.GetItems() {
				items = append(items, o.GetMetadata())
			}
			lm = l.GetMetadata()
		case shootsResource:
			req.Namespace = namespace
			l, err := corev1beta1.NewShootServiceClient(c.conn()).List(ctx, req)
			if err != nil {
				return nil, 0, err
			}
			for _, o := range l.GetItems() {
				items = append(items, o.GetMetadata())
			}
			lm = l.GetMetadata()
		default:
			return nil, 0, fmt.Errorf("listVersions: %s", resource)
		}
		for _, md := range items {
			rv, _ := strconv.ParseInt(md.GetResourceVersion(), 10, 64)
			key := md.GetName()
			if md.GetNamespace() != "" {
				key = md.GetNamespace() + "/" + key
			}
			out[key] = rv
		}
		if rev == 0 {
			rev, _ = strconv.ParseInt(lm.GetResourceVersion(), 10, 64)
		}
		cont = lm.GetContinue()
		if cont == "" {
			return out, rev, nil
		}
	}
}

// revision returns the hub's current etcd revision (a consistent List's resourceVersion).
func revision(ctx context.Context, c *client) (int64, error) {
	l, err := kcorev1.NewNamespaceServiceClient(c.conn()).List(ctx, &metav1.ListRequest{Limit: 1})
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(l.GetMetadata().GetResourceVersion(), 10, 64)
}
