package shoot

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	if err := op.credentialsManager().Cleanup(ctx, rotationWant(op.shoot)); err != nil {
		return err
	}
	return op.cleanupKubeconfigs(ctx)
}

// cleanupKubeconfigs deletes the components' kubeconfig secrets (kubeconfig-<certificate>, made by kubeconfigSecret
// with a new name for each new certificate) that none of the control plane's Deployments mounts any more. It runs at the end
// of the flow, when kube-controller-manager and kube-scheduler have rolled out to their current kubeconfigs.
func (op *operation) cleanupKubeconfigs(ctx context.Context) error {
	secrets := &corev1.SecretList{}
	if err := op.c.cfg.Seed.List(ctx, secrets, client.InNamespace(op.ns), client.MatchingLabels{labelPurpose: purposeKubeconfig}); err != nil {
		return fmt.Errorf("list the kubeconfig secrets of %s: %w", op.ns, err)
	}
	if len(secrets.Items) == 0 {
		return nil
	}
	// The components that mount kubeconfigs, read by name: the agent's seed access has no list of Deployments.
	used := map[string]bool{}
	for _, name := range []string{deployKubeAPIServer, deployKCM, deployScheduler} {
		d := &appsv1.Deployment{}
		if err := op.c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: name}, d); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("read deployment %s/%s: %w", op.ns, name, err)
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil {
				used[v.Secret.SecretName] = true
			}
		}
	}
	for i := range secrets.Items {
		if used[secrets.Items[i].Name] || !strings.HasPrefix(secrets.Items[i].Name, "kubeconfig-") {
			continue
		}
		if err := op.c.cfg.Seed.Delete(ctx, &secrets.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete the unused kubeconfig secret %s/%s: %w", op.ns, secrets.Items[i].Name, err)
		}
	}
	return nil
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
