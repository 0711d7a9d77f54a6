package local

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// Worker outputs and their labels.
const (
	// MCMConfigMap stands for the machine-controller-manager in the shoot's namespace; backs SystemComponentsHealthy.
	MCMConfigMap = "machine-controller-manager"
	// MachineFinalizer is on every machine Service, as MCM's finalizer is on Machines: Delete removes it, Migrate
	// and ForceDelete strip it.
	MachineFinalizer = "provider.local.trellis.dev/machine"
	// LabelMachineDeployment names a machine's MachineDeployment (the ConfigMap standing for it).
	LabelMachineDeployment = "provider.local.trellis.dev/machine-deployment"
	// LabelMachineClass names a machine's class (the Secret standing for it); shortened like LabelName.
	LabelMachineClass = "provider.local.trellis.dev/machine-class"
	// LabelRole says what a Worker output is: machine-deployment, machine-class or machine.
	LabelRole = "provider.local.trellis.dev/role"
	// LabelPool is Gardener's worker pool label, on machines and MachineDeployments.
	LabelPool = "worker.gardener.cloud/pool"
)

// Annotations of machine Services: the full names, which labels may only hold shortened.
const (
	annotationMachineDeployment = "provider.local.trellis.dev/machine-deployment"
	annotationClass             = "provider.local.trellis.dev/class"
	annotationZone              = "provider.local.trellis.dev/zone"
)

// Roles of Worker outputs (LabelRole).
const (
	roleMachineDeployment = "machine-deployment"
	roleMachineClass      = "machine-class"
	roleMachine           = "machine"
)

// WorkerState is the Worker's status.state: the machines, so that Restore brings back the same ones.
type WorkerState struct {
	// APIVersion is APIVersion.
	APIVersion string `json:"apiVersion"`
	// Kind is "WorkerState".
	Kind string `json:"kind"`
	// Machines are the machines of every pool, sorted by name.
	Machines []Machine `json:"machines"`
}

// Machine is one machine of a Worker; a headless Service of its name stands for it.
type Machine struct {
	// Name is the machine's (and its Service's) name: <machine deployment>-<class hash>-<random>.
	Name string `json:"name"`
	// MachineDeployment is the name of its MachineDeployment, <namespace>-<pool>-z<zone index from 1>.
	MachineDeployment string `json:"machineDeployment"`
	// Class is the name of its machine class.
	Class string `json:"class"`
	// Pool is its worker pool.
	Pool string `json:"pool"`
	// Zone is its zone; empty for pools without zones.
	Zone string `json:"zone,omitempty"`
}

// worker makes per pool and zone a MachineDeployment (a ConfigMap <namespace>-<pool>-z<N>) and its machine class (a
// Secret with the user data, named after the MachineDeployment and a checksum of what the machines are made from),
// and per machine a headless Service with MachineFinalizer. It scales to the pool's minimum (at least one machine
// when the maximum allows any) and to zero while the shoot is hibernated; a new class replaces the machines of the
// old one at once (there is nothing to drain).
//
// With a machine provider (Config.MachineProvider), every machine is also a real one: the Worker creates it through
// the provider's API with the pool's user data, its bootstrap token filled in (machine-controller-manager's job), and
// deletes it there before its Service goes. Without one, the Services stand in for machines and no Node joins.
type worker struct {
	seed
	machines *MachineProvider
}

func (a *worker) Reconcile(ctx context.Context, log logr.Logger, w *extensionsv1alpha1.Worker, cluster *extsdk.Cluster) error {
	machines, err := a.liveMachines(ctx, w)
	if err != nil {
		return err
	}
	return a.deploy(ctx, log, w, cluster, machines)
}

// Restore deploys the machines of status.state (the agent restored it from the ShootState), keeping their names.
func (a *worker) Restore(ctx context.Context, log logr.Logger, w *extensionsv1alpha1.Worker, cluster *extsdk.Cluster) error {
	st, err := workerState(w)
	if err != nil {
		return err
	}
	return a.deploy(ctx, log, w, cluster, st.Machines)
}

