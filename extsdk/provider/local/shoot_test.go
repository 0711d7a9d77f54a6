package local_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/provider/local"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// TestShoot runs a shoot's extension objects through provider-local in the agent's order, checks what each kind
// makes, the health conditions and the heartbeat, and then deletes everything in reverse.
func TestShoot(t *testing.T) {
	e := newEnv(t)
	ns := e.Namespace
	nodes := "10.42.0.0/16"
	e.writeShoot(func(s *corev1beta1.Shoot) {
		s.Spec.Networking = &corev1beta1.Networking{Nodes: &nodes, Pods: new("100.96.0.0/11"), Services: new("100.64.0.0/13")}
	})
	latency := map[string]time.Duration{}

	// Infrastructure: a network with a generated id, recorded in a ConfigMap and reported for the next steps.
	infra := &extensionsv1alpha1.Infrastructure{ObjectMeta: e.meta("shoot")}
	infra.Spec.Region = "local"
	infra.Spec.SecretRef.Name = "cloudprovider"
	latency["Infrastructure"] = e.deploy(infra)
	var ps local.InfrastructureStatus
	if err := json.Unmarshal(infra.Status.ProviderStatus.Raw, &ps); err != nil {
		t.Fatal(err)
	}
	if ps.APIVersion != local.APIVersion || ps.Kind != "InfrastructureStatus" || !strings.HasPrefix(ps.Network.ID, "net-") || ps.Network.NodesCIDR != nodes {
		t.Errorf("providerStatus = %+v", ps)
	}
	if infra.Status.NodesCIDR == nil || *infra.Status.NodesCIDR != nodes {
		t.Errorf("nodesCIDR = %v, want %s", infra.Status.NodesCIDR, nodes)
	}
	if n := infra.Status.Networking; n == nil || n.Pods[0] != "100.96.0.0/11" || n.Services[0] != "100.64.0.0/13" {
		t.Errorf("networking = %+v", n)
	}
	cm := configMap(ns, local.InfrastructureConfigMap)
	e.get(cm)
	if cm.Data["networkID"] != ps.Network.ID {
		t.Errorf("ConfigMap networkID = %q, want %q", cm.Data["networkID"], ps.Network.ID)
	}

	// DNSRecords: CoreDNS entries in the DNS namespace, which is created on first use.
	internal := &extensionsv1alpha1.DNSRecord{ObjectMeta: e.meta("shoot-internal")}
	internal.Spec.Name, internal.Spec.RecordType, internal.Spec.Values = "api.shoot.dev.internal.local.gardener.cloud", extensionsv1alpha1.DNSRecordTypeA, []string{"10.0.0.10"}
	latency["DNSRecord"] = e.deploy(internal)
	external := &extensionsv1alpha1.DNSRecord{ObjectMeta: e.meta("shoot-external")}
	ttl := int64(300)
	external.Spec.Name, external.Spec.RecordType, external.Spec.Values, external.Spec.TTL = "api.shoot.example.com", extensionsv1alpha1.DNSRecordTypeCNAME, []string{internal.Spec.Name}, &ttl
	e.deploy(external)
	if z := internal.Status.Zone; z == nil || *z != local.DefaultZone {
		t.Errorf("internal zone = %v, want %s", deref(z), local.DefaultZone)
	}
	if z := external.Status.Zone; z == nil || *z != "shoot.example.com" {
		t.Errorf("external zone = %v, want shoot.example.com", deref(z))
	}
	dns := configMap(e.dnsNamespace, local.CoreDNSConfigMap)
	e.get(dns)
	if got := dns.Data[internal.Spec.Name+".override"]; !strings.Contains(got, "120 IN A 10.0.0.10") {
		t.Errorf("internal entry = %q, want an A answer with TTL 120", got)
	}
	if got := dns.Data[external.Spec.Name+".override"]; !strings.Contains(got, "rewrite stop name regex") || !strings.Contains(got, internal.Spec.Name) {
		t.Errorf("external entry = %q, want a rewrite to the internal name", got)
	}

	// ControlPlane: needs the Infrastructure's providerStatus; deploys the stand-ins with real certificates.
	cp := &extensionsv1alpha1.ControlPlane{ObjectMeta: e.meta("shoot")}
	cp.Spec.Region = "local"
	cp.Spec.InfrastructureProviderStatus = infra.Status.ProviderStatus
	latency["ControlPlane"] = e.deploy(cp)
	ccm := configMap(ns, local.CCMConfigMap)
	e.get(ccm)
	if !strings.Contains(ccm.Data["cloud-provider-config"], ps.Network.ID) {
		t.Errorf("cloud-provider-config = %q, want the network id", ccm.Data["cloud-provider-config"])
	}
	certs := secret(ns, local.CCMServerSecret)
	e.get(certs)
	verifyServerCert(t, certs.Data["ca.crt"], certs.Data["tls.crt"], local.CCMConfigMap+"."+ns+".svc")
	e.get(configMap(ns, local.StorageConfigMap))
	e.get(configMap(ns, local.ObservabilityConfigMap))
	e.reconcile(cp)
	certsAgain := secret(ns, local.CCMServerSecret)
	e.get(certsAgain)
	if string(certsAgain.Data["ca.crt"]) != string(certs.Data["ca.crt"]) {
		t.Error("a reconcile replaced the CA")
	}

	// Network.
	nw := &extensionsv1alpha1.Network{ObjectMeta: e.meta("shoot")}
	nw.Spec.PodCIDR, nw.Spec.ServiceCIDR = "100.96.0.0/11", "100.64.0.0/13"
	nw.Spec.IPFamilies = []extensionsv1alpha1.IPFamily{extensionsv1alpha1.IPFamilyIPv4}
	latency["Network"] = e.deploy(nw)
	nwCM := configMap(ns, local.RecordConfigMapName("network", "shoot"))
	e.get(nwCM)
	if nwCM.Data["podCIDR"] != "100.96.0.0/11" || len(nw.Status.IPFamilies) != 1 {
		t.Errorf("network ConfigMap %v, status ipFamilies %v", nwCM.Data, nw.Status.IPFamilies)
	}

	// OperatingSystemConfigs: the provision one gets its user data secret, the reconcile one nothing.
	provision := osc(e, "osc-pool-a-12345-init", extensionsv1alpha1.OperatingSystemConfigPurposeProvision)
	latency["OperatingSystemConfig"] = e.deploy(provision)
	original := osc(e, "osc-pool-a-12345-original", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile)
	e.deploy(original)
	ref := provision.Status.CloudConfig
	if ref == nil || ref.SecretRef.Name != local.OSCResultSecretPrefix+provision.Name || ref.SecretRef.Namespace != ns {
		t.Fatalf("cloudConfig = %+v", ref)
	}
	userData := secret(ns, ref.SecretRef.Name)
	e.get(userData)
	cloudConfig := string(userData.Data[extensionsv1alpha1.OperatingSystemConfigSecretDataKey])
	kubelet := base64.StdEncoding.EncodeToString([]byte(*provision.Spec.Units[0].Content))
	for _, want := range []string{"#cloud-config\n", "<<BOOTSTRAP_TOKEN>>", kubelet, "/etc/systemd/system/kubelet.service",
		"systemctl enable 'kubelet.service'", "systemctl start 'kubelet.service'", "permissions: \"0600\""} {
		if !strings.Contains(cloudConfig, want) {
			t.Errorf("cloud_config lacks %q:\n%s", want, cloudConfig)
		}
	}
	if o := userData.OwnerReferences; len(o) != 1 || o[0].UID != provision.UID || o[0].Controller == nil || !*o[0].Controller {
		t.Errorf("ownerReferences = %+v, want the OperatingSystemConfig as controller", o)
	}
	if original.Status.CloudConfig != nil {
		t.Errorf("reconcile config got cloudConfig %+v", original.Status.CloudConfig)
	}
	e.absent(secret(ns, local.OSCResultSecretPrefix+original.Name))

	// Worker: pool a with 3 machines over two zones, pool b with minimum 0 still one machine.
	w := &extensionsv1alpha1.Worker{ObjectMeta: e.meta("shoot")}
	w.Spec.InfrastructureProviderStatus = infra.Status.ProviderStatus
	w.Spec.Pools = []extensionsv1alpha1.WorkerPool{pool("a", 3, 5, userData.Name, "z1", "z2"), pool("b", 0, 2, userData.Name)}
	latency["Worker"] = e.deploy(w)
	wantMDs := []extensionsv1alpha1.MachineDeployment{
		{Name: ns + "-a-z1", Minimum: 2, Maximum: 3}, {Name: ns + "-a-z2", Minimum: 1, Maximum: 2}, {Name: ns + "-b-z1", Minimum: 0, Maximum: 2}}
	if len(w.Status.MachineDeployments) != len(wantMDs) {
		t.Fatalf("machineDeployments = %+v", w.Status.MachineDeployments)
	}
	for i, md := range w.Status.MachineDeployments {
		if md.Name != wantMDs[i].Name || md.Minimum != wantMDs[i].Minimum || md.Maximum != wantMDs[i].Maximum {
			t.Errorf("machineDeployments[%d] = %+v, want %+v", i, md, wantMDs[i])
		}
	}
	if w.Status.MachineDeploymentsLastUpdateTime == nil {
		t.Error("no machineDeploymentsLastUpdateTime")
	}
	machines := machineNames(t, w)
	if len(machines) != 4 || strings.Join(machines, ",") != strings.Join(e.liveMachines(), ",") {
		t.Errorf("machines in state %v, live %v; want 4, the same", machines, e.liveMachines())
	}
	perMD := map[string]int{}
	for _, m := range workerState(t, w).Machines {
		perMD[m.MachineDeployment]++
		svc := service(ns, m.Name)
		e.get(svc)
		if len(svc.Finalizers) != 1 || svc.Finalizers[0] != local.MachineFinalizer {
			t.Errorf("machine %s finalizers = %v", m.Name, svc.Finalizers)
		}
		class := secret(ns, m.Class)
		e.get(class)
		if string(class.Data["userData"]) != cloudConfig {
			t.Errorf("class %s userData differs from the OperatingSystemConfig's", m.Class)
		}
	}
	if perMD[ns+"-a-z1"] != 2 || perMD[ns+"-a-z2"] != 1 || perMD[ns+"-b-z1"] != 1 {
		t.Errorf("machines per deployment = %v", perMD)
	}
	md := configMap(ns, ns+"-a-z1")
	e.get(md)
	if md.Data["replicas"] != "2" || md.Data["nodeAgentSecretName"] != *w.Spec.Pools[0].NodeAgentSecretName {
		t.Errorf("machine deployment %s = %v", md.Name, md.Data)
	}

	// ContainerRuntime, Extension, Bastion.
	cr := &extensionsv1alpha1.ContainerRuntime{ObjectMeta: e.meta("local-a")}
	cr.Spec.BinaryPath = extensionsv1alpha1.ContainerDRuntimeContainersBinFolder
	cr.Spec.WorkerPool.Name = "a"
	cr.Spec.WorkerPool.Selector.MatchLabels = map[string]string{"worker.gardener.cloud/pool": "a"}
	latency["ContainerRuntime"] = e.deploy(cr)
	e.get(configMap(ns, local.RecordConfigMapName("containerruntime", cr.Name)))
	ext := &extensionsv1alpha1.Extension{ObjectMeta: e.meta("local")}
	ext.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(`{"greeting":"hello"}`)}
	latency["Extension"] = e.deploy(ext)
	extCM := configMap(ns, local.RecordConfigMapName("extension", "local"))
	e.get(extCM)
	if extCM.Data["providerConfig"] != `{"greeting":"hello"}` {
		t.Errorf("extension ConfigMap = %v", extCM.Data)
	}
	b := &extensionsv1alpha1.Bastion{ObjectMeta: e.meta("cli-abcdef")}
	b.Spec.UserData = []byte("#!/bin/bash\necho ssh-ed25519 AAAA >> /home/gardener/.ssh/authorized_keys\n")
	b.Spec.Ingress = []extensionsv1alpha1.BastionIngressPolicy{{IPBlock: networkingv1.IPBlock{CIDR: "192.0.2.0/24"}}}
	latency["Bastion"] = e.deploy(b)
	if b.Status.Ingress == nil || b.Status.Ingress.IP != local.BastionIngressIP {
		t.Errorf("bastion ingress = %+v", b.Status.Ingress)
	}
	bs := secret(ns, local.BastionUserDataSecretName(b.Name))
	e.get(bs)
	if string(bs.Data["userData"]) != string(b.Spec.UserData) {
		t.Errorf("bastion user data = %q", bs.Data["userData"])
	}
	e.get(service(ns, local.BastionServiceName(b.Name)))

	// A second run of each kind, as in a shoot's reconcile: request → ready.
	again := map[string]time.Duration{}
	for kind, obj := range map[string]extensionsv1alpha1.Object{"Infrastructure": infra, "DNSRecord": internal,
		"ControlPlane": cp, "Network": nw, "OperatingSystemConfig": provision, "Worker": w, "ContainerRuntime": cr,
		"Extension": ext, "Bastion": b} {
		start := time.Now()
		e.reconcile(obj)
		again[kind] = time.Since(start)
	}
	if got := machineNames(t, w); strings.Join(got, ",") != strings.Join(machines, ",") {
		t.Errorf("a reconcile changed the machines: %v, want %v", got, machines)
	}
	for kind, d := range latency {
		t.Logf("%-22s create → ready %4dms, reconcile → ready %4dms", kind, d.Milliseconds(), again[kind].Milliseconds())
	}

	// Health: every condition of ControlPlane, Worker and Network True.
	for _, c := range []struct {
		obj extensionsv1alpha1.Object
		typ string
	}{
		{cp, extensionsv1alpha1.ShootControlPlaneHealthy}, {cp, extensionsv1alpha1.ShootSystemComponentsHealthy},
		{cp, extensionsv1alpha1.ShootObservabilityComponentsReady}, {w, extensionsv1alpha1.ShootEveryNodeReady},
		{w, extensionsv1alpha1.ShootSystemComponentsHealthy}, {nw, extensionsv1alpha1.ShootSystemComponentsHealthy},
	} {
		e.condition(c.obj, c.typ, extensionsv1alpha1.ConditionTrue)
	}

	// Heartbeat.
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: extensionsv1alpha1.HeartbeatLeaseName, Namespace: ns}}
	e.get(lease)
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != local.ExtensionName {
		t.Errorf("heartbeat holder = %v", lease.Spec.HolderIdentity)
	}

	// Delete in the agent's order; every output goes.
	for _, obj := range []client.Object{b, w, nw, original, provision, cr, ext, cp, infra, external, internal} {
		e.deleteAndWait(obj)
	}
	e.absent(configMap(ns, local.InfrastructureConfigMap), configMap(ns, local.CCMConfigMap), secret(ns, local.CCMServerSecret),
		configMap(ns, local.StorageConfigMap), configMap(ns, local.ObservabilityConfigMap), configMap(ns, local.MCMConfigMap),
		configMap(ns, md.Name), secret(ns, userData.Name), nwCM, extCM, configMap(ns, local.RecordConfigMapName("containerruntime", cr.Name)),
		bs, service(ns, local.BastionServiceName(b.Name)))
	if live := e.liveMachines(); len(live) != 0 {
		t.Errorf("machines left: %v", live)
	}
	e.get(dns)
	if len(dns.Data) != 0 {
		t.Errorf("DNS entries left: %v", dns.Data)
	}
}

