package kubeconfig

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"net/http"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/tunnel"
	authenticationv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/authentication/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/objectnames"
)

// The subresources, as they appear in paths and in authorization attributes.
const (
	SubresourceAdmin  = "adminkubeconfig"
	SubresourceViewer = "viewerkubeconfig"
)

// The groups of the issued client certificates (their O), which the shoot's kube-apiserver maps to its RBAC: admins
// are cluster admins of the shoot, viewers read everything but Secrets (Gardener's gardener.cloud:system:viewers).
const (
	GroupAdmins  = "system:masters"
	GroupViewers = "gardener.cloud:system:viewers"
)

// Data keys of the shoot's client CA (<shoot>.ca-client) and cluster CA bundle (<shoot>.ca-cluster).
const (
	DataKeyCACert   = "ca.crt"
	DataKeyCAKey    = "ca.key"
	DataKeyCABundle = "bundle.crt"
)

// Expiration limits, Gardener's: requests ask for at least 10 minutes and at most 2^32-1 seconds, and get 1 hour
// when they do not say; the hub shortens what it issues to its maximum (Config.MaxExpiration).
const (
	MinExpirationSeconds     = 600
	MaxExpirationSeconds     = math.MaxUint32
	DefaultExpirationSeconds = 3600
	DefaultMaxExpiration     = 24 * time.Hour
)

// AddressName is the name of the tunnel's address in a shoot's status.advertisedAddresses and the suffix of the
// kubeconfig's cluster: Gardener's "external", the shoot API's public name, which in Trellis is the tunnel's.
const AddressName = "external"

// APIVersion is the apiVersion of the requests and answers.
const APIVersion = "authentication.gardener.cloud/v1alpha1"

var (
	shootsResource          = schema.GroupResource{Group: "core.gardener.cloud", Resource: "shoots"}
	projectsResource        = schema.GroupResource{Group: "core.gardener.cloud", Resource: "projects"}
	internalSecretsResource = schema.GroupResource{Group: "core.gardener.cloud", Resource: "internalsecrets"}
	configMapsResource      = schema.GroupResource{Resource: "configmaps"}
	secretsResource         = schema.GroupResource{Resource: "secrets"}
)

// Endpoints are the subresources' discovery entries, as Gardener lists them.
var Endpoints = []api.Endpoint{
	{Group: "core.gardener.cloud", Version: "v1beta1", Resource: "shoots/" + SubresourceAdmin, Kind: "AdminKubeconfigRequest",
		Verbs: []string{"create"}, Namespaced: true, KindGroup: "authentication.gardener.cloud", KindVersion: "v1alpha1"},
	{Group: "core.gardener.cloud", Version: "v1beta1", Resource: "shoots/" + SubresourceViewer, Kind: "ViewerKubeconfigRequest",
		Verbs: []string{"create"}, Namespaced: true, KindGroup: "authentication.gardener.cloud", KindVersion: "v1alpha1"},
}

// Reader reads the objects a request needs from the hub's caches (api.Registry is one).
type Reader interface {
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (store.Object, error)
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]store.Object, error)
}

// Config configures the Server.
type Config struct {
	// Reader reads shoots, projects, the CAs (required).
	Reader Reader
	// Authorizer decides the requests (the registry's); nil allows everything.
	Authorizer api.Authorizer
	// Address returns host:port of the hub's tunnel listener as clients reach it (--tunnel-advertise-address, else
	// the listener's address); "" (or a nil Address) refuses every request with 503, as there is no way to the shoots.
	Address func() string
	// Domain is the tunnel domain (default tunnel.DefaultDomain).
	Domain string
	// MaxExpiration shortens longer requests (default DefaultMaxExpiration).
	MaxExpiration time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log receives one line per issued kubeconfig (who, which shoot, until when; never a key).
	Log *slog.Logger
}

// Server serves ShootKubeconfigService.
type Server struct {
	cfg Config
}

// New returns the Server of cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Reader == nil {
		return nil, errors.New("kubeconfig: Reader is required")
	}
	if cfg.Domain == "" {
		cfg.Domain = tunnel.DefaultDomain
	}
	if cfg.MaxExpiration <= 0 {
		cfg.MaxExpiration = DefaultMaxExpiration
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Address == nil {
		cfg.Address = func() string { return "" }
	}
	return &Server{cfg: cfg}, nil
}