func (a *worker) deploy(ctx context.Context, log logr.Logger, w *extensionsv1alpha1.Worker, cluster *extsdk.Cluster, existing []Machine) error {
	infra, err := parseInfrastructureStatus(w.Spec.InfrastructureProviderStatus)
	if err != nil {
		return err
	}
	hibernated := cluster.ShootHibernated()
	labels := ownerLabels("worker", w.Name)
	mcmReplicas := "1"
	if hibernated {
		mcmReplicas = "0"
	}
	if err := a.apply(ctx, corev1ac.ConfigMap(MCMConfigMap, w.Namespace).WithLabels(labels).
		WithData(map[string]string{"replicas": mcmReplicas, "provider": Type})); err != nil {
		return fmt.Errorf("deploy %s: %w", MCMConfigMap, err)
	}

	var (
		deployments []extensionsv1alpha1.MachineDeployment
		machines    []Machine
		wantMDs     = map[string]bool{}
		wantClasses = map[string]bool{}
	)
	var token []byte
	for _, pool := range w.Spec.Pools {
		userData, err := a.userData(ctx, w.Namespace, pool)
		if err != nil {
			return err
		}
		if a.machines != nil && !hibernated && token == nil {
			if token, err = a.bootstrapToken(ctx, w.Namespace); err != nil {
				return err
			}
		}
		zones := pool.Zones
		if len(zones) == 0 {
			zones = []string{""}
		}
		total := pool.Minimum
		if total == 0 && pool.Maximum > 0 {
			total = 1
		}
		for i, zone := range zones {
			md := fmt.Sprintf("%s-%s-z%d", w.Namespace, pool.Name, i+1)
			class := md + "-" + classChecksum(pool, zone, infra.Network.ID)
			replicas := distribute(total, i, len(zones))
			if hibernated {
				replicas = 0
			}
			wantMDs[md], wantClasses[class] = true, true
			status := extensionsv1alpha1.MachineDeployment{
				Name:     md,
				Minimum:  distribute(pool.Minimum, i, len(zones)),
				Maximum:  distribute(pool.Maximum, i, len(zones)),
				Priority: pool.Priority,
			}
			mdMachines := pick(existing, Machine{MachineDeployment: md, Class: class, Pool: pool.Name, Zone: zone}, int(replicas))
			if err := a.deployMachineDeployment(ctx, w, pool, zone, status, class, userData, infra, replicas, mdMachines); err != nil {
				return err
			}
			if err := a.createMachines(ctx, log, pool, userData, token, mdMachines); err != nil {
				return err
			}
			machines = append(machines, mdMachines...)
			deployments = append(deployments, status)
		}
	}
	slices.SortFunc(machines, func(x, y Machine) int { return cmp.Compare(x.Name, y.Name) })
	if err := a.setStatus(w, deployments, machines); err != nil {
		return err
	}
	if err := a.removeStale(ctx, log, w, machines, wantMDs, wantClasses); err != nil {
		return err
	}
	log.Info("Machines deployed", "machines", len(machines), "machineDeployments", len(deployments), "hibernated", hibernated)
	return nil
}

