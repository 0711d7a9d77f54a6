package managedseedset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

// replicaStatus is how far a replica got, in Gardener's order (its ReplicaStatus): a replica is created
// ShootReconciling → ShootReconciled → ManagedSeedPreparing → ManagedSeedRegistered and deleted
// ManagedSeedRegistered → ManagedSeedDeleting → ShootReconciled → ShootDeleting → gone; a failed shoot operation gives
// ShootReconcileFailed or ShootDeleteFailed. The order is the first key of the scale-in priority: the less advanced
// replica goes first.
type replicaStatus int

const (
	statusUnknown replicaStatus = iota
	statusShootReconcileFailed
	statusShootDeleteFailed
	statusShootReconciling
	statusShootDeleting
	statusShootReconciled
	statusManagedSeedPreparing
	statusManagedSeedDeleting
	statusManagedSeedRegistered
)

func (s replicaStatus) String() string {
	switch s {
	case statusShootReconcileFailed:
		return "ShootReconcileFailed"
	case statusShootDeleteFailed:
		return "ShootDeleteFailed"
	case statusShootReconciling:
		return "ShootReconciling"
	case statusShootDeleting:
		return "ShootDeleting"
	case statusShootReconciled:
		return "ShootReconciled"
	case statusManagedSeedPreparing:
		return "ManagedSeedPreparing"
	case statusManagedSeedDeleting:
		return "ManagedSeedDeleting"
	case statusManagedSeedRegistered:
		return "ManagedSeedRegistered"
	}
	return "Unknown"
}

// managedSeedExists says whether a replica in status s has a ManagedSeed.
func (s replicaStatus) managedSeedExists() bool { return s >= statusManagedSeedPreparing }

// replica is one Shoot of the set, with the ManagedSeed and the Seed of the same name when they exist.
type replica struct {
	shoot       *corev1beta1.Shoot
	managedSeed *seedmanagementv1alpha1.ManagedSeed
	seed        *corev1beta1.Seed
	// hasScheduledShoots: shoots are scheduled on the replica's seed, which therefore must stay.
	hasScheduledShoots bool
}

func (r *replica) name() string { return r.shoot.GetMetadata().GetName() }

// fullName is namespace/name, as Gardener's messages name a replica.
func (r *replica) fullName() string {
	return r.shoot.GetMetadata().GetNamespace() + "/" + r.name()
}

func (r *replica) ordinal() int32 { return ordinalOf(r.name()) }

func (r *replica) status() replicaStatus {
	switch {
	case r.shoot == nil:
		return statusUnknown
	case r.managedSeed == nil:
		switch {
		case shootReconcileSucceeded(r.shoot):
			return statusShootReconciled
		case shootReconcileFailed(r.shoot):
			return statusShootReconcileFailed
		case shootDeleteFailed(r.shoot):
			return statusShootDeleteFailed
		case r.shoot.GetMetadata().GetDeletionTimestamp() == nil:
			return statusShootReconciling
		}
		return statusShootDeleting
	case managedSeedRegistered(r.managedSeed):
		return statusManagedSeedRegistered
	case r.managedSeed.GetMetadata().GetDeletionTimestamp() == nil:
		return statusManagedSeedPreparing
	}
	return statusManagedSeedDeleting
}

func (r *replica) seedReady() bool { return r.seed != nil && seedReady(r.seed) }

func (r *replica) health() string {
	if r.shoot == nil {
		return healthUnhealthy
	}
	return shootHealth(r.shoot)
}

// deletable: no shoots are scheduled on the replica's seed and neither its Shoot nor its ManagedSeed is protected.
func (r *replica) deletable() bool {
	return !r.hasScheduledShoots && !protected(r.shoot.GetMetadata()) && !protected(r.managedSeed.GetMetadata())
}

// ready: the replica's seed is registered and ready and its shoot healthy, what status.readyReplicas counts.
func (r *replica) ready() bool {
	return r.status() == statusManagedSeedRegistered && r.seedReady() && r.health() == healthHealthy
}

func protected(md *metav1.ObjectMeta) bool {
	return md.GetAnnotations()[AnnotationProtectFromDeletion] == "true"
}

// Values of the shoot label shoot.gardener.cloud/status.
const (
	healthHealthy     = "healthy"
	healthProgressing = "progressing"
	healthUnknown     = "unknown"
	healthUnhealthy   = "unhealthy"
)

// shootHealth is the shoot's status label; a shoot without one is progressing, as Gardener reads it.
func shootHealth(s *corev1beta1.Shoot) string {
	if v, ok := s.GetMetadata().GetLabels()[LabelShootStatus]; ok {
		return v
	}
	return healthProgressing
}

// healthRank orders health values from worst (0) to best. Gardener panics on a value it does not know; the hub ranks
// it with the worst.
func healthRank(h string) int {
	switch h {
	case healthHealthy:
		return 3
	case healthProgressing:
		return 2
	case healthUnknown:
		return 1
	}
	return 0
}

