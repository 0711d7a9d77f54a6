package garden

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"k8s.io/client-go/tools/clientcmd"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
)

// Environment variables read by ConfigFromEnv.
const (
	// EnvHub is the hub's address or URL, as trellisctl reads it.
	EnvHub = "TRELLIS_HUB"
	// EnvCA is a file holding the hub's CA bundle.
	EnvCA = "TRELLIS_CA"
	// EnvToken is a bearer token.
	EnvToken = "TRELLIS_TOKEN"
	// EnvGardenKubeconfig is a kubeconfig file for the garden, the variable Gardener injects into extensions.
	EnvGardenKubeconfig = "GARDEN_KUBECONFIG"
	// EnvSeedName is the seed the extension runs on.
	EnvSeedName = "SEED_NAME"
)

// Config says how to reach the hub.
type Config struct {
	// Address is the hub's gRPC address, host:port; an https:// URL is accepted. Required.
	Address string
	// CA is the PEM bundle the hub's certificate is checked against; empty means the system's roots.
	CA []byte
	// Token is a bearer token.
	Token string
	// TokenFile holds a bearer token; it is read again whenever the file changes. Overrides Token.
	TokenFile string
	// ClientCert and ClientKey are a PEM client certificate and key, for mTLS instead of a token.
	ClientCert, ClientKey []byte
	// SeedName is the seed the extension runs on.
	SeedName string
}

// Validate checks that the hub can be addressed and that there is exactly one way to authenticate.
func (c *Config) Validate() error {
	if c.Address == "" {
		return errors.New("garden: no hub address")
	}
	byToken := c.Token != "" || c.TokenFile != ""
	byCert := len(c.ClientCert) > 0 || len(c.ClientKey) > 0
	switch {
	case byToken && byCert:
		return errors.New("garden: both a token and a client certificate")
	case !byToken && !byCert:
		return errors.New("garden: no token and no client certificate")
	case byCert && (len(c.ClientCert) == 0 || len(c.ClientKey) == 0):
		return errors.New("garden: a client certificate needs both certificate and key")
	}
	return nil
}

// ConfigFromEnv returns the Config from TRELLIS_HUB, TRELLIS_CA (a file) and TRELLIS_TOKEN when TRELLIS_HUB is set,
// else from the kubeconfig file GARDEN_KUBECONFIG names; SeedName from SEED_NAME.
func ConfigFromEnv() (Config, error) {
	var cfg Config
	switch {
	case os.Getenv(EnvHub) != "":
		cfg.Address, cfg.Token = os.Getenv(EnvHub), os.Getenv(EnvToken)
		if f := os.Getenv(EnvCA); f != "" {
			ca, err := os.ReadFile(f)
			if err != nil {
				return Config{}, fmt.Errorf("garden: %s: %w", EnvCA, err)
			}
			cfg.CA = ca
		}
	case os.Getenv(EnvGardenKubeconfig) != "":
		var err error
		if cfg, err = ConfigFromKubeconfig(os.Getenv(EnvGardenKubeconfig)); err != nil {
			return Config{}, err
		}
	default:
		return Config{}, fmt.Errorf("garden: neither %s nor %s is set", EnvHub, EnvGardenKubeconfig)
	}
	cfg.SeedName = os.Getenv(EnvSeedName)
	return cfg, cfg.Validate()
}