// Register registers the service on a gRPC server.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	authenticationv1alpha1.RegisterShootKubeconfigServiceServer(r, s)
}

// Routes adds the REST routes (api.Routes), calling the server in-process.
func (s *Server) Routes(ctx context.Context, mux *runtime.ServeMux) error {
	return authenticationv1alpha1.RegisterShootKubeconfigServiceHandlerServer(ctx, mux, s)
}

// CreateAdminKubeconfig issues an admin kubeconfig.
func (s *Server) CreateAdminKubeconfig(ctx context.Context, req *authenticationv1alpha1.AdminKubeconfigRequest) (*authenticationv1alpha1.AdminKubeconfigRequest, error) {
	if err := checkType(req.GetApiVersion(), req.GetKind(), "AdminKubeconfigRequest"); err != nil {
		return nil, err
	}
	md, spec, status, err := s.issue(ctx, "AdminKubeconfigRequest", SubresourceAdmin, GroupAdmins, req.GetMetadata(), req.GetSpec())
	if err != nil {
		return nil, err
	}
	return &authenticationv1alpha1.AdminKubeconfigRequest{ApiVersion: APIVersion, Kind: "AdminKubeconfigRequest", Metadata: md, Spec: spec, Status: status}, nil
}

// CreateViewerKubeconfig issues a viewer kubeconfig.
func (s *Server) CreateViewerKubeconfig(ctx context.Context, req *authenticationv1alpha1.ViewerKubeconfigRequest) (*authenticationv1alpha1.ViewerKubeconfigRequest, error) {
	if err := checkType(req.GetApiVersion(), req.GetKind(), "ViewerKubeconfigRequest"); err != nil {
		return nil, err
	}
	md, spec, status, err := s.issue(ctx, "ViewerKubeconfigRequest", SubresourceViewer, GroupViewers, req.GetMetadata(), req.GetSpec())
	if err != nil {
		return nil, err
	}
	return &authenticationv1alpha1.ViewerKubeconfigRequest{ApiVersion: APIVersion, Kind: "ViewerKubeconfigRequest", Metadata: md, Spec: spec, Status: status}, nil
}

// checkType refuses a request that names another apiVersion or kind (both may be left out, as kubectl create --raw
// does).
func checkType(apiVersion, kind, want string) error {
	if (apiVersion != "" && apiVersion != APIVersion) || (kind != "" && kind != want) {
		return apierrors.NewBadRequest(fmt.Sprintf("apiVersion/kind: %s/%s is not %s/%s", apiVersion, kind, APIVersion, want))
	}
	return nil
}

