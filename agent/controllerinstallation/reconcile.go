package controllerinstallation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/helmrelease"
	"github.com/trellis-dev/trellis/agent/hubobject"
	gcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Names, as Gardener spells them.
const (
	// Finalizer keeps an installation on the hub until its release and namespace are gone from the seed.
	Finalizer = "core.gardener.cloud/controllerinstallation"
	// NamespacePrefix prefixes an installation's namespace in the seed: extension-<installation>.
	NamespacePrefix = "extension-"

	ConditionValid       = "Valid"
	ConditionInstalled   = "Installed"
	ConditionHealthy     = "Healthy"
	ConditionProgressing = "Progressing"
	ConditionRequired    = "Required"

	// LabelRole and RoleExtension mark an extension's namespace; LabelRegistration names its registration.
	LabelRole         = "gardener.cloud/role"
	RoleExtension     = "extension"
	LabelRegistration = "controllerregistration.core.gardener.cloud/name"
	// AnnotationPodSecurityEnforce on a registration or installation becomes the namespace's
	// pod-security.kubernetes.io/enforce label.
	AnnotationPodSecurityEnforce = "security.gardener.cloud/pod-security-enforce"
	labelPodSecurityEnforce      = "pod-security.kubernetes.io/enforce"
	labelHAConsider              = "high-availability-config.resources.gardener.cloud/consider"
	annotationHAZones            = "high-availability-config.resources.gardener.cloud/zones"
	// registrySecretNamespace holds the registry secrets a ControllerDeployment names.
	registrySecretNamespace = "garden"
	// secretKeyCABundle is the key of a CA bundle secret.
	secretKeyCABundle = "bundle.crt"
	// secretKeyDockerConfig is the key of a kubernetes.io/dockerconfigjson secret.
	secretKeyDockerConfig = ".dockerconfigjson"
	// taintProtected marks a protected seed.
	taintProtected = "seed.gardener.cloud/protected"
)

// Namespace is the seed namespace an installation deploys into.
func Namespace(installation string) string { return NamespacePrefix + installation }

// sync decides what the installation key needs and does it; it returns when to look again.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	cached, ok := cache.Get[*corev1beta1.ControllerInstallation](c.cfg.Cache, resources.ControllerInstallations, "", key)
	ci, ok := c.objects.Pick(key, cached, ok)
	if !ok || ci.GetSpec().GetSeedRef().GetName() != c.cfg.SeedName {
		return c.cleanupGone(ctx, key)
	}
	c.mu.Lock()
	delete(c.gone, key)
	c.mu.Unlock()
	if ci.GetMetadata().GetDeletionTimestamp() != nil {
		return c.delete(ctx, ci)
	}
	return c.reconcile(ctx, ci)
}

// conditions collects the conditions a sync sets, to write them in one status update at its end.
type conditions struct {
	now time.Time
	set map[string]*metav1.Condition
}

func (cs *conditions) put(typ, status, reason, message string) {
	cs.set[typ] = &metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message}
}

// write merges the collected conditions into the installation's status on the hub; nothing is written when they say
// what the status says already.
func (c *Controller) write(ctx context.Context, ci *corev1beta1.ControllerInstallation, cs *conditions) (*corev1beta1.ControllerInstallation, error) {
	if len(cs.set) == 0 {
		return ci, nil
	}
	out, err := c.objects.UpdateStatus(ctx, ci, func(cur *corev1beta1.ControllerInstallation) bool {
		if cur.Status == nil {
			cur.Status = &corev1beta1.ControllerInstallationStatus{}
		}
		changed := false
		for _, typ := range slices.Sorted(maps.Keys(cs.set)) {
			want := cs.set[typ]
			var ch bool
			cur.Status.Conditions, ch = hubobject.SetCondition(cur.Status.Conditions, typ, want.Status, want.Reason, want.Message, cs.now)
			changed = changed || ch
		}
		return changed
	})
	if status.Code(err) == codes.NotFound {
		return ci, nil
	}
	return out, err
}

