package hub

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/trellis-dev/trellis/hub/pki"
)

// servingValidity is the validity of the serving certificate the hub issues itself from its CA.
const servingValidity = 365 * 24 * time.Hour

// trust is a replica's TLS material, kept in step with the CA and its rotation in etcd: the serving certificate
// (issued by the current CA: while a rotation runs, agents that have not yet picked up the new bundle still trust
// it; after its completion, by the new CA), the client CAs (the trust bundle: both CAs while a rotation runs), the
// session ticket key (derived from the current CA, so tickets of before a completed rotation no longer resume) and
// data-dir/pki/ca.crt. The listeners take the material at every handshake (tls.Config.GetConfigForClient), and watch
// follows etcd, where any replica's `trellisctl ca-rotation` writes, so the phases apply without a restart.
type trust struct {
	authority *pki.Authority
	hosts     []string
	caFile    string
	log       *slog.Logger
	// fixed is an operator's serving certificate (--tls-cert-file): served as it is, never re-issued by the CA.
	fixed *tls.Certificate

	mu        sync.Mutex // serializes refresh and listener registration
	servingCA *x509.Certificate
	serving   tls.Certificate
	bundle    string
	listeners []*trustedListener
	onChange  []func()
}

// trustedListener is one listener's TLS configuration, rebuilt from the material on every change.
type trustedListener struct {
	build func(m tlsMaterial) *tls.Config
	cur   atomic.Pointer[tls.Config]
}

// tlsMaterial is what a listener's configuration is built from.
type tlsMaterial struct {
	Serving   tls.Certificate
	ClientCAs *x509.CertPool
	TicketKey [32]byte
}

// newTrust issues the serving certificate for hosts (or serves fixed, an operator's, when not nil) and writes the
// trust bundle to caFile.
func newTrust(authority *pki.Authority, hosts []string, caFile string, fixed *tls.Certificate, log *slog.Logger) (*trust, error) {
	t := &trust{authority: authority, hosts: hosts, caFile: caFile, fixed: fixed, log: log}
	if err := t.refresh(); err != nil {
		return nil, err
	}
	return t, nil
}

// serverConfig returns the configuration of a listener whose configuration build makes from the current material.
// build must set NextProtos itself (the returned configuration's are only what the server announces before).
func (t *trust) serverConfig(nextProtos []string, build func(m tlsMaterial) *tls.Config) (*tls.Config, error) {
	current, err := t.listenerConfig(build)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return current(), nil
		},
	}, nil
}

// listenerConfig registers a listener whose configuration build makes from the current material, and returns the
// function that gives its current configuration (a new one after each change of the material, the same one until
// then).
func (t *trust) listenerConfig(build func(m tlsMaterial) *tls.Config) (func() *tls.Config, error) {
	l := &trustedListener{build: build}
	t.mu.Lock()
	defer t.mu.Unlock()
	m, err := t.material()
	if err != nil {
		return nil, err
	}
	l.cur.Store(build(m))
	t.listeners = append(t.listeners, l)
	return l.cur.Load, nil
}

// OnChange registers f to run after each change of the CA or its rotation state.
func (t *trust) OnChange(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.onChange = append(t.onChange, f)
}

// material is the current TLS material; t.mu is held.
func (t *trust) material() (tlsMaterial, error) {
	key, err := t.authority.Current().SessionTicketKey()
	if err != nil {
		return tlsMaterial{}, err
	}
	return tlsMaterial{Serving: t.serving, ClientCAs: t.authority.Pool(), TicketKey: key}, nil
}

// refresh re-issues the serving certificate when the current CA changed, rebuilds the listeners' configurations and
// rewrites caFile when the bundle changed. It reports the change to the OnChange functions.
func (t *trust) refresh() error {
	t.mu.Lock()
	cur := t.authority.Current()
	if t.fixed != nil {
		t.serving = *t.fixed
	} else if t.servingCA == nil || !t.servingCA.Equal(cur.Cert) {
		serving, err := cur.ServingCert(t.hosts, servingValidity)
		if err != nil {
			t.mu.Unlock()
			return fmt.Errorf("serving certificate: %w", err)
		}
		if t.servingCA != nil {
			t.log.Info("serving certificate re-issued by the current CA", "caSerial", cur.Cert.SerialNumber.Text(16))
		}
		t.servingCA, t.serving = cur.Cert, serving
	}
	m, err := t.material()
	if err != nil {
		t.mu.Unlock()
		return err
	}
	for _, l := range t.listeners {
		l.cur.Store(l.build(m))
	}
	if bundle := string(t.authority.BundlePEM()); bundle != t.bundle {
		if err := writeFileAtomic(t.caFile, []byte(bundle), 0o644); err != nil {
			t.mu.Unlock()
			return err
		}
		t.bundle = bundle
	}
	onChange := t.onChange
	t.mu.Unlock()
	for _, f := range onChange {
		f()
	}
	return nil
}

// trustRewatch is the pause before watching again after the watch of the CA's keys failed.
const trustRewatch = time.Second

// watch follows the keys of the CA and its rotation under key (pki.Authority's) until ctx ends: each change reloads
// the authority and refreshes the material. After a failed watch it reloads once more, for changes it may have
// missed, and watches again.
func (t *trust) watch(ctx context.Context, cli *clientv3.Client, key string) error {
	reload := func() {
		if err := t.authority.Reload(ctx); err != nil {
			if ctx.Err() == nil {
				t.log.Warn("cannot reload the CA", "err", err)
			}
			return
		}
		if err := t.refresh(); err != nil {
			t.log.Error("cannot apply the CA's new state", "err", err)
		}
	}
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range cli.Watch(wctx, key, clientv3.WithPrefix()) {
			if err := resp.Err(); err != nil {
				t.log.Warn("watch of the CA interrupted", "err", err)
				break
			}
			reload()
		}
		cancel()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(trustRewatch):
		}
		reload()
	}
	return nil
}
