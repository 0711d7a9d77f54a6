package pki

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Phase is the phase of a CA rotation, named as Gardener's credentials rotation phases.
type Phase string

// The phases of a rotation. Start moves from none (or Completed) to Preparing; MarkPrepared to Prepared once every
// certificate is re-issued under the new CA; Complete through Completing (old CA being dropped) to Completed.
const (
	PhaseNone       Phase = ""
	PhasePreparing  Phase = "Preparing"
	PhasePrepared   Phase = "Prepared"
	PhaseCompleting Phase = "Completing"
	PhaseCompleted  Phase = "Completed"
)

// Status is the rotation state an operator sees.
type Status struct {
	Phase          Phase     `json:"phase,omitempty"`
	LastInitiation time.Time `json:"lastInitiationTime,omitzero"`
	LastCompletion time.Time `json:"lastCompletionTime,omitzero"`
	// CurrentSerial and NextSerial identify the CAs (hex serial numbers); NextSerial is set while a rotation runs.
	CurrentSerial string `json:"currentSerial"`
	NextSerial    string `json:"nextSerial,omitempty"`
}

// rotationRecord is what is stored, sealed, at the rotation key.
type rotationRecord struct {
	Status
	// Next is the new CA's certificate and key in PEM, present from Preparing until Completed.
	Next []byte `json:"next,omitempty"`
}

// ErrPhase is returned when a phase transition is asked for in a phase that does not allow it.
var ErrPhase = errors.New("rotation phase does not allow this")

// Authority is the hub's CA with its rotation: it holds the current CA and, while a rotation runs, the next one.
// Trust (Pool, BundlePEM) covers both; new certificates are issued by Signer, the next CA as soon as a rotation
// starts. Its state lives in etcd (the CA at key, the rotation at key+"/rotation"), so every replica agrees; Reload
// picks up another replica's transitions.
type Authority struct {
	cli    *clientv3.Client
	key    string
	sealer Sealer

	mu      sync.RWMutex
	current *CA
	next    *CA
	// nextBundle is next's certificate and key in PEM, as stored.
	nextBundle []byte
	status     Status
	rev        int64 // mod revision of the rotation key, 0 when absent
	// readRev is the etcd revision of the state held: a Reload that read an older revision (one racing another
	// Reload or a transition) leaves the newer state alone.
	readRev int64
}

// OpenAuthority loads (or creates) the CA at key and the rotation state beside it.
func OpenAuthority(ctx context.Context, cli *clientv3.Client, key string, sealer Sealer) (*Authority, error) {
	a := &Authority{cli: cli, key: key, sealer: sealer}
	if err := a.Reload(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Authority) rotationKey() string { return a.key + "/rotation" }

// Reload reads the CA and the rotation state from etcd, both at one revision (a transition changes them together),
// and keeps them unless the state held was read at a newer revision.
func (a *Authority) Reload(ctx context.Context) error {
	resp, err := a.cli.Txn(ctx).Then(clientv3.OpGet(a.key), clientv3.OpGet(a.rotationKey())).Commit()
	if err != nil {
		return fmt.Errorf("read CA and its rotation: %w", err)
	}
	caKvs, rotKvs := resp.Responses[0].GetResponseRange().GetKvs(), resp.Responses[1].GetResponseRange().GetKvs()
	if len(caKvs) == 0 { // the first start: create the CA, then read again
		if _, err := LoadOrCreate(ctx, a.cli, a.key, a.sealer); err != nil {
			return err
		}
		return a.Reload(ctx)
	}
	plainCA, err := a.sealer.Open(a.key, caKvs[0].Value)
	if err != nil {
		return fmt.Errorf("unseal CA: %w", err)
	}
	current, err := parseCA(plainCA)
	if err != nil {
		return err
	}
	var rec rotationRecord
	var rev int64
	if len(rotKvs) == 1 {
		plain, err := a.sealer.Open(a.rotationKey(), rotKvs[0].Value)
		if err != nil {
			return fmt.Errorf("unseal CA rotation: %w", err)
		}
		if err := json.Unmarshal(plain, &rec); err != nil {
			return fmt.Errorf("decode CA rotation: %w", err)
		}
		rev = rotKvs[0].ModRevision
	}
	var next *CA
	if len(rec.Next) > 0 {
		if next, err = parseCA(rec.Next); err != nil {
			return fmt.Errorf("next CA: %w", err)
		}
	}
	rec.CurrentSerial = current.Cert.SerialNumber.Text(16)
	a.mu.Lock()
	defer a.mu.Unlock()
	if resp.Header.GetRevision() < a.readRev {
		return nil
	}
	a.current, a.next, a.nextBundle, a.status, a.rev, a.readRev = current, next, rec.Next, rec.Status, rev, resp.Header.GetRevision()
	return nil
}

// Current returns the CA that is trusted outside a rotation (the old one during a rotation).
func (a *Authority) Current() *CA {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.current
}

// Signer returns the CA new certificates are issued by: the next CA while a rotation runs, else the current one.
func (a *Authority) Signer() *CA {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.next != nil {
		return a.next
	}
	return a.current
}

// SignerKeyID returns the subject key id of Signer: the authority key id of the certificates it issues.
func (a *Authority) SignerKeyID() []byte { return a.Signer().Cert.SubjectKeyId }

// trusted returns the CAs certificates are accepted from: the current one and, during a rotation, the next one.
func (a *Authority) trusted() []*CA {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.next != nil {
		return []*CA{a.current, a.next}
	}
	return []*CA{a.current}
}

// Pool returns the trust bundle as a cert pool.
func (a *Authority) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range a.trusted() {
		p.AddCert(ca.Cert)
	}
	return p
}