// deployMachineDeployment applies the class Secret, the MachineDeployment ConfigMap (status names it and gives its
// share of the pool's minimum and maximum) and one Service per machine.
func (a *worker) deployMachineDeployment(ctx context.Context, w *extensionsv1alpha1.Worker, pool extensionsv1alpha1.WorkerPool,
	zone string, status extensionsv1alpha1.MachineDeployment, class string, userData []byte, infra *InfrastructureStatus,
	replicas int32, machines []Machine) error {
	md := status.Name
	labels := ownerLabels("worker", w.Name)
	withRole := func(role string) map[string]string {
		l := map[string]string{LabelRole: role, LabelPool: pool.Name, LabelMachineDeployment: labelValue(md)}
		for k, v := range labels {
			l[k] = v
		}
		return l
	}
	classLabels := withRole(roleMachineClass)
	classLabels["gardener.cloud/purpose"] = "machineclass"
	if err := a.apply(ctx, corev1ac.Secret(class, w.Namespace).WithLabels(classLabels).WithData(map[string][]byte{
		"userData":     userData,
		"machineType":  []byte(pool.MachineType),
		"machineImage": []byte(pool.MachineImage.Name + ":" + pool.MachineImage.Version),
		"zone":         []byte(zone),
		"networkID":    []byte(infra.Network.ID),
	})); err != nil {
		return fmt.Errorf("deploy machine class %s: %w", class, err)
	}

	data := map[string]string{
		"class": class, "pool": pool.Name, "zone": zone, "replicas": strconv.Itoa(int(replicas)),
		"minimum": strconv.Itoa(int(status.Minimum)), "maximum": strconv.Itoa(int(status.Maximum)),
		"maxSurge": pool.MaxSurge.String(), "maxUnavailable": pool.MaxUnavailable.String(),
		"machineType": pool.MachineType, "nodeAgentSecretName": deref(pool.NodeAgentSecretName),
	}
	if pool.MachineControllerManagerSettings != nil {
		b, err := json.Marshal(pool.MachineControllerManagerSettings)
		if err != nil {
			return err
		}
		data["machineControllerManager"] = string(b)
	}
	if err := a.apply(ctx, corev1ac.ConfigMap(md, w.Namespace).WithLabels(withRole(roleMachineDeployment)).
		WithAnnotations(autoscalerAnnotations(pool.ClusterAutoscaler)).WithData(data)); err != nil {
		return fmt.Errorf("deploy machine deployment %s: %w", md, err)
	}

	for _, m := range machines {
		l := withRole(roleMachine)
		l[LabelMachineClass] = labelValue(class)
		for k, v := range pool.Labels {
			if _, ours := l[k]; !ours {
				l[k] = v
			}
		}
		svc := corev1ac.Service(m.Name, w.Namespace).WithLabels(l).WithFinalizers(MachineFinalizer).
			WithAnnotations(map[string]string{annotationMachineDeployment: md, annotationClass: class, annotationZone: zone}).
			WithSpec(corev1ac.ServiceSpec().WithClusterIP(corev1.ClusterIPNone).
				WithPorts(corev1ac.ServicePort().WithName("ssh").WithPort(22).WithProtocol(corev1.ProtocolTCP)))
		if err := a.apply(ctx, svc); err != nil {
			return fmt.Errorf("deploy machine %s: %w", m.Name, err)
		}
	}
	return nil
}

// setStatus writes machineDeployments (and their update time, by which the agent sees them updated in this
// reconcile) and the machines as status.state.
func (a *worker) setStatus(w *extensionsv1alpha1.Worker, deployments []extensionsv1alpha1.MachineDeployment, machines []Machine) error {
	if machines == nil {
		machines = []Machine{}
	}
	state, err := json.Marshal(WorkerState{APIVersion: APIVersion, Kind: "WorkerState", Machines: machines})
	if err != nil {
		return err
	}
	now := metav1.NewTime(time.Now())
	w.Status.MachineDeployments = deployments
	w.Status.MachineDeploymentsLastUpdateTime = &now
	w.Status.State = &runtime.RawExtension{Raw: state}
	return nil
}