// issue checks a request for the shoot md names and issues the kubeconfig. It returns the answer's metadata, spec
// (with the expiration issued: defaulted, or shortened to the maximum, as Gardener answers) and status.
func (s *Server) issue(ctx context.Context, kind, sub, group string, md *metav1.ObjectMeta, spec *authenticationv1alpha1.KubeconfigRequestSpec) (*metav1.ObjectMeta, *authenticationv1alpha1.KubeconfigRequestSpec, *authenticationv1alpha1.KubeconfigRequestStatus, error) {
	u, ok := auth.UserFrom(ctx)
	if !ok || u.Name == "" {
		return nil, nil, nil, apierrors.NewUnauthorized("no user")
	}
	ns, name := md.GetNamespace(), md.GetName()
	if ns == "" || name == "" {
		return nil, nil, nil, apierrors.NewBadRequest("the shoot's namespace and name are required (metadata.namespace, metadata.name)")
	}
	at := api.Attributes{User: u, Verb: api.VerbCreate, Resource: shootsResource, Subresource: sub, Namespace: ns, Name: name}
	if s.cfg.Authorizer != nil {
		if err := s.cfg.Authorizer.Authorize(ctx, at); err != nil {
			return nil, nil, nil, err
		}
	}
	gk := schema.GroupKind{Group: "authentication.gardener.cloud", Kind: kind}
	seconds, ferr := Expiration(spec)
	if ferr != nil {
		return nil, nil, nil, apierrors.NewInvalid(gk, name, field.ErrorList{ferr})
	}
	if lim := int64(s.cfg.MaxExpiration / time.Second); seconds > lim {
		seconds = lim
	}
	shoot, project, err := s.shoot(ctx, ns, name)
	if err != nil {
		return nil, nil, nil, err
	}
	addr := s.cfg.Address()
	if addr == "" {
		return nil, nil, nil, apierrors.NewServiceUnavailable("the hub advertises no address of its tunnel listener (--tunnel-listen, --tunnel-advertise-address): shoots cannot be reached through it")
	}
	signer, err := s.clientCA(ctx, ns, name)
	if err != nil {
		return nil, nil, nil, err
	}
	bundle, err := s.clusterCA(ctx, ns, name)
	if err != nil {
		return nil, nil, nil, err
	}
	now := s.cfg.Now()
	certPEM, keyPEM, notAfter, err := IssueClientCert(signer, u.Name, group, now, now.Add(time.Duration(seconds)*time.Second))
	if err != nil {
		return nil, nil, nil, apierrors.NewInternalError(fmt.Errorf("issuing the client certificate of shoot %s/%s: %w", ns, name, err))
	}
	kc, err := Build(Kubeconfig{
		Namespace: ns, Shoot: name, Server: "https://" + addr,
		ServerName: tunnel.ShootServerName(name, project, s.cfg.Domain), CA: bundle, CertPEM: certPEM, KeyPEM: keyPEM,
	})
	if err != nil {
		return nil, nil, nil, apierrors.NewInternalError(err)
	}
	s.cfg.Log.Info("issued a shoot kubeconfig", "user", u.Name, "shoot", ns+"/"+name, "kind", kind, "group", group,
		"seed", seedOf(shoot), "notAfter", notAfter.UTC().Format(time.RFC3339))
	gateway.SetHTTPCode(ctx, http.StatusCreated)
	out := &metav1.ObjectMeta{Name: name, Namespace: ns, CreationTimestamp: timestamppb.New(now.Truncate(time.Second))}
	return out, &authenticationv1alpha1.KubeconfigRequestSpec{ExpirationSeconds: &seconds}, &authenticationv1alpha1.KubeconfigRequestStatus{Kubeconfig: kc, ExpirationTimestamp: timestamppb.New(notAfter)}, nil
}

// Expiration returns spec.expirationSeconds, defaulted (DefaultExpirationSeconds), or the field error of a value
// outside [MinExpirationSeconds, MaxExpirationSeconds].
func Expiration(spec *authenticationv1alpha1.KubeconfigRequestSpec) (int64, *field.Error) {
	if spec == nil || spec.ExpirationSeconds == nil {
		return DefaultExpirationSeconds, nil
	}
	v := spec.GetExpirationSeconds()
	p := field.NewPath("spec", "expirationSeconds")
	switch {
	case v < MinExpirationSeconds:
		return 0, field.Invalid(p, v, "may not specify a duration less than 10 minutes")
	case v > MaxExpirationSeconds:
		return 0, field.Invalid(p, v, fmt.Sprintf("may not specify a duration longer than %d seconds", int64(MaxExpirationSeconds)))
	}
	return v, nil
}

func seedOf(s *corev1beta1.Shoot) string {
	if seed := s.GetStatus().GetSeedName(); seed != "" {
		return seed
	}
	return s.GetSpec().GetSeedName()
}

// shoot reads the shoot, refusing one that is not scheduled, and finds its project's name.
func (s *Server) shoot(ctx context.Context, ns, name string) (*corev1beta1.Shoot, string, error) {
	o, err := s.cfg.Reader.Get(ctx, shootsResource, ns, name)
	if err != nil {
		return nil, "", err
	}
	shoot, ok := o.(*corev1beta1.Shoot)
	if !ok {
		return nil, "", apierrors.NewInternalError(fmt.Errorf("shoot %s/%s is a %T", ns, name, o))
	}
	if seedOf(shoot) == "" {
		return nil, "", apierrors.NewConflict(shootsResource, name, errors.New("the shoot is not scheduled to a seed yet: it has no control plane to connect to"))
	}
	projects, err := s.cfg.Reader.List(ctx, projectsResource, "")
	if err != nil {
		return nil, "", err
	}
	for _, p := range projects {
		if p.(*corev1beta1.Project).GetSpec().GetNamespace() == ns {
			return shoot, p.GetMetadata().GetName(), nil
		}
	}
	return nil, "", apierrors.NewConflict(shootsResource, name, fmt.Errorf("namespace %q belongs to no project", ns))
}