// BundlePEM returns the trust bundle in PEM, the current CA first.
func (a *Authority) BundlePEM() []byte {
	var out []byte
	for _, ca := range a.trusted() {
		out = append(out, ca.CertPEM...)
	}
	return out
}

// SignClientCert issues a client certificate with Signer (see CA.SignClientCert).
func (a *Authority) SignClientCert(csr *x509.CertificateRequest, validity time.Duration) ([]byte, error) {
	return a.Signer().SignClientCert(csr, validity)
}

// Status returns the rotation's state.
func (a *Authority) Status() Status {
	a.mu.RLock()
	defer a.mu.RUnlock()
	s := a.status
	s.CurrentSerial = a.current.Cert.SerialNumber.Text(16)
	if a.next != nil {
		s.NextSerial = a.next.Cert.SerialNumber.Text(16)
	}
	return s
}

// Start begins a rotation (phase Preparing): a new CA is created and joins the trust bundle, and issues every
// certificate from now on. It is allowed when no rotation runs (phase none or Completed).
func (a *Authority) Start(ctx context.Context, now time.Time) (Status, error) {
	_, bundle, err := newCA()
	if err != nil {
		return Status{}, err
	}
	err = a.transition(ctx, []Phase{PhaseNone, PhaseCompleted}, func(rec *rotationRecord) ([]clientv3.Op, error) {
		rec.Phase, rec.LastInitiation, rec.LastCompletion, rec.Next = PhasePreparing, now.UTC(), time.Time{}, bundle
		return nil, nil
	})
	if err != nil {
		return Status{}, fmt.Errorf("start CA rotation: %w", err)
	}
	return a.Status(), nil
}

// MarkPrepared moves Preparing to Prepared: the caller has seen every certificate re-issued under the new CA.
func (a *Authority) MarkPrepared(ctx context.Context) error {
	err := a.transition(ctx, []Phase{PhasePreparing}, func(rec *rotationRecord) ([]clientv3.Op, error) {
		rec.Phase = PhasePrepared
		return nil, nil
	})
	if err != nil {
		return fmt.Errorf("mark CA rotation prepared: %w", err)
	}
	return nil
}

// Complete ends a rotation: Prepared → Completing → Completed. At Completed the new CA has replaced the current one:
// the old CA is out of the trust bundle and certificates it issued are refused. Complete resumes a Completing left
// by a crash. Completing from Preparing is refused, as Gardener refuses it: certificates of the old CA may still be
// in use.
func (a *Authority) Complete(ctx context.Context, now time.Time) error {
	err := a.transition(ctx, []Phase{PhasePrepared, PhaseCompleting}, func(rec *rotationRecord) ([]clientv3.Op, error) {
		rec.Phase = PhaseCompleting
		return nil, nil
	})
	if err != nil {
		return fmt.Errorf("complete CA rotation: %w", err)
	}
	err = a.transition(ctx, []Phase{PhaseCompleting}, func(rec *rotationRecord) ([]clientv3.Op, error) {
		sealed, err := a.sealer.Seal(a.key, rec.Next)
		if err != nil {
			return nil, err
		}
		rec.Phase, rec.LastCompletion, rec.Next = PhaseCompleted, now.UTC(), nil
		return []clientv3.Op{clientv3.OpPut(a.key, string(sealed))}, nil
	})
	if err != nil {
		return fmt.Errorf("complete CA rotation: %w", err)
	}
	return nil
}

// transition applies change to the stored rotation record if its phase is one of from, in one compare-and-swap on
// the rotation key's revision together with the operations change returns, and reloads.
func (a *Authority) transition(ctx context.Context, from []Phase, change func(*rotationRecord) ([]clientv3.Op, error)) error {
	if err := a.Reload(ctx); err != nil {
		return err
	}
	a.mu.RLock()
	rec := rotationRecord{Status: a.status, Next: a.nextBundle}
	rev := a.rev
	a.mu.RUnlock()
	if !slices.Contains(from, rec.Phase) {
		return fmt.Errorf("phase is %q: %w", rec.Phase, ErrPhase)
	}
	ops, err := change(&rec)
	if err != nil {
		return err
	}
	rec.CurrentSerial, rec.NextSerial = "", ""
	plain, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	sealed, err := a.sealer.Seal(a.rotationKey(), plain)
	if err != nil {
		return err
	}
	ops = append(ops, clientv3.OpPut(a.rotationKey(), string(sealed)))
	txn, err := a.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(a.rotationKey()), "=", rev)).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("store CA rotation: %w", err)
	}
	if !txn.Succeeded {
		return errors.New("CA rotation changed concurrently, retry")
	}
	return a.Reload(ctx)
}
