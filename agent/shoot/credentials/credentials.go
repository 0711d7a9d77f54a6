package credentials

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Names of the credentials, as gardenlet's secrets manager names them.
const (
	NameCA                = "ca"
	NameCAClient          = "ca-client"
	NameCAETCD            = "ca-etcd"
	NameServiceAccountKey = "service-account-key"
	NameETCDEncryptionKey = "kube-apiserver-etcd-encryption-key"
	NameSSHKeypair        = "ssh-keypair"

	// Secrets derived from the credentials in use, rewritten by every Ensure.
	NameCABundle                = "ca-bundle"
	NameCAClientBundle          = "ca-client-bundle"
	NameCAETCDBundle            = "ca-etcd-bundle"
	NameServiceAccountKeyBundle = "service-account-key-bundle"
	NameETCDEncryptionConfig    = "kube-apiserver-etcd-encryption-configuration"
)

// Labels of the managed secrets, as Gardener's secrets manager sets them.
const (
	LabelName            = "name"
	LabelManagedBy       = "managed-by"
	LabelManagerIdentity = "manager-identity"
	LabelInitiation      = "last-rotation-initiation-time"
	LabelPersist         = "persist"
	LabelBundleFor       = "bundle-for"

	managedBy       = "secrets-manager"
	managerIdentity = "gardenlet"
)

// Data keys, as Gardener's secrets utilities name them.
const (
	DataKeyCertificateCA      = "ca.crt"
	DataKeyPrivateKeyCA       = "ca.key"
	DataKeyCertificateBundle  = "bundle.crt"
	DataKeyPublicKeyBundle    = "bundle.key"
	DataKeyRSAPrivateKey      = "id_rsa"
	DataKeySSHAuthorizedKeys  = "id_rsa.pub"
	DataKeyEncryptionKeyName  = "key"
	DataKeyEncryptionSecret   = "secret"
	DataKeyEncryptionConfig   = "encryption-configuration.yaml"
	rotationPhasePreparing    = "Preparing"
	rotationPhasePrepared     = "Prepared"
	rotationPhaseCompleting   = "Completing"
	rotationPhaseNeverRotated = ""
)

// Rotation is what a Shoot's status says about the rotation of one credential.
type Rotation struct {
	// Phase is status.credentials.rotation.<x>.phase ("" for the SSH keypair, whose rotation has one phase).
	Phase string
	// Initiated is lastInitiationTime; zero when the credential was never rotated.
	Initiated time.Time
}

// Want is the credentials a shoot needs and the state of their rotations.
type Want struct {
	CA, ServiceAccountKey, ETCDEncryptionKey Rotation
	// SSHKeypair is nil for a shoot without workers or with SSH access disabled: it has no keypair.
	SSHKeypair *Rotation
}

// Set is the credentials in use after Ensure: the current ones, and the old ones a rotation keeps.
type Set struct {
	CA, CAOld *corev1.Secret
	// CABundle is the PEM of the CA certificates in use, the current first.
	CABundle []byte
	// CAClient signs client certificates of the shoot's kube-apiserver (rotated with CA); CAClientOld is the one a
	// rotation keeps trusted; CAClientBundle is the PEM of both, the current first.
	CAClient, CAClientOld *corev1.Secret
	CAClientBundle        []byte
	// CAETCD signs etcd's serving and client certificates (rotated with CA), CAETCDOld is the one a rotation keeps;
	// CAETCDBundle is the PEM of those in use.
	CAETCD, CAETCDOld *corev1.Secret
	CAETCDBundle      []byte
	// ServiceAccountKey is the current service account signing key (id_rsa).
	ServiceAccountKey *corev1.Secret
	// ServiceAccountKeyBundle is the PEM of the public keys service account tokens are verified with, the current
	// first.
	ServiceAccountKeyBundle []byte
	// ETCDEncryptionKeys are the names of the etcd encryption keys configured, the one that encrypts first.
	ETCDEncryptionKeys []string
	// SSHKeypair and SSHKeypairOld hold id_rsa and id_rsa.pub; nil when there is none.
	SSHKeypair, SSHKeypairOld map[string][]byte
}

