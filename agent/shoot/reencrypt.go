package shoot

import (
	"context"
	"encoding/json"
	"fmt"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The etcd encryption key rotation rewrites the shoot's encrypted data, as gardenlet's secretsrotation does: while
// Preparing, once kube-apiserver encrypts with the new key (and still decrypts with the old one), every object of an
// encrypted resource gets the label labelEncryptionKeyName with the new key's name. The label's change is an update,
// so kube-apiserver writes the object again, encrypted with the new key. The label marks what is done: a flow that
// was interrupted (an agent restart, a failed patch) lists only what lacks it and goes on from there. When everything
// carries it, annotationResourcesLabeled on the kube-apiserver Deployment records it for the key, and later
// reconciles of the phase skip the step. While Completing, once the old key is gone from the configuration, the labels
// are removed again (a second rewrite under the new key) and so is the annotation.
const (
	taskRewriteEncryptedAddLabel    = "Labeling encrypted resources to rewrite them with the new ETCD encryption key"
	taskRewriteEncryptedRemoveLabel = "Removing label from encrypted resources after rotation of ETCD encryption key"

	labelEncryptionKeyName     = "credentials.gardener.cloud/key-name"
	annotationResourcesLabeled = "credentials.gardener.cloud/resources-labeled"

	// rewritePageSize is how many objects one list of the rewrite returns; rewriteParallel how many patches of a
	// page are in flight at once (the client's QPS limit applies on top).
	rewritePageSize = 500
	rewriteParallel = 8
)

// encryptedResources are the resources the shoot's EncryptionConfiguration encrypts (credentials'
// encryptionConfiguration): the ones the rotation rewrites.
func encryptedResources() []schema.GroupVersionResource {
	return []schema.GroupVersionResource{{Version: "v1", Resource: "secrets"}}
}

// rewriteEncryptedAddLabel is the Preparing phase's rewrite: every encrypted object is written again under the new
// etcd encryption key, the one kube-apiserver now encrypts with. It fails while the shoot is hibernated: the rotation
// cannot move to Prepared before the data is under the new key, or completing it would lose that data.
func (op *operation) rewriteEncryptedAddLabel(ctx context.Context) error {
	if op.etcdKeyPhase() != phasePreparing {
		return nil
	}
	set, err := op.credentialSet(ctx)
	if err != nil {
		return err
	}
	if len(set.ETCDEncryptionKeys) == 0 {
		return fmt.Errorf("no etcd encryption key is configured")
	}
	key := set.ETCDEncryptionKeys[0]
	done, err := op.apiServerAnnotation(ctx, annotationResourcesLabeled)
	if err != nil || done == key {
		return err
	}
	if op.hibernated() {
		return fmt.Errorf("the etcd encryption key rotation cannot rewrite the shoot's encrypted data while the shoot is hibernated: wake it up")
	}
	mc, closeIdle, err := op.shootMetadata(ctx)
	if err != nil {
		return err
	}
	defer closeIdle()
	n, err := rewriteEncrypted(ctx, mc, encryptedResources(), labelEncryptionKeyName+"!="+key,
		map[string]any{labelEncryptionKeyName: key}, rewritePageSize)
	if err != nil {
		return err
	}
	op.log.Info("rewrote the encrypted data with the new etcd encryption key", "namespace", op.ns, "key", key, "objects", n)
	return op.setAPIServerAnnotation(ctx, annotationResourcesLabeled, &key)
}

// rewriteEncryptedRemoveLabel is the Completing phase's cleanup of the labels the preparation set, and of the
// annotation that recorded it. A hibernated shoot keeps its labels until a later rotation: they are harmless.
func (op *operation) rewriteEncryptedRemoveLabel(ctx context.Context) error {
	if op.etcdKeyPhase() != phaseCompleting || op.hibernated() {
		return nil
	}
	mc, closeIdle, err := op.shootMetadata(ctx)
	if err != nil {
		return err
	}
	defer closeIdle()
	n, err := rewriteEncrypted(ctx, mc, encryptedResources(), labelEncryptionKeyName, map[string]any{labelEncryptionKeyName: nil}, rewritePageSize)
	if err != nil {
		return err
	}
	op.log.Info("removed the etcd encryption key labels", "namespace", op.ns, "objects", n)
	return op.setAPIServerAnnotation(ctx, annotationResourcesLabeled, nil)
}

// etcdKeyPhase is the phase of the shoot's etcd encryption key rotation ("" when it never ran).
func (op *operation) etcdKeyPhase() string {
	return op.shoot.GetStatus().GetCredentials().GetRotation().GetEtcdEncryptionKey().GetPhase()
}

// shootMetadata is a metadata client of the shoot's kube-apiserver as "gardener", over a connection pool closeIdle
// closes (see shootRBAC).
func (op *operation) shootMetadata(ctx context.Context) (metadata.Interface, func(), error) {
	set, err := op.credentialSet(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, err := op.credentialsManager().Certificate(ctx, gardenerCert(set)); err != nil {
		return nil, nil, err
	}
	cfg, err := op.c.shootREST(ctx, op.ns)
	if err != nil {
		return nil, nil, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	mc, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, err
	}
	return mc, hc.CloseIdleConnections, nil
}

// apiServerAnnotation is the value of annotation key on the kube-apiserver Deployment ("" when unset or when there
// is no Deployment).
func (op *operation) apiServerAnnotation(ctx context.Context, key string) (string, error) {
	dep := &appsv1.Deployment{}
	if err := op.c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: deployKubeAPIServer}, dep); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return dep.Annotations[key], nil
}