// ConfigFromKubeconfig reads the hub's address, CA and credentials (token, token file or client certificate) from
// the current context of a kubeconfig file. File paths in it are relative to the file.
func ConfigFromKubeconfig(path string) (Config, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return Config{}, fmt.Errorf("garden: kubeconfig %s: %w", path, err)
	}
	cfg := Config{Address: rc.Host, Token: rc.BearerToken, TokenFile: rc.BearerTokenFile}
	read := func(data []byte, file string) ([]byte, error) {
		if len(data) > 0 || file == "" {
			return data, nil
		}
		return os.ReadFile(file)
	}
	if cfg.CA, err = read(rc.CAData, rc.CAFile); err == nil {
		if cfg.ClientCert, err = read(rc.CertData, rc.CertFile); err == nil {
			cfg.ClientKey, err = read(rc.KeyData, rc.KeyFile)
		}
	}
	if err != nil {
		return Config{}, fmt.Errorf("garden: kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// Client is a connection to the hub with the typed clients extensions use. Close it when done.
type Client struct {
	// Conn is the connection; more clients of the generated SDK can be made from it.
	Conn *grpc.ClientConn
	// SeedName is the seed the extension runs on.
	SeedName string

	// Shoots reads Shoots (the Cluster in the seed holds a copy; this is the live object).
	Shoots corev1beta1.ShootServiceClient
	// ShootStates reads and writes ShootStates: the extension state saved on migration, e.g. machine state.
	ShootStates corev1beta1.ShootStateServiceClient
	// Seeds reads Seeds.
	Seeds corev1beta1.SeedServiceClient
	// CloudProfiles reads CloudProfiles.
	CloudProfiles corev1beta1.CloudProfileServiceClient
	// BackupBuckets reads BackupBuckets.
	BackupBuckets corev1beta1.BackupBucketServiceClient
	// BackupEntries reads BackupEntries.
	BackupEntries corev1beta1.BackupEntryServiceClient
	// Secrets reads Secrets in the garden, as far as the extension may.
	Secrets kcorev1.SecretServiceClient
}

// Keepalive of the connection: as the agent's, a ping after 30 s without traffic, dead without an answer in 10 s.
const (
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
)

// New returns a Client for cfg. It does not connect yet: the first call does, and calls reconnect as needed.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(cfg.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CA) {
			return nil, errors.New("garden: CA holds no PEM certificate")
		}
		tlsCfg.RootCAs = pool
	}
	opts := []grpc.DialOption{
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout}),
		grpc.WithUserAgent("trellis-extsdk"),
	}
	if len(cfg.ClientCert) > 0 {
		cert, err := tls.X509KeyPair(cfg.ClientCert, cfg.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("garden: client certificate: %w", err)
		}
		tlsCfg.Certificates = []tls.Certificate{cert}
	} else {
		opts = append(opts, grpc.WithPerRPCCredentials(&bearer{token: cfg.Token, file: cfg.TokenFile}))
	}
	opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)))
	conn, err := grpc.NewClient(address(cfg.Address), opts...)
	if err != nil {
		return nil, fmt.Errorf("garden: %w", err)
	}
	return &Client{
		Conn:          conn,
		SeedName:      cfg.SeedName,
		Shoots:        corev1beta1.NewShootServiceClient(conn),
		ShootStates:   corev1beta1.NewShootStateServiceClient(conn),
		Seeds:         corev1beta1.NewSeedServiceClient(conn),
		CloudProfiles: corev1beta1.NewCloudProfileServiceClient(conn),
		BackupBuckets: corev1beta1.NewBackupBucketServiceClient(conn),
		BackupEntries: corev1beta1.NewBackupEntryServiceClient(conn),
		Secrets:       kcorev1.NewSecretServiceClient(conn),
	}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.Conn.Close() }

// address turns an https:// URL into host:port (port 443 when it has none); anything else is taken as it is.
func address(a string) string {
	u, err := url.Parse(a)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return a
	}
	if u.Port() == "" {
		return u.Hostname() + ":443"
	}
	return u.Host
}

// bearer sends a token with every call, from a file when it has one: read again when the file's size or
// modification time changed, so rotated tokens are picked up without a restart.
type bearer struct {
	token string
	file  string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	cached  string
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b *bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	token := b.token
	if b.file != "" {
		var err error
		if token, err = b.fromFile(); err != nil {
			return nil, err
		}
	}
	return map[string]string{"authorization": "Bearer " + token}, nil
}

func (b *bearer) fromFile() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fi, err := os.Stat(b.file)
	if err != nil {
		return "", fmt.Errorf("garden: token file: %w", err)
	}
	if b.cached != "" && fi.ModTime().Equal(b.modTime) && fi.Size() == b.size {
		return b.cached, nil
	}
	data, err := os.ReadFile(b.file)
	if err != nil {
		return "", fmt.Errorf("garden: token file: %w", err)
	}
	b.cached, b.modTime, b.size = strings.TrimSpace(string(data)), fi.ModTime(), fi.Size()
	return b.cached, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: tokens go over TLS only.
func (*bearer) RequireTransportSecurity() bool { return true }