// osc is an OperatingSystemConfig as the agent writes it: the kubelet unit and its configuration, and for provision
// the bootstrap token placeholder.
func osc(e *env, name string, purpose extensionsv1alpha1.OperatingSystemConfigPurpose) *extensionsv1alpha1.OperatingSystemConfig {
	o := &extensionsv1alpha1.OperatingSystemConfig{ObjectMeta: e.meta(name)}
	o.Spec.Purpose = purpose
	start, enable := extensionsv1alpha1.CommandStart, true
	unit := "[Service]\nExecStart=/opt/bin/kubelet --config=/var/lib/kubelet/config/kubelet\n"
	o.Spec.Units = []extensionsv1alpha1.Unit{{Name: "kubelet.service", Command: &start, Enable: &enable, Content: &unit,
		DropIns: []extensionsv1alpha1.DropIn{{Name: "10-env.conf", Content: "[Service]\nEnvironment=A=b\n"}}}}
	perm := int32(0o600)
	o.Spec.Files = []extensionsv1alpha1.File{{Path: "/var/lib/kubelet/config/kubelet", Permissions: &perm,
		Content: extensionsv1alpha1.FileContent{Inline: &extensionsv1alpha1.FileContentInline{Data: "kind: KubeletConfiguration\n"}}}}
	if purpose == extensionsv1alpha1.OperatingSystemConfigPurposeProvision {
		unencoded := true
		o.Spec.Files = append(o.Spec.Files, extensionsv1alpha1.File{Path: "/var/lib/gardener-node-agent/credentials/bootstrap-token",
			Permissions: &perm, Content: extensionsv1alpha1.FileContent{Inline: &extensionsv1alpha1.FileContentInline{Data: "<<BOOTSTRAP_TOKEN>>"},
				TransmitUnencoded: &unencoded}})
	}
	return o
}

// verifyServerCert checks that certPEM is signed by caPEM and valid for host.
func verifyServerCert(t *testing.T, caPEM, certPEM []byte, host string) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt holds no certificate")
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("tls.crt holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: host}); err != nil {
		t.Errorf("server certificate: %v", err)
	}
}