// setAPIServerAnnotation sets annotation key of the kube-apiserver Deployment to value, or removes it when value is
// nil.
func (op *operation) setAPIServerAnnotation(ctx context.Context, key string, value *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	if err != nil {
		return err
	}
	dep := &appsv1.Deployment{ObjectMeta: op.objectMeta(deployKubeAPIServer)}
	if err := op.c.cfg.Seed.Patch(ctx, dep, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("annotate deployment %s/%s: %w", op.ns, deployKubeAPIServer, err)
	}
	return nil
}

// rewriteEncrypted patches the labels of every object of resources that selector (a label selector) selects with
// labels (a JSON merge patch of metadata.labels: a value sets a label, nil removes it), so that kube-apiserver writes
// each one again with the key it now encrypts with, and returns how many it patched. It lists pageSize objects at a
// time and patches each page's objects, a few at once, before it lists the next. The labels must take the objects
// out of selector: a rewrite that stops halfway lists what is left when it runs again. An object deleted meanwhile
// is skipped; a list whose continue token expired starts again from the first page (what is done is no longer
// selected).
func rewriteEncrypted(ctx context.Context, mc metadata.Interface, resources []schema.GroupVersionResource, selector string,
	labels map[string]any, pageSize int64) (int, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, gvr := range resources {
		res := mc.Resource(gvr)
		cont := ""
		for {
			list, err := res.List(ctx, kmetav1.ListOptions{LabelSelector: selector, Limit: pageSize, Continue: cont})
			if apierrors.IsResourceExpired(err) && cont != "" {
				cont = ""
				continue
			}
			if err != nil {
				return n, fmt.Errorf("list %s to rewrite: %w", gvr.Resource, err)
			}
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(rewriteParallel)
			for i := range list.Items {
				o := &list.Items[i]
				g.Go(func() error {
					_, err := res.Namespace(o.Namespace).Patch(gctx, o.Name, types.MergePatchType, patch, kmetav1.PatchOptions{})
					if err != nil && !apierrors.IsNotFound(err) {
						return fmt.Errorf("rewrite %s %s/%s: %w", gvr.Resource, o.Namespace, o.Name, err)
					}
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				return n, err
			}
			n += len(list.Items)
			if cont = list.Continue; cont == "" {
				break
			}
		}
	}
	return n, nil
}