// lowerPriority orders replicas for scale-in, lowest priority (deleted first) first, as Gardener's ascendingPriority:
// status, then seed readiness, then shoot health, then ordinal.
func lowerPriority(a, b *replica) int {
	if sa, sb := a.status(), b.status(); sa != sb {
		return int(sa) - int(sb)
	}
	if ra, rb := a.seedReady(), b.seedReady(); ra != rb {
		if !ra {
			return -1
		}
		return 1
	}
	if ha, hb := healthRank(a.health()), healthRank(b.health()); ha != hb {
		return ha - hb
	}
	return int(a.ordinal()) - int(b.ordinal())
}

// byOrdinal orders replicas by ascending ordinal; replicas the set did not name (ordinal -1) come first.
func byOrdinal(a, b *replica) int { return int(a.ordinal()) - int(b.ordinal()) }

func sortReplicas(rs []*replica, cmp func(a, b *replica) int) { slices.SortStableFunc(rs, cmp) }

// Operation outcomes of a shoot, as Gardener's controller reads them: only when the shoot's last operation is about its
// current generation.

func shootReconcileSucceeded(s *corev1beta1.Shoot) bool {
	return shootOperationEnded(s, false, "Succeeded", "Create", "Reconcile")
}

func shootReconcileFailed(s *corev1beta1.Shoot) bool {
	return shootOperationEnded(s, false, "Failed", "Create", "Reconcile")
}

func shootDeleteFailed(s *corev1beta1.Shoot) bool {
	return shootOperationEnded(s, true, "Failed", "Delete")
}

func shootOperationEnded(s *corev1beta1.Shoot, deleting bool, state string, types ...string) bool {
	op := s.GetStatus().GetLastOperation()
	return op != nil && s.GetMetadata().GetGeneration() == s.GetStatus().GetObservedGeneration() &&
		(s.GetMetadata().GetDeletionTimestamp() != nil) == deleting &&
		slices.Contains(types, op.GetType()) && op.GetState() == state
}

// managedSeedRegistered: the ManagedSeed's current generation registered its seed (condition SeedRegistered True).
func managedSeedRegistered(ms *seedmanagementv1alpha1.ManagedSeed) bool {
	return ms.GetMetadata().GetGeneration() == ms.GetStatus().GetObservedGeneration() &&
		ms.GetMetadata().GetDeletionTimestamp() == nil &&
		conditionStatus(ms.GetStatus().GetConditions(), ConditionSeedRegistered) == "True"
}

// seedReady is Gardener's readiness of a replica's seed: observed, not being deleted, gardenlet ready, system
// components healthy, and its backup buckets ready when it reports on them. Unlike Gardener, a seed without
// spec.backup is not held back by its BackupBucketsReady condition: a seed whose backup was removed keeps it Unknown
// (BackupBucketsGone) once its bucket is gone, which its set would wait for forever.
func seedReady(s *corev1beta1.Seed) bool {
	conds := s.GetStatus().GetConditions()
	backup := conditionStatus(conds, ConditionBackupBucketsReady)
	if s.GetSpec().GetBackup() == nil {
		backup = ""
	}
	return s.GetMetadata().GetGeneration() == s.GetStatus().GetObservedGeneration() &&
		s.GetMetadata().GetDeletionTimestamp() == nil &&
		conditionStatus(conds, ConditionGardenletReady) == "True" &&
		conditionStatus(conds, ConditionSeedSystemComponentsHealthy) == "True" &&
		(backup == "" || backup == "True")
}

// conditionStatus is the status of the condition of type typ ("" when there is none).
func conditionStatus(conds []*metav1.Condition, typ string) string {
	for _, c := range conds {
		if c.GetType() == typ {
			return c.GetStatus()
		}
	}
	return ""
}

// ordinalPattern takes the ordinal from a replica's name.
var ordinalPattern = regexp.MustCompile(`.*-([0-9]+)$`)

// ordinalOf is the ordinal in a replica's name, -1 for a name the set did not give.
func ordinalOf(name string) int32 {
	m := ordinalPattern.FindStringSubmatch(name)
	if m == nil {
		return -1
	}
	n, err := strconv.ParseInt(m[1], 10, 32)
	if err != nil {
		return -1
	}
	return int32(n)
}

func replicaName(set *seedmanagementv1alpha1.ManagedSeedSet, ordinal int32) string {
	return fmt.Sprintf("%s-%d", set.GetMetadata().GetName(), ordinal)
}

// placeholder in the templates' domains stands for the replica's name.
const placeholder = "replica-name"

// controllerRef is the controller reference a replica's objects carry to their set.
func controllerRef(set *seedmanagementv1alpha1.ManagedSeedSet) *metav1.OwnerReference {
	return &metav1.OwnerReference{ApiVersion: APIVersion, Kind: Kind, Name: set.GetMetadata().GetName(),
		Uid: set.GetMetadata().GetUid(), Controller: proto.Bool(true), BlockOwnerDeletion: proto.Bool(true)}
}

