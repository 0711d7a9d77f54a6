package etcdcluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/trellis-dev/trellis/test/binproc"
)

// Config says how to run the cluster.
type Config struct {
	// Bin is the etcd binary (bin/testbin/etcd).
	Bin string
	// Dir holds the members' data, the certificates (pki/) and the logs (member-<i>.log); it must be empty or absent.
	Dir string
	// Members is the cluster size (default 3).
	Members int
	// NoFsync runs the members with --unsafe-no-fsync (tests: data need not survive a machine crash).
	NoFsync bool
	// ReadyTimeout bounds the wait for the cluster to serve (default 30 s).
	ReadyTimeout time.Duration
}

// Cluster is a running etcd cluster.
type Cluster struct {
	cfg     Config
	members []*binproc.Process
	clients []string
	// CAFile, CertFile and KeyFile are the CA bundle that verifies the members and the client certificate and key
	// that they accept: the hub's --etcd-ca, --etcd-cert and --etcd-key.
	CAFile, CertFile, KeyFile string
}

// Start makes the certificates, starts every member and waits until the cluster answers a read through each
// member. On failure what was started is stopped.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Members == 0 {
		cfg.Members = 3
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.Members < 1 {
		return nil, fmt.Errorf("etcdcluster: Members must be positive, got %d", cfg.Members)
	}
	if _, err := os.Stat(cfg.Bin); err != nil {
		return nil, fmt.Errorf("etcd binary: %w (make testbin)", err)
	}
	c := &Cluster{cfg: cfg}
	if err := c.writePKI(); err != nil {
		return nil, err
	}
	// A free port can be taken by another process before its member binds it: then, and only then, start the
	// cluster again on other ports.
	var err error
	for range 3 {
		if err = c.start(ctx); err == nil {
			return c, nil
		}
		c.Stop()
		if ctx.Err() != nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		for i := range cfg.Members {
			if rerr := os.RemoveAll(filepath.Join(cfg.Dir, memberName(i))); rerr != nil {
				return nil, errors.Join(err, rerr)
			}
		}
	}
	return nil, err
}

// start starts every member on free ports and waits until the cluster is ready.
func (c *Cluster) start(ctx context.Context) error {
	cfg := c.cfg
	addrs, err := binproc.FreeAddrs(2 * cfg.Members)
	if err != nil {
		return err
	}
	c.clients, c.members = nil, nil
	peers := make([]string, cfg.Members)
	var initial []string
	for i := range cfg.Members {
		c.clients = append(c.clients, "https://"+addrs[2*i])
		peers[i] = "https://" + addrs[2*i+1]
		initial = append(initial, memberName(i)+"="+peers[i])
	}
	pki := filepath.Join(cfg.Dir, "pki")
	for i := range cfg.Members {
		cert, key := filepath.Join(pki, memberName(i)+".crt"), filepath.Join(pki, memberName(i)+".key")
		args := []string{
			"--name", memberName(i),
			"--data-dir", filepath.Join(cfg.Dir, memberName(i)),
			"--listen-client-urls", c.clients[i], "--advertise-client-urls", c.clients[i],
			"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "trellis-etcdcluster",
			"--cert-file", cert, "--key-file", key, "--trusted-ca-file", c.CAFile, "--client-cert-auth",
			"--peer-cert-file", cert, "--peer-key-file", key, "--peer-trusted-ca-file", c.CAFile, "--peer-client-cert-auth",
			"--log-level", "warn",
		}
		if cfg.NoFsync {
			args = append(args, "--unsafe-no-fsync")
		}
		p := binproc.New(binproc.Config{Name: memberName(i), Path: cfg.Bin, Args: args,
			LogPath: filepath.Join(cfg.Dir, memberName(i)+".log")})
		if err := p.Start(); err != nil {
			return err
		}
		c.members = append(c.members, p)
	}
	return c.waitReady(ctx)
}

func memberName(i int) string { return "member-" + strconv.Itoa(i) }

// Endpoints are the members' client URLs (https://127.0.0.1:<port>).
func (c *Cluster) Endpoints() []string { return append([]string(nil), c.clients...) }

// HubArgs are the hub's flags for this cluster: --etcd-endpoints and the TLS files.
func (c *Cluster) HubArgs() []string {
	return []string{"--etcd-endpoints", strings.Join(c.clients, ","), "--etcd-ca", c.CAFile, "--etcd-cert", c.CertFile, "--etcd-key", c.KeyFile}
}

// PIDs are the members' process ids (0 for a member that is not running).
func (c *Cluster) PIDs() []int {
	out := make([]int, len(c.members))
	for i, m := range c.members {
		out[i] = m.PID()
	}
	return out
}

// Client returns a client of the cluster with its client certificate; the caller closes it.
func (c *Cluster) Client() (*clientv3.Client, error) {
	tc, err := c.clientTLS()
	if err != nil {
		return nil, err
	}
	return clientv3.New(clientv3.Config{Endpoints: c.clients, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

func (c *Cluster) clientTLS() (*tls.Config, error) {
	pool, err := binproc.LoadCA(c.CAFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// waitReady waits until a linearizable read succeeds through every member (each has joined and a leader exists).
func (c *Cluster) waitReady(ctx context.Context) error {
	tc, err := c.clientTLS()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(c.cfg.ReadyTimeout)
	for i, ep := range c.clients {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		for {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err = cli.Get(rctx, "health")
			cancel()
			if err == nil {
				break
			}
			// Any member that exited fails the start (one that could not bind its port leaves the others without a
			// quorum), with its log since this start.
			for j, m := range c.members {
				if !m.Running() {
					cli.Close()
					log, _ := m.LogSinceStart()
					return fmt.Errorf("etcd %s exited: %v; log:\n%s", memberName(j), m.Err(), log)
				}
			}
			if ctx.Err() != nil || time.Now().After(deadline) {
				cli.Close()
				return fmt.Errorf("etcd %s at %s not ready within %s: %w; log:\n%s", memberName(i), ep, c.cfg.ReadyTimeout,
					errors.Join(err, ctx.Err()), c.members[i].TailLines(20))
			}
			time.Sleep(50 * time.Millisecond)
		}
		cli.Close()
	}
	return nil
}

// Stop kills every member and waits for it; the data stays in Dir.
func (c *Cluster) Stop() {
	for _, m := range c.members {
		if m.Running() {
			_ = m.Kill()
		}
	}
}

// writePKI makes the CA, one certificate per member (server and client auth, for 127.0.0.1 and localhost: members
// present it to clients and to each other) and a client certificate, under Dir/pki.
func (c *Cluster) writePKI() error {
	dir := filepath.Join(c.cfg.Dir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "etcdcluster CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	c.CAFile = filepath.Join(dir, "ca.crt")
	if err := writePEM(c.CAFile, "CERTIFICATE", caDER); err != nil {
		return err
	}
	issue := func(name string, server bool) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if server {
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
			tmpl.IPAddresses, tmpl.DNSNames = []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(filepath.Join(dir, name+".key"), "EC PRIVATE KEY", keyDER)
	}
	for i := range c.cfg.Members {
		if err := issue(memberName(i), true); err != nil {
			return err
		}
	}
	c.CertFile, c.KeyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	return issue("client", false)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
