package local_test

import (
	"slices"
	"strings"
	"testing"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/provider/local"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// TestWorker covers a Worker's life after creation: a lost machine shows in EveryNodeReady and is replaced by the
// next reconcile, a new nodeAgentSecretName rolls every machine to a new class, hibernation scales to zero and
// waking up scales back.
func TestWorker(t *testing.T) {
	e := newEnv(t)
	ns := e.Namespace
	e.userDataSecret("osc-result-pool", "#cloud-config\n")
	w := &extensionsv1alpha1.Worker{ObjectMeta: e.meta("shoot")}
	w.Spec.InfrastructureProviderStatus = infraStatus("net-worker")
	w.Spec.Pools = []extensionsv1alpha1.WorkerPool{pool("pool", 2, 4, "osc-result-pool")}
	e.deploy(w)
	machines := machineNames(t, w)
	if len(machines) != 2 {
		t.Fatalf("machines = %v", machines)
	}
	e.condition(w, extensionsv1alpha1.ShootEveryNodeReady, extensionsv1alpha1.ConditionTrue)

	// A machine vanishes: EveryNodeReady turns False; the next reconcile replaces it and it turns True.
	lost := service(ns, machines[0])
	e.get(lost)
	lost.Finalizers = nil
	if err := e.Client.Update(e.ctx(), lost); err != nil {
		t.Fatal(err)
	}
	e.deleteAndWait(lost)
	e.condition(w, extensionsv1alpha1.ShootEveryNodeReady, extensionsv1alpha1.ConditionFalse)
	if c := extensionsv1alpha1.GetCondition(w.Status.Conditions, extensionsv1alpha1.ShootEveryNodeReady); !strings.Contains(c.Message, machines[0]) {
		t.Errorf("condition message %q does not name the lost machine", c.Message)
	}
	e.reconcile(w)
	replaced := machineNames(t, w)
	if len(replaced) != 2 || !slices.Contains(replaced, machines[1]) || slices.Contains(replaced, machines[0]) {
		t.Errorf("after the reconcile machines = %v, want %s kept and %s replaced", replaced, machines[1], machines[0])
	}
	e.condition(w, extensionsv1alpha1.ShootEveryNodeReady, extensionsv1alpha1.ConditionTrue)

	// A new nodeAgentSecretName: a new class, new machines, the old class and machines gone.
	oldClass := workerState(t, w).Machines[0].Class
	agentSecret := "osc-pool-fghij-original"
	w.Spec.Pools[0].NodeAgentSecretName = &agentSecret
	if err := e.Client.Update(e.ctx(), w); err != nil {
		t.Fatal(err)
	}
	e.reconcile(w)
	rolled := workerState(t, w).Machines
	if len(rolled) != 2 || rolled[0].Class == oldClass || !strings.HasPrefix(rolled[0].Class, ns+"-pool-z1-") {
		t.Fatalf("after the roll machines = %+v (old class %s)", rolled, oldClass)
	}
	for _, m := range rolled {
		if slices.Contains(replaced, m.Name) {
			t.Errorf("machine %s survived the roll", m.Name)
		}
	}
	if live := e.liveMachines(); !slices.Equal(live, machineNames(t, w)) {
		t.Errorf("live machines %v, want %v", live, machineNames(t, w))
	}
	e.absent(secret(ns, oldClass))
	e.get(secret(ns, rolled[0].Class))

	// Hibernation: no machines, the MachineDeployment at zero, machineDeployments still reported.
	e.writeShoot(func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{Enabled: new(true)} })
	e.reconcile(w)
	if got := e.liveMachines(); len(got) != 0 {
		t.Errorf("hibernated shoot has machines %v", got)
	}
	if got := machineNames(t, w); len(got) != 0 {
		t.Errorf("hibernated state has machines %v", got)
	}
	md := configMap(ns, ns+"-pool-z1")
	e.get(md)
	if md.Data["replicas"] != "0" || len(w.Status.MachineDeployments) != 1 || w.Status.MachineDeployments[0].Minimum != 2 {
		t.Errorf("hibernated: replicas %s, machineDeployments %+v", md.Data["replicas"], w.Status.MachineDeployments)
	}
	mcm := configMap(ns, local.MCMConfigMap)
	e.get(mcm)
	if mcm.Data["replicas"] != "0" {
		t.Errorf("machine-controller-manager replicas %s while hibernated", mcm.Data["replicas"])
	}

	// Wake up.
	e.writeShoot(func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{Enabled: new(false)} })
	e.reconcile(w)
	if got := e.liveMachines(); len(got) != 2 {
		t.Errorf("woken shoot has machines %v, want 2", got)
	}

	// Force deletion strips the machines' finalizers and removes everything.
	e.writeShoot(func(s *corev1beta1.Shoot) {
		s.Metadata.Annotations = map[string]string{extensionsv1alpha1.AnnotationForceDeletion: "true"}
	})
	e.deleteAndWait(w)
	if got := e.liveMachines(); len(got) != 0 {
		t.Errorf("machines left after force deletion: %v", got)
	}
	e.absent(md, mcm)
}