// controllerOf is the name of the ManagedSeedSet controlling an object ("" when none does).
func controllerOf(md *metav1.ObjectMeta) string {
	for _, ref := range md.GetOwnerReferences() {
		if ref.GetController() && ref.GetKind() == Kind && strings.HasPrefix(ref.GetApiVersion(), Group+"/") {
			return ref.GetName()
		}
	}
	return ""
}

// newShoot is the Shoot of the replica with ordinal, from the set's shoot template.
func newShoot(set *seedmanagementv1alpha1.ManagedSeedSet, ordinal int32) *corev1beta1.Shoot {
	name := replicaName(set, ordinal)
	tmpl := set.GetSpec().GetShootTemplate()
	s := &corev1beta1.Shoot{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot",
		Metadata: &metav1.ObjectMeta{Namespace: set.GetMetadata().GetNamespace(), Name: name,
			Labels: maps.Clone(tmpl.GetMetadata().GetLabels()), Annotations: maps.Clone(tmpl.GetMetadata().GetAnnotations()),
			OwnerReferences: []*metav1.OwnerReference{controllerRef(set)}},
		Spec: proto.CloneOf(tmpl.GetSpec()),
	}
	if s.Spec == nil {
		s.Spec = &corev1beta1.ShootSpec{}
	}
	if d := s.Spec.GetDns(); d != nil && d.Domain != nil {
		d.Domain = proto.String(strings.ReplaceAll(d.GetDomain(), placeholder, name))
	}
	return s
}

// newManagedSeed is the ManagedSeed of the replica with ordinal, from the set's template: it names the replica's
// Shoot, and the seed template in its gardenlet configuration gets the replica's name in its ingress domain.
func newManagedSeed(set *seedmanagementv1alpha1.ManagedSeedSet, ordinal int32) (*seedmanagementv1alpha1.ManagedSeed, error) {
	name := replicaName(set, ordinal)
	tmpl := set.GetSpec().GetTemplate()
	ms := &seedmanagementv1alpha1.ManagedSeed{ApiVersion: APIVersion, Kind: "ManagedSeed",
		Metadata: &metav1.ObjectMeta{Namespace: set.GetMetadata().GetNamespace(), Name: name,
			Labels: maps.Clone(tmpl.GetMetadata().GetLabels()), Annotations: maps.Clone(tmpl.GetMetadata().GetAnnotations()),
			OwnerReferences: []*metav1.OwnerReference{controllerRef(set)}},
		Spec: &seedmanagementv1alpha1.ManagedSeedSpec{
			Shoot:     &seedmanagementv1alpha1.Shoot{Name: name},
			Gardenlet: proto.CloneOf(tmpl.GetSpec().GetGardenlet()),
		},
	}
	if cfg := ms.Spec.GetGardenlet().GetConfig(); cfg != nil && len(cfg.GetRaw()) > 0 {
		raw, err := replaceIngressDomain(cfg.GetRaw(), name)
		if err != nil {
			return nil, fmt.Errorf("ManagedSeed %s: spec.gardenlet.config: %w", name, err)
		}
		cfg.Raw = raw
	}
	return ms, nil
}

// replaceIngressDomain replaces the placeholder in seedConfig.spec.ingress.domain of a GardenletConfiguration
// (JSON); a configuration without the placeholder is returned as it is.
func replaceIngressDomain(raw []byte, name string) ([]byte, error) {
	if !bytes.Contains(raw, []byte(placeholder)) {
		return raw, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var cfg map[string]any
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("not a GardenletConfiguration: %w", err)
	}
	ingress, ok := dig(cfg, "seedConfig", "spec", "ingress")
	if !ok {
		return raw, nil
	}
	domain, ok := ingress["domain"].(string)
	if !ok || !strings.Contains(domain, placeholder) {
		return raw, nil
	}
	ingress["domain"] = strings.ReplaceAll(domain, placeholder, name)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cfg); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// dig returns the object at path in a decoded JSON object.
func dig(m map[string]any, path ...string) (map[string]any, bool) {
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	return m, true
}

// selectorOf converts the set's selector. An empty selector selects everything, as Kubernetes reads it; admission
// refuses one.
func selectorOf(sel *metav1.LabelSelector) (labels.Selector, error) {
	ks := &kmetav1.LabelSelector{MatchLabels: sel.GetMatchLabels()}
	for _, e := range sel.GetMatchExpressions() {
		ks.MatchExpressions = append(ks.MatchExpressions, kmetav1.LabelSelectorRequirement{Key: e.GetKey(),
			Operator: kmetav1.LabelSelectorOperator(e.GetOperator()), Values: e.GetValues()})
	}
	s, err := kmetav1.LabelSelectorAsSelector(ks)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	return s, nil
}