// Manager keeps the credentials of one shoot in its namespace of the seed.
type Manager struct {
	c    client.Client
	ns   string
	rand io.Reader
	now  func() time.Time
}

// New returns the manager of the credentials in namespace ns of the seed c. now stamps the certificates and etcd key
// names; rand is the entropy of the keys.
func New(c client.Client, ns string, rand io.Reader, now func() time.Time) *Manager {
	return &Manager{c: c, ns: ns, rand: rand, now: now}
}

// credential is one managed credential: its rotation and how to generate it.
type credential struct {
	name     string
	rotation Rotation
	keepOld  bool
	// generate makes the credential's data; existing are its secrets so far.
	generate func(existing []corev1.Secret) (map[string][]byte, error)
}

func (m *Manager) credentials(w Want) []credential {
	twoPhase := func(r Rotation) bool { return r.Phase == rotationPhasePreparing || r.Phase == rotationPhasePrepared }
	cs := []credential{
		{name: NameCA, rotation: w.CA, keepOld: twoPhase(w.CA), generate: m.generateCA(NameCA)},
		{name: NameCAClient, rotation: w.CA, keepOld: twoPhase(w.CA), generate: m.generateCA(NameCAClient)},
		{name: NameCAETCD, rotation: w.CA, keepOld: twoPhase(w.CA), generate: m.generateCA(NameCAETCD)},
		{name: NameServiceAccountKey, rotation: w.ServiceAccountKey, keepOld: twoPhase(w.ServiceAccountKey), generate: m.generateRSAKey},
		{name: NameETCDEncryptionKey, rotation: w.ETCDEncryptionKey, keepOld: twoPhase(w.ETCDEncryptionKey), generate: m.generateETCDKey},
	}
	if w.SSHKeypair != nil {
		cs = append(cs, credential{name: NameSSHKeypair, rotation: *w.SSHKeypair, keepOld: true, generate: m.generateSSHKeypair})
	}
	return cs
}

// SecretName is the name of the secret of credential name whose rotation was initiated at initiated (zero: never).
func SecretName(name string, initiated time.Time) string {
	h := sha256.Sum256([]byte(name + "|" + initiationLabel(initiated)))
	return name + "-" + hex.EncodeToString(h[:])[:8]
}

func initiationLabel(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.Unix(), 10)
}

func initiationOf(s *corev1.Secret) int64 {
	v, _ := strconv.ParseInt(s.Labels[LabelInitiation], 10, 64)
	return v
}

// ServerCA returns the CA that signs serving certificates: the old one while a rotation keeps it, so that clients
// that trust only the old CA still verify the servers until the rotation completes (client certificates are signed
// by the current one, which the servers trust alongside the old), as Gardener's secrets manager signs them.
func ServerCA(cur, old *corev1.Secret) *corev1.Secret {
	if old != nil {
		return old
	}
	return cur
}