// reconcile deploys the installation and reports its conditions.
func (c *Controller) reconcile(ctx context.Context, ci *corev1beta1.ControllerInstallation) (time.Duration, error) {
	ci, err := c.objects.AddFinalizer(ctx, ci, Finalizer)
	if err != nil {
		return 0, err
	}
	cs := &conditions{now: c.cfg.Now(), set: map[string]*metav1.Condition{}}
	after, err := c.deploy(ctx, ci, cs)
	if _, werr := c.write(ctx, ci, cs); werr != nil {
		return 0, errors.Join(err, werr)
	}
	return after, err
}

// deploy renders and installs the installation's chart, filling cs.
func (c *Controller) deploy(ctx context.Context, ci *corev1beta1.ControllerInstallation, cs *conditions) (time.Duration, error) {
	regName := ci.GetSpec().GetRegistrationRef().GetName()
	reg, ok := cache.Get[*corev1beta1.ControllerRegistration](c.cfg.Cache, resources.ControllerRegistrations, "", regName)
	if !ok {
		cs.put(ConditionValid, "False", "RegistrationNotFound", fmt.Sprintf("Referenced ControllerRegistration %q does not exist", regName))
		return 0, fmt.Errorf("ControllerRegistration %s not found", regName)
	}
	seed, ok := cache.Get[*corev1beta1.Seed](c.cfg.Cache, resources.Seeds, "", c.cfg.SeedName)
	if !ok {
		cs.put(ConditionValid, "False", "SeedNotFound", fmt.Sprintf("Referenced Seed %q does not exist", c.cfg.SeedName))
		return 0, fmt.Errorf("seed %s not found", c.cfg.SeedName)
	}
	cdName := ci.GetSpec().GetDeploymentRef().GetName()
	if cdName == "" {
		return 0, nil // nothing to deploy, as in Gardener
	}
	cd, ok := cache.Get[*gcorev1.ControllerDeployment](c.cfg.Cache, resources.ControllerDeployments, "", cdName)
	if !ok {
		return 0, fmt.Errorf("ControllerDeployment %s not found", cdName)
	}
	if cd.GetHelm() == nil {
		return 0, nil // not a Helm deployment: another deployer's business
	}
	var values map[string]any
	if raw := cd.GetHelm().GetValues().GetRaw(); len(raw) > 0 {
		if err := json.Unmarshal(raw, &values); err != nil {
			cs.put(ConditionValid, "False", "ChartInformationInvalid", fmt.Sprintf("chart values cannot be unmarshalled: %v", err))
			return 0, fmt.Errorf("values of ControllerDeployment %s: %w", cdName, err)
		}
	}
	injected, err := c.gardenerValues(ctx, seed)
	if err != nil {
		return 0, err
	}
	values = mergeMaps(values, injected)

	ns := Namespace(ci.GetMetadata().GetName())
	if err := c.ensureNamespace(ctx, ns, ci, reg, seed); err != nil {
		return 0, err
	}
	src, err := c.source(cd)
	if err != nil {
		cs.put(ConditionValid, "False", "OCIChartCannotBePulled", fmt.Sprintf("chart pulling process failed: %v", err))
		return 0, err
	}
	archive, _, err := c.cfg.Releases.Fetch(ctx, src)
	if err != nil {
		cs.put(ConditionValid, "False", "OCIChartCannotBePulled", fmt.Sprintf("chart pulling process failed: %v", err))
		return 0, err
	}
	if _, err := c.cfg.Releases.Render(archive, regName, ns, values); err != nil {
		cs.put(ConditionValid, "False", "ChartCannotBeRendered", fmt.Sprintf("chart rendering process failed: %v", err))
		return 0, err
	}
	cs.put(ConditionValid, "True", "RegistrationValid", "chart could be rendered successfully.")
	rel, changed, err := c.cfg.Releases.Apply(ctx, archive, regName, ns, values)
	if err != nil {
		cs.put(ConditionInstalled, "False", "InstallationFailed", fmt.Sprintf("Installation of Helm release %q failed: %v", regName, err))
		return 0, err
	}
	if changed {
		c.log.Info("installed the extension's chart", "controllerInstallation", ci.GetMetadata().GetName(), "release", regName,
			"namespace", ns, "revision", rel.Version)
	}
	cs.put(ConditionInstalled, "True", "InstallationSuccessful", "The controller was successfully installed in the seed cluster.")
	h, err := c.cfg.Releases.Health(ctx, rel)
	if err != nil {
		msg := fmt.Sprintf("Failed to read the controller's workloads: %v", err)
		cs.put(ConditionHealthy, "Unknown", "SeedReadError", msg)
		cs.put(ConditionProgressing, "Unknown", "SeedReadError", msg)
		return 0, err
	}
	after := c.cfg.SyncPeriod
	if h.Healthy {
		cs.put(ConditionHealthy, "True", "ControllerHealthy", "The controller running in the seed cluster is healthy.")
	} else {
		cs.put(ConditionHealthy, "False", "ControllerNotHealthy", strings.Join(h.Problems, "; "))
		after = c.cfg.HealthPoll
	}
	if h.Progressing {
		cs.put(ConditionProgressing, "True", "ControllerNotRolledOut", strings.Join(h.Rollouts, "; "))
		after = c.cfg.HealthPoll
	} else {
		cs.put(ConditionProgressing, "False", "ControllerRolledOut", "The controller has been rolled out successfully.")
	}
	return after, nil
}