// clientCA reads and parses the shoot's client CA.
func (s *Server) clientCA(ctx context.Context, ns, name string) (*tls.Certificate, error) {
	secretName := objectnames.ShootProjectResourceName(name, objectnames.ShootProjectSuffixCAClient)
	o, err := s.cfg.Reader.Get(ctx, internalSecretsResource, ns, secretName)
	if apierrors.IsNotFound(err) {
		return nil, notPublished("the shoot's client CA is not published yet (InternalSecret %s/%s): its seed's agent publishes it when it deploys the control plane", ns, secretName)
	}
	if err != nil {
		return nil, err
	}
	data := o.(*corev1beta1.InternalSecret).GetData()
	ca, err := ParseCA(data[DataKeyCACert], data[DataKeyCAKey])
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("the shoot's client CA (InternalSecret %s/%s): %w", ns, secretName, err))
	}
	return ca, nil
}

// clusterCA reads the shoot's published cluster CA bundle: the ConfigMap, else the Secret <shoot>.ca-cluster.
func (s *Server) clusterCA(ctx context.Context, ns, name string) ([]byte, error) {
	n := objectnames.ShootProjectResourceName(name, objectnames.ShootProjectSuffixCACluster)
	var bundle []byte
	o, err := s.cfg.Reader.Get(ctx, configMapsResource, ns, n)
	switch {
	case err == nil:
		bundle = []byte(o.(*kcorev1.ConfigMap).GetData()[DataKeyCACert])
	case apierrors.IsNotFound(err):
		o, err = s.cfg.Reader.Get(ctx, secretsResource, ns, n)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err == nil {
			bundle = o.(*kcorev1.Secret).GetData()[DataKeyCACert]
		}
	default:
		return nil, err
	}
	if len(bundle) == 0 {
		return nil, notPublished("the shoot's cluster CA bundle is not published yet (%s/%s)", ns, n)
	}
	return bundle, nil
}

// notPublished is the 503 of a CA the seed's agent has not published yet; the client retries later.
func notPublished(format string, args ...any) error {
	err := apierrors.NewServiceUnavailable(fmt.Sprintf(format, args...))
	err.ErrStatus.Details = &kmetav1.StatusDetails{RetryAfterSeconds: 10}
	return err
}

// ParseCA parses a CA's certificate and private key (PEM; RSA, ECDSA or Ed25519, PKCS#1, SEC 1 or PKCS#8) and checks
// that the certificate is a CA's.
func ParseCA(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, err
		}
	}
	if !c.Leaf.IsCA {
		return nil, fmt.Errorf("certificate %q is not a CA", c.Leaf.Subject.CommonName)
	}
	return &c, nil
}

// IssueClientCert issues a client certificate for user in group, signed by ca, valid from a minute before now (for
// clocks behind the hub's) until notAfter, but not beyond the CA. It returns the certificate, its key (PEM) and the
// NotAfter it has.
func IssueClientCert(ca *tls.Certificate, user, group string, now, notAfter time.Time) (certPEM, keyPEM []byte, _ time.Time, _ error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	if notAfter.After(ca.Leaf.NotAfter) {
		notAfter = ca.Leaf.NotAfter
	}
	notAfter = notAfter.UTC().Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: user, Organization: []string{group}},
		NotBefore:    now.Add(-time.Minute).UTC().Truncate(time.Second),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Leaf, key.Public(), ca.PrivateKey.(crypto.Signer))
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), notAfter, nil
}

// Kubeconfig is what Build writes.
type Kubeconfig struct {
	// Namespace and Shoot name the shoot; the cluster, user and context are <namespace>--<shoot>-external, as
	// Gardener names them (the user <namespace>--<shoot>).
	Namespace, Shoot string
	// Server is the kube-apiserver's URL, ServerName the name its certificate carries (tls-server-name).
	Server, ServerName string
	// CA is the cluster CA bundle (PEM).
	CA []byte
	// CertPEM and KeyPEM are the client certificate and its key.
	CertPEM, KeyPEM []byte
}

// Build writes the kubeconfig (YAML).
func Build(k Kubeconfig) ([]byte, error) {
	auth := k.Namespace + "--" + k.Shoot
	cluster := auth + "-" + AddressName
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{Server: k.Server, TLSServerName: k.ServerName, CertificateAuthorityData: k.CA}
	cfg.AuthInfos[auth] = &clientcmdapi.AuthInfo{ClientCertificateData: k.CertPEM, ClientKeyData: k.KeyPEM}
	cfg.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: auth}
	cfg.CurrentContext = cluster
	return clientcmd.Write(*cfg)
}