// Ensure generates the credentials of w that do not exist yet and writes the bundles of those in use.
func (m *Manager) Ensure(ctx context.Context, w Want) (*Set, error) {
	set := &Set{}
	for _, cr := range m.credentials(w) {
		cur, old, err := m.ensure(ctx, cr)
		if err != nil {
			return nil, err
		}
		inUse := []*corev1.Secret{cur}
		if old != nil {
			inUse = append(inUse, old)
		}
		switch cr.name {
		case NameCA:
			set.CA, set.CAOld = cur, old
			for _, s := range inUse {
				set.CABundle = append(set.CABundle, s.Data[DataKeyCertificateCA]...)
			}
		case NameCAClient:
			set.CAClient, set.CAClientOld = cur, old
			for _, s := range inUse {
				set.CAClientBundle = append(set.CAClientBundle, s.Data[DataKeyCertificateCA]...)
			}
		case NameCAETCD:
			set.CAETCD, set.CAETCDOld = cur, old
			for _, s := range inUse {
				set.CAETCDBundle = append(set.CAETCDBundle, s.Data[DataKeyCertificateCA]...)
			}
		case NameServiceAccountKey:
			set.ServiceAccountKey = cur
			for _, s := range inUse {
				pub, err := publicKeyPEM(s.Data[DataKeyRSAPrivateKey])
				if err != nil {
					return nil, fmt.Errorf("secret %s/%s: %w", m.ns, s.Name, err)
				}
				set.ServiceAccountKeyBundle = append(set.ServiceAccountKeyBundle, pub...)
			}
		case NameETCDEncryptionKey:
			for _, s := range inUse {
				set.ETCDEncryptionKeys = append(set.ETCDEncryptionKeys, string(s.Data[DataKeyEncryptionKeyName]))
			}
			if err := m.writeDerived(ctx, NameETCDEncryptionConfig, cr.name, map[string][]byte{DataKeyEncryptionConfig: encryptionConfiguration(inUse)}); err != nil {
				return nil, err
			}
		case NameSSHKeypair:
			set.SSHKeypair = cur.Data
			if old != nil {
				set.SSHKeypairOld = old.Data
			}
		}
	}
	if err := m.writeDerived(ctx, NameCABundle, NameCA, map[string][]byte{DataKeyCertificateBundle: set.CABundle}); err != nil {
		return nil, err
	}
	if err := m.writeDerived(ctx, NameCAClientBundle, NameCAClient, map[string][]byte{DataKeyCertificateBundle: set.CAClientBundle}); err != nil {
		return nil, err
	}
	if err := m.writeDerived(ctx, NameCAETCDBundle, NameCAETCD, map[string][]byte{DataKeyCertificateBundle: set.CAETCDBundle}); err != nil {
		return nil, err
	}
	if err := m.writeDerived(ctx, NameServiceAccountKeyBundle, NameServiceAccountKey, map[string][]byte{DataKeyPublicKeyBundle: set.ServiceAccountKeyBundle}); err != nil {
		return nil, err
	}
	return set, nil
}

// ensure returns the current secret of cr, generated if missing, and the old one if cr keeps it.
func (m *Manager) ensure(ctx context.Context, cr credential) (cur, old *corev1.Secret, err error) {
	existing, err := m.list(ctx, cr.name)
	if err != nil {
		return nil, nil, err
	}
	name := SecretName(cr.name, cr.rotation.Initiated)
	for i := range existing {
		if existing[i].Name == name {
			cur = &existing[i]
		}
	}
	if cur == nil {
		if cur, err = m.create(ctx, cr, name, existing); err != nil {
			return nil, nil, err
		}
	}
	if cr.keepOld {
		old = previous(existing, cur)
	}
	return cur, old, nil
}

// previous is the newest of secrets initiated before cur: the credential cur replaces.
func previous(secrets []corev1.Secret, cur *corev1.Secret) *corev1.Secret {
	var old *corev1.Secret
	for i := range secrets {
		s := &secrets[i]
		if s.Name == cur.Name || s.DeletionTimestamp != nil || initiationOf(s) >= initiationOf(cur) {
			continue
		}
		if old == nil || initiationOf(s) > initiationOf(old) {
			old = s
		}
	}
	return old
}

func (m *Manager) list(ctx context.Context, name string) ([]corev1.Secret, error) {
	l := &corev1.SecretList{}
	if err := m.c.List(ctx, l, client.InNamespace(m.ns), client.MatchingLabels{LabelName: name, LabelManagedBy: managedBy}); err != nil {
		return nil, fmt.Errorf("list the %s secrets in %s: %w", name, m.ns, err)
	}
	slices.SortFunc(l.Items, func(a, b corev1.Secret) int { return strings.Compare(a.Name, b.Name) })
	return l.Items, nil
}