// source is where the deployment's chart comes from, with the registry secrets it names.
func (c *Controller) source(cd *gcorev1.ControllerDeployment) (helmrelease.Source, error) {
	h := cd.GetHelm()
	if len(h.GetRawChart()) > 0 {
		return helmrelease.Source{RawChart: h.GetRawChart()}, nil
	}
	oci := h.GetOciRepository()
	if oci == nil {
		return helmrelease.Source{}, errors.New("the ControllerDeployment has neither helm.rawChart nor helm.ociRepository")
	}
	src := helmrelease.Source{OCI: &helmrelease.OCIRepository{Ref: oci.GetRef(), Repository: oci.GetRepository(), Tag: oci.GetTag(), Digest: oci.GetDigest()}}
	if n := oci.GetPullSecretRef().GetName(); n != "" {
		s, ok := cache.Get[*kcorev1.Secret](c.cfg.Cache, resources.Secrets, registrySecretNamespace, n)
		if !ok {
			return src, fmt.Errorf("pull secret %s/%s not found", registrySecretNamespace, n)
		}
		src.PullSecret = s.GetData()[secretKeyDockerConfig]
	}
	if n := oci.GetCaBundleSecretRef().GetName(); n != "" {
		s, ok := cache.Get[*kcorev1.Secret](c.cfg.Cache, resources.Secrets, registrySecretNamespace, n)
		if !ok {
			return src, fmt.Errorf("CA bundle secret %s/%s not found", registrySecretNamespace, n)
		}
		src.CABundle = s.GetData()[secretKeyCABundle]
	}
	return src, nil
}

// ensureNamespace creates or updates the installation's namespace with Gardener's labels.
func (c *Controller) ensureNamespace(ctx context.Context, name string, ci *corev1beta1.ControllerInstallation, reg *corev1beta1.ControllerRegistration, seed *corev1beta1.Seed) error {
	ns := &corev1.Namespace{}
	err := c.cfg.Seed.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		ns = &corev1.Namespace{ObjectMeta: kmetav1.ObjectMeta{Name: name}}
	} else if err != nil {
		return fmt.Errorf("read namespace %s: %w", name, err)
	}
	if ns.DeletionTimestamp != nil {
		return fmt.Errorf("namespace %s is being deleted; waiting for it to go before installing again", name)
	}
	before := ns.DeepCopy()
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	if ns.Annotations == nil {
		ns.Annotations = map[string]string{}
	}
	ns.Labels[LabelRole] = RoleExtension
	ns.Labels[LabelRegistration] = reg.GetMetadata().GetName()
	ns.Labels[labelHAConsider] = "true"
	ns.Annotations[annotationHAZones] = strings.Join(seed.GetSpec().GetProvider().GetZones(), ",")
	enforce, ok := ci.GetMetadata().GetAnnotations()[AnnotationPodSecurityEnforce]
	if !ok {
		enforce, ok = reg.GetMetadata().GetAnnotations()[AnnotationPodSecurityEnforce]
	}
	if ok {
		ns.Labels[labelPodSecurityEnforce] = enforce
	} else {
		delete(ns.Labels, labelPodSecurityEnforce)
	}
	if ns.ResourceVersion == "" {
		if err := c.cfg.Seed.Create(ctx, ns); err != nil {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
		return nil
	}
	if maps.Equal(before.Labels, ns.Labels) && maps.Equal(before.Annotations, ns.Annotations) {
		return nil
	}
	if err := c.cfg.Seed.Update(ctx, ns); err != nil {
		return fmt.Errorf("update namespace %s: %w", name, err)
	}
	return nil
}