// pick returns replicas machines like template (its MachineDeployment, class, pool and zone): existing ones of the
// same MachineDeployment and class first (by name), then new ones.
func pick(existing []Machine, template Machine, replicas int) []Machine {
	var out []Machine
	for _, m := range existing {
		if m.MachineDeployment == template.MachineDeployment && m.Class == template.Class {
			m.Pool, m.Zone = template.Pool, template.Zone
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(x, y Machine) int { return cmp.Compare(x.Name, y.Name) })
	if len(out) > replicas {
		out = out[:replicas]
	}
	for len(out) < replicas {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		// MCM names a machine after its MachineSet (deployment plus class hash) plus a random suffix.
		m := template
		m.Name = machineName(template.MachineDeployment, template.Class, hex.EncodeToString(b)[:5])
		out = append(out, m)
	}
	return out
}

// machineName is <md>-<class hash>-<suffix>, shortened to a DNS label (Service names have at most 63 characters).
func machineName(md, class, suffix string) string {
	hash := class[len(class)-5:]
	tail := "-" + hash + "-" + suffix
	if len(md)+len(tail) > 63 {
		md = shorten(md, 63-len(tail))
	}
	return md + tail
}

// liveMachines returns the machines whose Services exist, read from their labels and annotations.
func (a *worker) liveMachines(ctx context.Context, w *extensionsv1alpha1.Worker) ([]Machine, error) {
	list := &corev1.ServiceList{}
	if err := a.r.List(ctx, list, client.InNamespace(w.Namespace), client.MatchingLabels(machineSelector(w.Name))); err != nil {
		return nil, fmt.Errorf("list machines: %w", err)
	}
	out := make([]Machine, 0, len(list.Items))
	for _, s := range list.Items {
		if s.DeletionTimestamp != nil {
			continue
		}
		out = append(out, Machine{Name: s.Name, MachineDeployment: s.Annotations[annotationMachineDeployment],
			Class: s.Annotations[annotationClass], Pool: s.Labels[LabelPool], Zone: s.Annotations[annotationZone]})
	}
	return out, nil
}

func machineSelector(worker string) map[string]string {
	return map[string]string{LabelKind: "worker", LabelName: labelValue(worker), LabelRole: roleMachine}
}

// removeStale deletes the machines not in keep and the MachineDeployments and classes no longer wanted.
func (a *worker) removeStale(ctx context.Context, log logr.Logger, w *extensionsv1alpha1.Worker, keep []Machine,
	wantMDs, wantClasses map[string]bool) error {
	kept := map[string]bool{}
	for _, m := range keep {
		kept[m.Name] = true
	}
	services, configMaps, secrets, err := a.outputs(ctx, w)
	if err != nil {
		return err
	}
	var stale []client.Object
	for i := range services {
		if !kept[services[i].Name] {
			log.Info("Deleting machine", "machine", services[i].Name)
			if err := a.deleteMachine(ctx, services[i].Name); err != nil {
				return err
			}
			stale = append(stale, &services[i])
		}
	}
	for i := range configMaps {
		if !wantMDs[configMaps[i].Name] {
			stale = append(stale, &configMaps[i])
		}
	}
	for i := range secrets {
		if !wantClasses[secrets[i].Name] {
			stale = append(stale, &secrets[i])
		}
	}
	// A machine is gone once deleted: the finalizer comes off right after, as MCM's does when the VM is gone.
	return a.removeAll(ctx, true, stale...)
}

// outputs lists the Worker's machine Services, MachineDeployment ConfigMaps and class Secrets.
func (a *worker) outputs(ctx context.Context, w *extensionsv1alpha1.Worker) ([]corev1.Service, []corev1.ConfigMap, []corev1.Secret, error) {
	sel := func(role string) client.ListOption {
		return client.MatchingLabels{LabelKind: "worker", LabelName: labelValue(w.Name), LabelRole: role}
	}
	services := &corev1.ServiceList{}
	if err := a.r.List(ctx, services, client.InNamespace(w.Namespace), sel(roleMachine)); err != nil {
		return nil, nil, nil, fmt.Errorf("list machines: %w", err)
	}
	configMaps := &corev1.ConfigMapList{}
	if err := a.r.List(ctx, configMaps, client.InNamespace(w.Namespace), sel(roleMachineDeployment)); err != nil {
		return nil, nil, nil, fmt.Errorf("list machine deployments: %w", err)
	}
	secrets := &corev1.SecretList{}
	if err := a.r.List(ctx, secrets, client.InNamespace(w.Namespace), sel(roleMachineClass)); err != nil {
		return nil, nil, nil, fmt.Errorf("list machine classes: %w", err)
	}
	return services.Items, configMaps.Items, secrets.Items, nil
}

// removeOutputs deletes everything the Worker made. Machines lose their finalizer after their deletion (graceful)
// or before it (strip).
func (a *worker) removeOutputs(ctx context.Context, w *extensionsv1alpha1.Worker, strip bool) error {
	services, configMaps, secrets, err := a.outputs(ctx, w)
	if err != nil {
		return err
	}
	var errs []error
	for i := range services {
		s := &services[i]
		if err := a.deleteMachine(ctx, s.Name); err != nil {
			errs = append(errs, err)
			if !strip {
				continue // the Service keeps standing for the machine until it is gone
			}
		}
		if strip {
			errs = append(errs, a.stripFinalizers(ctx, s))
		}
		if err := a.remove(ctx, s); err != nil {
			errs = append(errs, err)
			continue
		}
		if !strip {
			errs = append(errs, a.stripFinalizers(ctx, s))
		}
	}
	var rest []client.Object
	for i := range configMaps {
		rest = append(rest, &configMaps[i])
	}
	for i := range secrets {
		rest = append(rest, &secrets[i])
	}
	rest = append(rest, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: MCMConfigMap, Namespace: w.Namespace}})
	errs = append(errs, a.removeAll(ctx, false, rest...))
	return errors.Join(errs...)
}