// create generates cr's secret named name. A secret a concurrent or interrupted run created first wins: its keys
// are the ones in use.
func (m *Manager) create(ctx context.Context, cr credential, name string, existing []corev1.Secret) (*corev1.Secret, error) {
	data, err := cr.generate(existing)
	if err != nil {
		return nil, fmt.Errorf("generate %s: %w", cr.name, err)
	}
	s := &corev1.Secret{
		ObjectMeta: kmetav1.ObjectMeta{Name: name, Namespace: m.ns, Labels: map[string]string{
			LabelName: cr.name, LabelManagedBy: managedBy, LabelManagerIdentity: managerIdentity,
			LabelInitiation: initiationLabel(cr.rotation.Initiated), LabelPersist: "true",
		}},
		Type:      corev1.SecretTypeOpaque,
		Data:      data,
		Immutable: ptr(true),
	}
	err = m.c.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		err = m.c.Get(ctx, client.ObjectKeyFromObject(s), s)
	}
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", m.ns, name, err)
	}
	return s, nil
}

// writeDerived writes a secret computed from the credentials in use.
func (m *Manager) writeDerived(ctx context.Context, name, of string, data map[string][]byte) error {
	s := &corev1.Secret{ObjectMeta: kmetav1.ObjectMeta{Name: name, Namespace: m.ns}}
	_, err := controllerutil.CreateOrUpdate(ctx, m.c, s, func() error {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[LabelManagedBy] = managedBy
		s.Labels[LabelManagerIdentity] = managerIdentity
		s.Labels[LabelBundleFor] = of
		s.Type = corev1.SecretTypeOpaque
		s.Data = data
		return nil
	})
	if err != nil {
		return fmt.Errorf("secret %s/%s: %w", m.ns, name, err)
	}
	return nil
}

// Cleanup deletes the credentials' secrets that are no longer in use: those of earlier rotations, the old ones of a
// completing rotation, and the SSH keypairs of a shoot that has none.
func (m *Manager) Cleanup(ctx context.Context, w Want) error {
	keep := map[string]bool{}
	for _, cr := range m.credentials(w) {
		existing, err := m.list(ctx, cr.name)
		if err != nil {
			return err
		}
		name := SecretName(cr.name, cr.rotation.Initiated)
		keep[name] = true
		for i := range existing {
			if existing[i].Name == name && cr.keepOld {
				if old := previous(existing, &existing[i]); old != nil {
					keep[old.Name] = true
				}
			}
		}
	}
	for _, name := range []string{NameCA, NameCAClient, NameCAETCD, NameServiceAccountKey, NameETCDEncryptionKey, NameSSHKeypair} {
		existing, err := m.list(ctx, name)
		if err != nil {
			return err
		}
		for i := range existing {
			if keep[existing[i].Name] {
				continue
			}
			if err := m.c.Delete(ctx, &existing[i]); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete secret %s/%s: %w", m.ns, existing[i].Name, err)
			}
		}
	}
	return nil
}

// Entry is a persisted secret, as a ShootState's spec.gardener holds it.
type Entry struct {
	Name   string
	Labels map[string]string
	Data   map[string][]byte
}

// Export returns the credentials' secrets, for the ShootState of a control plane migration.
func (m *Manager) Export(ctx context.Context) ([]Entry, error) {
	l := &corev1.SecretList{}
	if err := m.c.List(ctx, l, client.InNamespace(m.ns), client.MatchingLabels{LabelManagedBy: managedBy, LabelPersist: "true"}); err != nil {
		return nil, fmt.Errorf("list the persisted secrets in %s: %w", m.ns, err)
	}
	out := make([]Entry, 0, len(l.Items))
	for _, s := range l.Items {
		out = append(out, Entry{Name: s.Name, Labels: s.Labels, Data: s.Data})
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Import creates the secrets of entries that do not exist yet: a restored control plane keeps its credentials.
func (m *Manager) Import(ctx context.Context, entries []Entry) error {
	var errs []error
	for _, e := range entries {
		if e.Labels[LabelManagedBy] != managedBy {
			continue
		}
		s := &corev1.Secret{ObjectMeta: kmetav1.ObjectMeta{Name: e.Name, Namespace: m.ns, Labels: e.Labels},
			Type: corev1.SecretTypeOpaque, Data: e.Data, Immutable: ptr(true)}
		if err := m.c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("restore secret %s/%s: %w", m.ns, e.Name, err))
		}
	}
	return errors.Join(errs...)
}

func ptr[T any](v T) *T { return &v }