// delete uninstalls the installation's release, deletes its namespace and then lets the installation go.
func (c *Controller) delete(ctx context.Context, ci *corev1beta1.ControllerInstallation) (time.Duration, error) {
	if !slices.Contains(ci.GetMetadata().GetFinalizers(), Finalizer) {
		return 0, nil
	}
	cs := &conditions{now: c.cfg.Now(), set: map[string]*metav1.Condition{}}
	after, err := c.uninstall(ctx, ci, cs)
	if err != nil || after > 0 {
		if _, werr := c.write(ctx, ci, cs); werr != nil {
			return 0, errors.Join(err, werr)
		}
		return after, err
	}
	cs.put(ConditionInstalled, "False", "DeletionSuccessful", "Deletion of old resources succeeded.")
	ci, err = c.write(ctx, ci, cs)
	if err != nil {
		return 0, err
	}
	if _, err := c.objects.RemoveFinalizer(ctx, ci, Finalizer); err != nil && status.Code(err) != codes.NotFound {
		return 0, err
	}
	c.log.Info("uninstalled the extension", "controllerInstallation", ci.GetMetadata().GetName())
	return 0, nil
}

// uninstall removes the release and the namespace of ci from the seed; it returns a positive duration while the
// namespace is still going. cs (may be nil) receives the Installed condition.
func (c *Controller) uninstall(ctx context.Context, ci *corev1beta1.ControllerInstallation, cs *conditions) (time.Duration, error) {
	put := func(status, reason, msg string) {
		if cs != nil {
			cs.put(ConditionInstalled, status, reason, msg)
		}
	}
	ns := Namespace(ci.GetMetadata().GetName())
	release := ci.GetSpec().GetRegistrationRef().GetName()
	if err := c.cfg.Releases.Uninstall(ctx, release, ns); err != nil {
		put("False", "DeletionFailed", fmt.Sprintf("Deletion of Helm release %q failed: %v", release, err))
		return 0, err
	}
	err := c.cfg.Seed.Delete(ctx, &corev1.Namespace{ObjectMeta: kmetav1.ObjectMeta{Name: ns}})
	switch {
	case err == nil || apierrors.IsConflict(err):
		put("False", "DeletionPending", fmt.Sprintf("Deletion of Namespace %q is still pending.", ns))
		return c.cfg.DeletionPoll, nil
	case !apierrors.IsNotFound(err):
		put("False", "DeletionFailed", fmt.Sprintf("Deletion of Namespace %q failed: %v", ns, err))
		return 0, fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	return 0, nil
}

// cleanupGone removes the release and namespace of an installation that left the cache without passing through the
// agent's deletion (it was deleted before the agent added its finalizer, or assigned elsewhere).
func (c *Controller) cleanupGone(ctx context.Context, key string) (time.Duration, error) {
	c.mu.Lock()
	ci := c.gone[key]
	c.mu.Unlock()
	if ci == nil {
		return 0, nil
	}
	after, err := c.uninstall(ctx, ci, nil)
	if err == nil && after == 0 {
		c.mu.Lock()
		if c.gone[key] == ci {
			delete(c.gone, key)
		}
		c.mu.Unlock()
		c.log.Info("cleaned up after an installation that is gone", "controllerInstallation", key)
	}
	return after, err
}

// gardenerValues is the `gardener:` block injected into every chart's values, as gardenlet injects it.
func (c *Controller) gardenerValues(ctx context.Context, seed *corev1beta1.Seed) (map[string]any, error) {
	garden, err := c.gardenClusterIdentity(ctx)
	if err != nil {
		return nil, err
	}
	spec := seed.GetSpec()
	var volumeProvider string
	if ps := spec.GetVolume().GetProviders(); len(ps) > 0 {
		volumeProvider = ps[0].GetName()
	}
	protected := slices.ContainsFunc(spec.GetTaints(), func(t *corev1beta1.SeedTaint) bool { return t.GetKey() == taintProtected })
	visible := spec.GetSettings().GetScheduling().GetVisible()
	var ingressDomain any
	if spec.GetIngress() != nil {
		ingressDomain = spec.GetIngress().GetDomain()
	}
	var volumeProviders []any
	for _, p := range spec.GetVolume().GetProviders() {
		volumeProviders = append(volumeProviders, toJSON(p))
	}
	var taints []any
	for _, t := range spec.GetTaints() {
		taints = append(taints, toJSON(t))
	}
	featureGates := map[string]any{}
	for k, v := range c.cfg.FeatureGates {
		featureGates[k] = v
	}
	return map[string]any{"gardener": map[string]any{
		"version": c.cfg.Version,
		"garden":  map[string]any{"clusterIdentity": garden},
		"seed": map[string]any{
			"name":            seed.GetMetadata().GetName(),
			"clusterIdentity": seedIdentity(seed),
			"annotations":     stringMap(seed.GetMetadata().GetAnnotations()),
			"labels":          stringMap(seed.GetMetadata().GetLabels()),
			"provider":        spec.GetProvider().GetType(),
			"region":          spec.GetProvider().GetRegion(),
			"volumeProvider":  volumeProvider,
			"volumeProviders": volumeProviders,
			"ingressDomain":   ingressDomain,
			"protected":       protected,
			"visible":         visible,
			"taints":          taints,
			"networks":        toJSON(spec.GetNetworks()),
			"blockCIDRs":      stringSlice(spec.GetNetworks().GetBlockCidrs()),
			"spec":            toJSON(spec),
		},
		"gardenlet": map[string]any{"featureGates": featureGates},
	}}, nil
}

// seedIdentity is the seed's cluster identity: status.clusterIdentity, else its UID (a Trellis seed's identity
// until the agent reports one).
func seedIdentity(seed *corev1beta1.Seed) string {
	if id := seed.GetStatus().GetClusterIdentity(); id != "" {
		return id
	}
	return seed.GetMetadata().GetUid()
}

// gardenClusterIdentity reads the garden's cluster identity from the hub once.
func (c *Controller) gardenClusterIdentity(ctx context.Context) (string, error) {
	c.mu.Lock()
	id := c.gardenIdentity
	c.mu.Unlock()
	if id != "" {
		return id, nil
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	cm, err := c.configMaps.Get(cctx, &metav1.GetRequest{Namespace: "kube-system", Name: "cluster-identity"})
	if err != nil {
		return "", fmt.Errorf("read the garden's cluster identity (ConfigMap kube-system/cluster-identity): %w", err)
	}
	id = cm.GetData()["cluster-identity"]
	c.mu.Lock()
	c.gardenIdentity = id
	c.mu.Unlock()
	return id, nil
}

// toJSON is m in Gardener's JSON as generic values (nil for a nil message).
func toJSON(m proto.Message) any {
	if m == nil || !m.ProtoReflect().IsValid() {
		return nil
	}
	b, err := kjson.Marshal(m)
	if err != nil {
		return nil
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil
	}
	return out
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func stringSlice(s []string) []any {
	out := make([]any, 0, len(s))
	for _, v := range s {
		out = append(out, v)
	}
	return out
}

// mergeMaps deep-merges b into a copy of a: maps merge recursively, everything else in b wins (Gardener's
// utils.MergeMaps).
func mergeMaps(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	maps.Copy(out, a)
	for k, bv := range b {
		if bm, ok := bv.(map[string]any); ok {
			if am, ok := out[k].(map[string]any); ok {
				out[k] = mergeMaps(am, bm)
				continue
			}
		}
		out[k] = bv
	}
	return out
}