func (a *worker) Delete(ctx context.Context, log logr.Logger, w *extensionsv1alpha1.Worker, _ *extsdk.Cluster) error {
	log.Info("Deleting machines")
	return a.removeOutputs(ctx, w, false)
}

// ForceDelete strips the machines' finalizers before deleting them and does not stop at the first error.
func (a *worker) ForceDelete(ctx context.Context, log logr.Logger, w *extensionsv1alpha1.Worker, _ *extsdk.Cluster) error {
	if err := a.removeOutputs(ctx, w, true); err != nil {
		log.Error(err, "Force deletion left objects behind")
	}
	return nil
}

// Migrate saves the live machines in status.state and removes every output, machines with their finalizers
// stripped first (they stand for VMs that live on).
func (a *worker) Migrate(ctx context.Context, _ logr.Logger, w *extensionsv1alpha1.Worker, _ *extsdk.Cluster) error {
	machines, err := a.liveMachines(ctx, w)
	if err != nil {
		return err
	}
	if len(machines) > 0 {
		slices.SortFunc(machines, func(x, y Machine) int { return cmp.Compare(x.Name, y.Name) })
		if err := a.setStatus(w, w.Status.MachineDeployments, machines); err != nil {
			return err
		}
	}
	return a.removeOutputs(ctx, w, true)
}

// bootstrapToken reads the shoot's bootstrap token for machines (extensionsv1alpha1.MachineBootstrapTokenSecret,
// written by the agent).
func (a *worker) bootstrapToken(ctx context.Context, namespace string) ([]byte, error) {
	s := &corev1.Secret{}
	if err := a.r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: extensionsv1alpha1.MachineBootstrapTokenSecret}, s); err != nil {
		return nil, fmt.Errorf("read the machines' bootstrap token (secret %s, written by the agent): %w", extensionsv1alpha1.MachineBootstrapTokenSecret, err)
	}
	t := s.Data[extensionsv1alpha1.MachineBootstrapTokenKey]
	if len(t) == 0 {
		return nil, fmt.Errorf("secret %s has no %s", extensionsv1alpha1.MachineBootstrapTokenSecret, extensionsv1alpha1.MachineBootstrapTokenKey)
	}
	return t, nil
}

// createMachines creates the machines of a MachineDeployment through the machine provider (an existing machine is
// left as it is): the pool's user data with the bootstrap token filled in, and the pool's labels as Node labels.
func (a *worker) createMachines(ctx context.Context, log logr.Logger, pool extensionsv1alpha1.WorkerPool, userData, token []byte,
	machines []Machine) error {
	if a.machines == nil || len(machines) == 0 {
		return nil
	}
	spec := MachineSpec{UserData: bytes.ReplaceAll(userData, []byte(extensionsv1alpha1.BootstrapTokenPlaceholder), token), Labels: nodeLabels(pool)}
	for _, m := range machines {
		if _, err := a.machines.Create(ctx, m.Name, spec); err != nil {
			return fmt.Errorf("pool %s: %w", pool.Name, err)
		}
		log.V(1).Info("Machine running", "machine", m.Name)
	}
	return nil
}

// deleteMachine deletes a machine through the machine provider, if there is one.
func (a *worker) deleteMachine(ctx context.Context, name string) error {
	if a.machines == nil {
		return nil
	}
	return a.machines.Delete(ctx, name)
}

