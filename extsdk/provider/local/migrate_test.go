package local_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/provider/local"
)

// TestMigrateRestore migrates a shoot's Infrastructure, Worker, DNSRecord and ControlPlane away (seed-local objects
// go, the DNS entry and status.state stay), then restores them as the agent does on the destination seed: new
// objects annotated wait-for-state, the saved state written, then restore. The network id and the machines come
// back unchanged.
func TestMigrateRestore(t *testing.T) {
	e := newEnv(t)
	ns := e.Namespace
	e.userDataSecret("osc-result-pool", "#cloud-config\n")

	infra := &extensionsv1alpha1.Infrastructure{ObjectMeta: e.meta("shoot")}
	e.deploy(infra)
	networkID := networkIDOf(t, infra)
	rec := &extensionsv1alpha1.DNSRecord{ObjectMeta: e.meta("shoot-internal")}
	rec.Spec.Name, rec.Spec.RecordType, rec.Spec.Values = "api.shoot.local.gardener.cloud", extensionsv1alpha1.DNSRecordTypeA, []string{"10.0.0.1"}
	e.deploy(rec)
	cp := &extensionsv1alpha1.ControlPlane{ObjectMeta: e.meta("shoot")}
	cp.Spec.InfrastructureProviderStatus = infra.Status.ProviderStatus
	e.deploy(cp)
	w := &extensionsv1alpha1.Worker{ObjectMeta: e.meta("shoot")}
	w.Spec.InfrastructureProviderStatus = infra.Status.ProviderStatus
	w.Spec.Pools = []extensionsv1alpha1.WorkerPool{pool("pool", 2, 3, "osc-result-pool", "z1", "z2", "z3")}
	e.deploy(w)
	machines := machineNames(t, w)
	if len(machines) != 2 {
		t.Fatalf("machines = %v, want 2", machines)
	}

	// Migrate.
	objs := []extensionsv1alpha1.Object{infra, rec, cp, w}
	for _, o := range objs {
		e.annotate(o, extensionsv1alpha1.OperationMigrate, nil)
	}
	for _, o := range objs {
		e.waitOperation(o, extensionsv1alpha1.LastOperationTypeMigrate)
		if len(o.GetFinalizers()) != 0 {
			t.Errorf("%T still has finalizers %v after migration", o, o.GetFinalizers())
		}
	}
	e.absent(configMap(ns, local.InfrastructureConfigMap), configMap(ns, local.CCMConfigMap), secret(ns, local.CCMServerSecret),
		configMap(ns, local.MCMConfigMap), configMap(ns, ns+"-pool-z1"))
	if live := e.liveMachines(); len(live) != 0 {
		t.Errorf("machines left after migration: %v", live)
	}
	dns := configMap(e.dnsNamespace, local.CoreDNSConfigMap)
	e.get(dns)
	if _, ok := dns.Data[rec.Spec.Name+".override"]; !ok {
		t.Error("migration removed the DNS entry")
	}
	if got := machineNames(t, w); !slices.Equal(got, machines) {
		t.Errorf("state after migration has machines %v, want %v", got, machines)
	}

	// A migrated object ignores further reconciles.
	e.annotate(infra, extensionsv1alpha1.OperationReconcile, nil)
	e.until("reconcile request taken", func() error {
		e.get(infra)
		if op := infra.Annotations[extensionsv1alpha1.AnnotationOperation]; op != "" {
			return fmt.Errorf("annotation %s still there", op)
		}
		return nil
	})
	e.absent(configMap(ns, local.InfrastructureConfigMap))
	if lo := infra.Status.LastOperation; lo.Type != extensionsv1alpha1.LastOperationTypeMigrate {
		t.Errorf("a migrated Infrastructure ran %s", lo.Type)
	}

	// Restore on the "destination seed": the objects are new, with the state the agent saved.
	states := map[string]*runtime.RawExtension{}
	for _, o := range objs {
		states[kindName(o)] = o.GetExtensionStatus().State
		e.deleteAndWait(o)
	}
	infra = &extensionsv1alpha1.Infrastructure{ObjectMeta: e.meta("shoot")}
	rec2 := &extensionsv1alpha1.DNSRecord{ObjectMeta: e.meta("shoot-internal")}
	rec2.Spec = rec.Spec
	cp2 := &extensionsv1alpha1.ControlPlane{ObjectMeta: e.meta("shoot")}
	cp2.Spec = cp.Spec
	w2 := &extensionsv1alpha1.Worker{ObjectMeta: e.meta("shoot")}
	w2.Spec = w.Spec
	restored := []extensionsv1alpha1.Object{infra, rec2, cp2, w2}
	for _, o := range restored {
		o.SetAnnotations(map[string]string{extensionsv1alpha1.AnnotationOperation: extensionsv1alpha1.OperationWaitForState})
		o.GetExtensionSpec().Type = local.Type
		if err := e.Client.Create(e.ctx(), o); err != nil {
			t.Fatal(err)
		}
		if st := states[kindName(o)]; st != nil {
			o.GetExtensionStatus().State = st
			if err := e.Client.Status().Update(e.ctx(), o); err != nil {
				t.Fatal(err)
			}
		}
		e.annotate(o, extensionsv1alpha1.OperationRestore, nil)
	}
	for _, o := range restored {
		e.waitOperation(o, extensionsv1alpha1.LastOperationTypeRestore)
	}
	if got := networkIDOf(t, infra); got != networkID {
		t.Errorf("restored network id %s, want %s", got, networkID)
	}
	cm := configMap(ns, local.InfrastructureConfigMap)
	e.get(cm)
	if cm.Data["networkID"] != networkID {
		t.Errorf("restored ConfigMap networkID %s, want %s", cm.Data["networkID"], networkID)
	}
	if got := machineNames(t, w2); !slices.Equal(got, machines) {
		t.Errorf("restored machines %v, want %v", got, machines)
	}
	if live := e.liveMachines(); !slices.Equal(live, machines) {
		t.Errorf("live machines after restore %v, want %v", live, machines)
	}
	e.get(secret(ns, local.CCMServerSecret))
	e.get(dns)
	if !strings.Contains(dns.Data[rec.Spec.Name+".override"], "10.0.0.1") {
		t.Errorf("DNS entry after restore = %q", dns.Data[rec.Spec.Name+".override"])
	}

	// A later reconcile keeps everything.
	e.reconcile(w2)
	if got := machineNames(t, w2); !slices.Equal(got, machines) {
		t.Errorf("machines after a reconcile %v, want %v", got, machines)
	}
	e.reconcile(infra)
	if got := networkIDOf(t, infra); got != networkID {
		t.Errorf("network id after a reconcile %s, want %s", got, networkID)
	}
}

func kindName(o client.Object) string { return fmt.Sprintf("%T/%s", o, o.GetName()) }

func networkIDOf(t *testing.T, infra *extensionsv1alpha1.Infrastructure) string {
	t.Helper()
	var st local.InfrastructureState
	if infra.Status.State == nil {
		t.Fatal("Infrastructure has no status.state")
	}
	if err := json.Unmarshal(infra.Status.State.Raw, &st); err != nil {
		t.Fatal(err)
	}
	var ps local.InfrastructureStatus
	if err := json.Unmarshal(infra.Status.ProviderStatus.Raw, &ps); err != nil {
		t.Fatal(err)
	}
	if ps.Network.ID != st.NetworkID {
		t.Errorf("providerStatus network %s, state %s", ps.Network.ID, st.NetworkID)
	}
	return st.NetworkID
}
