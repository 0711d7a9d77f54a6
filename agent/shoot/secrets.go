package shoot

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"

	"github.com/trellis-dev/trellis/agent/shoot/credentials"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// shootStateSecretType is the type of a secret in a ShootState's spec.gardener, as gardenlet writes it.
const shootStateSecretType = "secret"

// credentialsManager is the manager of the shoot's credentials in its namespace of the seed.
func (op *operation) credentialsManager() *credentials.Manager {
	return credentials.New(op.c.cfg.Seed, op.ns, rand.Reader, op.c.cfg.Now)
}

// deployCredentials generates the shoot's credentials as its rotation status asks (restoring them from the
// ShootState first in a restore) and publishes the CA bundle and SSH keypairs in the project namespace.
func (op *operation) deployCredentials(ctx context.Context) error {
	m := op.credentialsManager()
	if op.d.Type == opRestore {
		if err := m.Import(ctx, shootStateCredentials(op.state)); err != nil {
			return err
		}
	}
	set, err := m.Ensure(ctx, rotationWant(op.shoot))
	if err != nil {
		return err
	}
	if err := op.publishCAClient(ctx, set); err != nil {
		return err
	}
	return op.publishCredentials(ctx, set)
}

// cleanupCredentials deletes the credentials no longer in use once the rest of the flow succeeded: the old ones of a
// completed rotation go only when everything was deployed without them.
func (op *operation) cleanupCredentials(ctx context.Context) error {
	return op.credentialsManager().Cleanup(ctx, rotationWant(op.shoot))
}

// shootStateCredentials are the credentials' secrets a ShootState holds.
func shootStateCredentials(st *corev1beta1.ShootState) []credentials.Entry {
	var out []credentials.Entry
	for _, g := range st.GetSpec().GetGardener() {
		if g.GetType() != shootStateSecretType {
			continue
		}
		var data map[string][]byte
		if err := json.Unmarshal(g.GetData().GetRaw(), &data); err != nil {
			continue // not a secret's data; nothing to restore from it
		}
		out = append(out, credentials.Entry{Name: g.GetName(), Labels: g.GetLabels(), Data: data})
	}
	return out
}

// persistedCredentials are the shoot's credentials as ShootState entries, for a migration.
func (op *operation) persistedCredentials(ctx context.Context) ([]*corev1beta1.GardenerResourceData, error) {
	entries, err := op.credentialsManager().Export(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1beta1.GardenerResourceData, 0, len(entries))
	for _, e := range entries {
		data, err := json.Marshal(e.Data)
		if err != nil {
			return nil, fmt.Errorf("encode secret %s: %w", e.Name, err)
		}
		out = append(out, &corev1beta1.GardenerResourceData{Name: e.Name, Type: shootStateSecretType, Labels: e.Labels, Data: &metav1.RawExtension{Raw: data}})
	}
	return out, nil
}