// nodeLabels are the pool's labels a kubelet may set on its Node: those outside kubernetes.io and k8s.io, which
// NodeRestriction keeps for itself (a kubelet asking for one of them would not start).
func nodeLabels(pool extensionsv1alpha1.WorkerPool) map[string]string {
	out := map[string]string{LabelPool: pool.Name}
	for k, v := range pool.Labels {
		domain, _, ok := strings.Cut(k, "/")
		if ok && (domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") || domain == "k8s.io" || strings.HasSuffix(domain, ".k8s.io")) {
			continue
		}
		out[k] = v
	}
	return out
}

// userData reads a pool's user data (the provision OperatingSystemConfig's cloud_config).
func (a *worker) userData(ctx context.Context, namespace string, pool extensionsv1alpha1.WorkerPool) ([]byte, error) {
	ref := pool.UserDataSecretRef
	if ref.Name == "" {
		return nil, nil
	}
	key := ref.Key
	if key == "" {
		key = extensionsv1alpha1.OperatingSystemConfigSecretDataKey
	}
	s := &corev1.Secret{}
	if err := a.r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("pool %s: user data secret %s not found (is its OperatingSystemConfig reconciled?)", pool.Name, ref.Name)
		}
		return nil, fmt.Errorf("pool %s: read user data secret %s: %w", pool.Name, ref.Name, err)
	}
	data, ok := s.Data[key]
	if !ok {
		return nil, fmt.Errorf("pool %s: user data secret %s has no key %s", pool.Name, ref.Name, key)
	}
	return data, nil
}

// workerState decodes status.state; an empty state has no machines.
func workerState(w *extensionsv1alpha1.Worker) (*WorkerState, error) {
	st := &WorkerState{}
	if w.Status.State == nil || len(w.Status.State.Raw) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(w.Status.State.Raw, st); err != nil {
		return nil, fmt.Errorf("status.state is not a WorkerState: %w", err)
	}
	return st, nil
}

// classChecksum is the 5-character checksum in a machine class's name. It covers what a machine is made from, so
// that a change rolls the machines; Gardener requires that a change of nodeAgentSecretName changes it.
func classChecksum(pool extensionsv1alpha1.WorkerPool, zone, networkID string) string {
	volume := ""
	if pool.Volume != nil {
		volume = pool.Volume.Size + "/" + deref(pool.Volume.Type)
	}
	return checksum(5, deref(pool.NodeAgentSecretName), pool.MachineType, pool.MachineImage.Name, pool.MachineImage.Version,
		pool.UserDataSecretRef.Name, volume, deref(pool.Architecture), zone, networkID)
}

// distribute is Gardener's share of size for zone index of zones: size/zones, plus one for the first size%zones.
func distribute(size int32, index, zones int) int32 {
	n := size / int32(zones)
	if int32(index) < size%int32(zones) {
		n++
	}
	return n
}

// autoscalerAnnotations are Gardener's cluster-autoscaler annotations of a MachineDeployment.
func autoscalerAnnotations(o *extensionsv1alpha1.ClusterAutoscalerOptions) map[string]string {
	out := map[string]string{}
	if o == nil {
		return out
	}
	if o.ScaleDownUtilizationThreshold != nil {
		out["autoscaler.gardener.cloud/scale-down-utilization-threshold"] = *o.ScaleDownUtilizationThreshold
	}
	if o.ScaleDownGpuUtilizationThreshold != nil {
		out["autoscaler.gardener.cloud/scale-down-gpu-utilization-threshold"] = *o.ScaleDownGpuUtilizationThreshold
	}
	if o.ScaleDownUnneededTime != nil {
		out["autoscaler.gardener.cloud/scale-down-unneeded-time"] = o.ScaleDownUnneededTime.Duration.String()
	}
	if o.ScaleDownUnreadyTime != nil {
		out["autoscaler.gardener.cloud/scale-down-unready-time"] = o.ScaleDownUnreadyTime.Duration.String()
	}
	if o.MaxNodeProvisionTime != nil {
		out["autoscaler.gardener.cloud/max-node-provision-time"] = o.MaxNodeProvisionTime.Duration.String()
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
