package shoot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/trellis-dev/trellis/agent/extension"
	"github.com/trellis-dev/trellis/agent/flow"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// Names of the objects the reconcile flow writes into the shoot's namespace, as gardenlet names them.
const (
	secretCloudProvider      = "cloudprovider"
	secretDNSInternal        = "dnsrecord-internal"
	secretDNSExternal        = "dnsrecord-external"
	serviceKubeAPIServer     = "kube-apiserver"
	referencedResourcePrefix = "ref-"
	containerRuntimeBinPath  = "/var/bin/containerruntimes"
	labelWorkerPool          = "worker.gardener.cloud/pool"
	labelRole                = "gardener.cloud/role"
	defaultPodsCIDR          = "100.96.0.0/11"
	defaultServicesCIDR      = "100.64.0.0/13"
)

// Task names: Gardener's task IDs, shown in lastOperation.description and lastErrors[].taskID.
const (
	taskNamespace        = "Deploying Shoot namespace in Seed"
	taskCloudProvider    = "Deploying cloud provider account secret"
	taskReferenced       = "Deploying referenced resources"
	taskCluster          = "Deploying Cluster resource"
	taskInfrastructure   = "Deploying Shoot infrastructure"
	taskKubeAPIService   = "Deploying Kubernetes API server service in the Seed cluster"
	taskInternalDNS      = "Deploying internal domain DNS record"
	taskExternalDNS      = "Deploying external domain DNS record"
	taskBackupEntry      = "Deploying BackupEntry"
	taskExtBeforeKAPI    = "Deploying extension resources before kube-apiserver"
	taskControlPlane     = "Deploying shoot control plane components"
	taskExtAfterKAPI     = "Deploying extension resources after kube-apiserver"
	taskOSC              = "Deploying operating system specific configuration for shoot workers"
	taskNetwork          = "Deploying shoot network plugin"
	taskWorker           = "Configuring shoot worker pools"
	taskExtAfterWorker   = "Deploying extension resources after workers"
	taskContainerRuntime = "Deploying container runtime resources"
	taskDestroyDNS       = "Destroying DNS records of the hibernated shoot"
	taskStaleExtensions  = "Deleting stale extension resources"
	taskSecrets          = "Initializing secrets management"
	taskCleanupSecrets   = "Cleaning up secrets that are no longer needed"
)

// reconcileGraph is the reconcile flow (also for create, restore and hibernation) in Gardener's order.
func (op *operation) reconcileGraph() *flow.Graph {
	g := flow.New("reconcile")
	t := op.timeout()
	hib := op.hibernated()
	workerless := len(op.shoot.GetSpec().GetProvider().GetWorkers()) == 0
	ns := g.Add(flow.Task{Name: taskNamespace, Fn: op.deployNamespace, Timeout: t})
	secrets := g.Add(flow.Task{Name: taskSecrets, Fn: op.deployCredentials, Dependencies: []string{ns}, Timeout: t})
	secret := g.Add(flow.Task{Name: taskCloudProvider, Fn: op.deployCloudProviderSecret, Dependencies: []string{ns}, Timeout: t})
	refs := g.Add(flow.Task{Name: taskReferenced, Fn: op.deployReferencedResources, Dependencies: []string{ns}, Timeout: t})
	cluster := g.Add(flow.Task{Name: taskCluster, Fn: op.deployCluster, Dependencies: []string{ns}, Timeout: t})
	infra := g.Add(flow.Task{Name: taskInfrastructure, Fn: op.deployInfrastructure, Dependencies: []string{secret, cluster}, Timeout: t})
	kapi := g.Add(flow.Task{Name: taskKubeAPIService, Fn: op.deployKubeAPIServerService, Dependencies: []string{ns}, Timeout: t})
	internalDNS := g.Add(flow.Task{Name: taskInternalDNS, Fn: op.deployInternalDNS, Skip: hib || op.internalDomain() == "", Dependencies: []string{kapi, cluster}, Timeout: t})
	externalDNS := g.Add(flow.Task{Name: taskExternalDNS, Fn: op.deployExternalDNS, Skip: hib || op.externalDomain() == "", Dependencies: []string{kapi, cluster, internalDNS}, Timeout: t})
	backup := g.Add(flow.Task{Name: taskBackupEntry, Fn: op.deployBackupEntry, Skip: op.seed.GetSpec().GetBackup() == nil, Dependencies: []string{ns}, Timeout: t, RetryInterval: hubPollInterval})
	before := g.Add(flow.Task{Name: taskExtBeforeKAPI, Fn: op.extensionsFn(extensionsv1alpha1.BeforeKubeAPIServer), Dependencies: []string{infra, cluster, refs}, Timeout: t})
	// The control plane, where Gardener puts it: etcd (beside the ControlPlane extension), the API server after both,
	// then its controllers; a seed that runs no pods gets none (op.controlPlane).
	runs := op.controlPlane
	etcd := g.Add(flow.Task{Name: taskETCD, Fn: op.deployETCD, Skip: !runs, Dependencies: []string{secrets, backup}, Timeout: t})
	cp := g.Add(flow.Task{Name: taskControlPlane, Fn: op.deployControlPlane, Dependencies: []string{secrets, infra, before, kapi, internalDNS, externalDNS, backup}, Timeout: t})
	etcdReady := g.Add(flow.Task{Name: taskWaitETCD, Fn: op.waitETCD, Skip: !runs, Dependencies: []string{etcd}, Timeout: t})
	apiServer := g.Add(flow.Task{Name: taskKubeAPIServer, Fn: op.deployKubeAPIServer, Skip: !runs, Dependencies: []string{secrets, kapi, etcd, cp}, Timeout: t})
	// The etcd encryption key rotation rewrites the encrypted data once kube-apiserver encrypts with the new key
	// (Preparing), and takes the rewrite's labels off once the old key is gone (Completing): reencrypt.go. The tasks
	// read the phase when they run: the flow's start writes it into the status after the graph is built.
	rewriteAdd := g.Add(flow.Task{Name: taskRewriteEncryptedAddLabel, Fn: op.rewriteEncryptedAddLabel, Skip: !runs,
		Dependencies: []string{apiServer, etcdReady}, Timeout: t})
	rewriteRemove := g.Add(flow.Task{Name: taskRewriteEncryptedRemoveLabel, Fn: op.rewriteEncryptedRemoveLabel, Skip: !runs,
		Dependencies: []string{apiServer, etcdReady}, Timeout: t})
	system := g.Add(flow.Task{Name: taskShootSystem, Fn: op.deployShootSystem, Skip: !runs || hib, Dependencies: []string{apiServer, etcdReady}, Timeout: t})
	// The system components of a shoot with workers (Gardener's ManagedResources shoot-core-kube-proxy-<pool> and
	// shoot-core-coredns), applied into the shoot once its API server answers; their health is the shoot care's.
	kubeProxyTask := g.Add(flow.Task{Name: taskKubeProxy, Fn: op.deployKubeProxy, Skip: !runs || hib || workerless, Dependencies: []string{apiServer, etcdReady, system}, Timeout: t})
	coreDNSTask := g.Add(flow.Task{Name: taskCoreDNS, Fn: op.deployCoreDNS, Skip: !runs || hib || workerless, Dependencies: []string{apiServer, etcdReady, system}, Timeout: t})
	storage := g.Add(flow.Task{Name: taskLocalStorage, Fn: op.deployLocalStorage, Skip: !runs || hib || !op.localStorage(), Dependencies: []string{apiServer, etcdReady, system}, Timeout: t})
	kcm := g.Add(flow.Task{Name: taskKCM, Fn: op.deployKubeControllerManager, Skip: !runs, Dependencies: []string{apiServer}, Timeout: t})
	scheduler := g.Add(flow.Task{Name: taskScheduler, Fn: op.deployKubeScheduler, Skip: !runs || workerless, Dependencies: []string{apiServer}, Timeout: t})
	after := g.Add(flow.Task{Name: taskExtAfterKAPI, Fn: op.extensionsFn(extensionsv1alpha1.AfterKubeAPIServer), Dependencies: []string{cp, apiServer}, Timeout: t})
	osc := g.Add(flow.Task{Name: taskOSC, Fn: op.deployOperatingSystemConfigs, Skip: workerless, Dependencies: []string{infra, cp, after}, Timeout: t})
	network := g.Add(flow.Task{Name: taskNetwork, Fn: op.deployNetwork, Skip: workerless || op.shoot.GetSpec().GetNetworking().GetType() == "", Dependencies: []string{infra, cp}, Timeout: t})
	bootstrap := g.Add(flow.Task{Name: taskMachineBootstrap, Fn: op.deployMachineBootstrap, Skip: !runs || hib || workerless, Dependencies: []string{apiServer, etcdReady}, Timeout: t})
	worker := g.Add(flow.Task{Name: taskWorker, Fn: op.deployWorker, Skip: workerless, Dependencies: []string{osc, network, bootstrap}, Timeout: t})
	afterWorker := g.Add(flow.Task{Name: taskExtAfterWorker, Fn: op.extensionsFn(extensionsv1alpha1.AfterWorker), Dependencies: []string{worker}, Timeout: t})
	cr := g.Add(flow.Task{Name: taskContainerRuntime, Fn: op.deployContainerRuntimes, Skip: workerless, Dependencies: []string{worker}, Timeout: t})
	dns := g.Add(flow.Task{Name: taskDestroyDNS, Fn: op.destroyDNSRecords, Skip: !hib, Dependencies: []string{worker, afterWorker}, Timeout: t})
	hibernate := g.Add(flow.Task{Name: taskHibernateCP, Fn: op.hibernateControlPlane, Skip: !runs || !hib,
		Dependencies: []string{worker, afterWorker, dns, system, kubeProxyTask, coreDNSTask, storage, kcm, scheduler, etcdReady}, Timeout: t})
	stale := g.Add(flow.Task{Name: taskStaleExtensions, Fn: op.deleteStaleExtensions, Dependencies: []string{after, afterWorker, cr, dns, hibernate}, Timeout: t})
	g.Add(flow.Task{Name: taskCleanupSecrets, Fn: op.cleanupCredentials, Dependencies: []string{secrets, stale, rewriteAdd, rewriteRemove}, Timeout: t})
	return g
}

// objectMeta names an object in the shoot's namespace.
func (op *operation) objectMeta(name string) kmetav1.ObjectMeta {
	return kmetav1.ObjectMeta{Name: name, Namespace: op.ns}
}

func (op *operation) deployNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: kmetav1.ObjectMeta{Name: op.ns}}
	_, err := controllerutil.CreateOrUpdate(ctx, op.c.cfg.Seed, ns, func() error {
		if ns.DeletionTimestamp != nil {
			return fmt.Errorf("namespace %s is still being deleted", op.ns)
		}
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[labelRole] = "shoot"
		ns.Labels["shoot.gardener.cloud/provider"] = op.shoot.GetSpec().GetProvider().GetType()
		if t := op.shoot.GetSpec().GetNetworking().GetType(); t != "" {
			ns.Labels["networking.shoot.gardener.cloud/provider"] = t
		}
		ns.Labels["seed.gardener.cloud/provider"] = op.seed.GetSpec().GetProvider().GetType()
		if b := op.seed.GetSpec().GetBackup(); b != nil {
			ns.Labels["backup.gardener.cloud/provider"] = b.GetProvider()
		}
		if ns.Annotations == nil {
			ns.Annotations = map[string]string{}
		}
		ns.Annotations["shoot.gardener.cloud/uid"] = op.shoot.GetMetadata().GetUid()
		return nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s: %w", op.ns, err)
	}
	return nil
}

// deploySecret creates or updates a Secret in the shoot's namespace.
func (op *operation) deploySecret(ctx context.Context, name string, data map[string][]byte, labels map[string]string) error {
	s := &corev1.Secret{ObjectMeta: op.objectMeta(name)}
	_, err := controllerutil.CreateOrUpdate(ctx, op.c.cfg.Seed, s, func() error {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		for k, v := range labels {
			s.Labels[k] = v
		}
		s.Type = corev1.SecretTypeOpaque
		s.Data = data
		return nil
	})
	if err != nil {
		return fmt.Errorf("secret %s/%s: %w", op.ns, name, err)
	}
	return nil
}

func (op *operation) deployCloudProviderSecret(ctx context.Context) error {
	data := map[string][]byte{}
	if op.credentials != nil {
		data = op.credentials.GetData()
	}
	return op.deploySecret(ctx, secretCloudProvider, data, map[string]string{"gardener.cloud/purpose": "cloudprovider"})
}

// deployReferencedResources copies the Secrets and ConfigMaps of spec.resources into the namespace with the "ref-"
// prefix, where extensions find them.
func (op *operation) deployReferencedResources(ctx context.Context) error {
	for _, r := range op.shoot.GetSpec().GetResources() {
		ref := r.GetResourceRef()
		name := referencedResourcePrefix + ref.GetName()
		switch ref.GetKind() {
		case "Secret":
			sec, ok := cacheSecret(op.c, op.shoot.GetMetadata().GetNamespace(), ref.GetName())
			if !ok {
				return fmt.Errorf("referenced secret %s/%s is not known to the agent yet", op.shoot.GetMetadata().GetNamespace(), ref.GetName())
			}
			if err := op.deploySecret(ctx, name, sec.GetData(), map[string]string{"resources.gardener.cloud/purpose": "referenced"}); err != nil {
				return err
			}
		case "ConfigMap":
			cm, ok := cacheConfigMap(op.c, op.shoot.GetMetadata().GetNamespace(), ref.GetName())
			if !ok {
				return fmt.Errorf("referenced config map %s/%s is not known to the agent yet", op.shoot.GetMetadata().GetNamespace(), ref.GetName())
			}
			obj := &corev1.ConfigMap{ObjectMeta: op.objectMeta(name)}
			if _, err := controllerutil.CreateOrUpdate(ctx, op.c.cfg.Seed, obj, func() error {
				obj.Data = cm.GetData()
				return nil
			}); err != nil {
				return fmt.Errorf("config map %s/%s: %w", op.ns, name, err)
			}
		}
	}
	return nil
}

// withTypeMeta returns a copy of m with apiVersion and kind set, as Gardener's Cluster resource embeds them.
func withTypeMeta(m proto.Message, apiVersion, kind string) proto.Message {
	m = proto.Clone(m)
	r := m.ProtoReflect()
	if f := r.Descriptor().Fields().ByName("api_version"); f != nil {
		r.Set(f, protoreflect.ValueOfString(apiVersion))
	}
	if f := r.Descriptor().Fields().ByName("kind"); f != nil {
		r.Set(f, protoreflect.ValueOfString(kind))
	}
	return m
}

// deployCluster writes the Cluster resource named after the namespace: the shoot, seed and cloud profile as Gardener
// JSON, which extensions read.
func (op *operation) deployCluster(ctx context.Context) error {
	shoot, err := kjson.Marshal(withTypeMeta(op.shoot, "core.gardener.cloud/v1beta1", "Shoot"))
	if err != nil {
		return err
	}
	seed, err := kjson.Marshal(withTypeMeta(op.seed, "core.gardener.cloud/v1beta1", "Seed"))
	if err != nil {
		return err
	}
	cp := []byte("{}")
	if op.cloudProfile != nil {
		if cp, err = kjson.Marshal(withTypeMeta(op.cloudProfile, "core.gardener.cloud/v1beta1", "CloudProfile")); err != nil {
			return err
		}
	}
	cl := &extensionsv1alpha1.Cluster{ObjectMeta: kmetav1.ObjectMeta{Name: op.ns}}
	_, err = controllerutil.CreateOrUpdate(ctx, op.c.cfg.Seed, cl, func() error {
		cl.Spec.Shoot = runtime.RawExtension{Raw: shoot}
		cl.Spec.Seed = runtime.RawExtension{Raw: seed}
		cl.Spec.CloudProfile = runtime.RawExtension{Raw: cp}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: %w", op.ns, err)
	}
	return nil
}

// deployOrRestore writes an extension object and waits until it is ready. In a restore, the object is first created
// with wait-for-state, its state is written from the ShootState, and then it is annotated restore.
func (op *operation) deployOrRestore(ctx context.Context, obj extensionsv1alpha1.Object, mutate func()) error {
	if op.d.Type == opRestore {
		if _, err := op.ext.Deploy(ctx, obj, extensionsv1alpha1.OperationWaitForState, mutate); err != nil {
			return err
		}
		if err := op.restoreState(ctx, obj); err != nil {
			return err
		}
		if _, err := op.ext.Annotate(ctx, obj, extensionsv1alpha1.OperationRestore); err != nil {
			return err
		}
	} else if _, err := op.ext.Deploy(ctx, obj, extensionsv1alpha1.OperationReconcile, mutate); err != nil {
		return err
	}
	return op.ext.WaitReady(ctx, obj, "")
}

func (op *operation) secretRef() corev1.SecretReference {
	return corev1.SecretReference{Name: secretCloudProvider, Namespace: op.ns}
}

func (op *operation) deployInfrastructure(ctx context.Context) error {
	infra := &extensionsv1alpha1.Infrastructure{ObjectMeta: op.objectMeta(op.shoot.GetMetadata().GetName())}
	return op.deployOrRestore(ctx, infra, func() {
		infra.Spec.Type = op.shoot.GetSpec().GetProvider().GetType()
		infra.Spec.ProviderConfig = rawExt(op.shoot.GetSpec().GetProvider().GetInfrastructureConfig())
		infra.Spec.Region = op.shoot.GetSpec().GetRegion()
		infra.Spec.SecretRef = op.secretRef()
	})
}

// infrastructureStatus is the providerStatus the Infrastructure reported, forwarded to ControlPlane and Worker.
func (op *operation) infrastructureStatus(ctx context.Context) (*runtime.RawExtension, error) {
	infra := &extensionsv1alpha1.Infrastructure{}
	if err := op.c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: op.shoot.GetMetadata().GetName()}, infra); err != nil {
		return nil, fmt.Errorf("read the Infrastructure: %w", err)
	}
	return infra.Status.ProviderStatus, nil
}

// deployKubeAPIServerService creates the Service the shoot's API server is reached through: by DNS records, the
// hub's tunnels and the agent's health probes. On a seed that runs no pods (no control plane) it stands for one
// without a selector, so that DNS records have an address to point at.
func (op *operation) deployKubeAPIServerService(ctx context.Context) error {
	svc := &corev1.Service{ObjectMeta: op.objectMeta(serviceKubeAPIServer)}
	_, err := controllerutil.CreateOrUpdate(ctx, op.c.cfg.Seed, svc, func() error {
		if svc.Labels == nil {
			svc.Labels = map[string]string{}
		}
		svc.Labels["app"] = "kubernetes"
		svc.Labels["role"] = "apiserver"
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		if len(svc.Spec.Ports) == 0 {
			svc.Spec.Ports = []corev1.ServicePort{{Name: "kube-apiserver", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(portKubeAPIServer)}}
		}
		if op.controlPlane {
			svc.Spec.Selector = maps.Clone(labelsKubeAPIServer)
			svc.Spec.Ports[0].TargetPort = intstr.FromInt32(portKubeAPIServer)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("service %s/%s: %w", op.ns, serviceKubeAPIServer, err)
	}
	return nil
}

// apiServerAddress is the address DNS records point at: the API server Service's cluster IP.
func (op *operation) apiServerAddress(ctx context.Context) (string, error) {
	svc := &corev1.Service{}
	if err := op.c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: serviceKubeAPIServer}, svc); err != nil {
		return "", fmt.Errorf("read the API server service: %w", err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", fmt.Errorf("the API server service has no address yet")
	}
	return svc.Spec.ClusterIP, nil
}

// internalDomain is the shoot's internal API domain, "api.<shoot>.<project>.<seed's internal domain>"; empty when the
// seed has no internal domain.
func (op *operation) internalDomain() string {
	d := op.seed.GetSpec().GetDns().GetInternal().GetDomain()
	if d == "" {
		return ""
	}
	return fmt.Sprintf("api.%s.%s.%s", op.shoot.GetMetadata().GetName(), op.project, d)
}

// externalDomain is "api.<spec.dns.domain>"; empty without a domain or with an unmanaged primary provider.
func (op *operation) externalDomain() string {
	d := op.shoot.GetSpec().GetDns().GetDomain()
	if d == "" || op.externalProviderType() == "unmanaged" {
		return ""
	}
	return "api." + d
}

// externalProviderType is the DNS provider type of the external record: the shoot's primary provider, a seed default
// domain that the shoot's domain is in, or the seed's internal one.
func (op *operation) externalProviderType() string {
	for _, p := range op.shoot.GetSpec().GetDns().GetProviders() {
		if p.GetPrimary() && p.GetType() != "" {
			return p.GetType()
		}
	}
	for _, d := range op.seed.GetSpec().GetDns().GetDefaults() {
		if strings.HasSuffix(op.shoot.GetSpec().GetDns().GetDomain(), d.GetDomain()) {
			return d.GetType()
		}
	}
	return op.internalProviderType()
}

func (op *operation) internalProviderType() string {
	if t := op.seed.GetSpec().GetDns().GetInternal().GetType(); t != "" {
		return t
	}
	return op.seed.GetSpec().GetProvider().GetType()
}

func (op *operation) deployDNSRecord(ctx context.Context, name, typ, fqdn, secretName string, zone *string) error {
	addr, err := op.apiServerAddress(ctx)
	if err != nil {
		return err
	}
	if err := op.deploySecret(ctx, secretName, op.dnsCredentials(secretName), map[string]string{"gardener.cloud/purpose": "dnsrecord"}); err != nil {
		return err
	}
	rec := &extensionsv1alpha1.DNSRecord{ObjectMeta: op.objectMeta(name)}
	ttl := int64(120)
	return op.deployOrRestore(ctx, rec, func() {
		rec.Spec.Type = typ
		rec.Spec.SecretRef = corev1.SecretReference{Name: secretName, Namespace: op.ns}
		rec.Spec.Name = fqdn
		rec.Spec.RecordType = extensionsv1alpha1.DNSRecordTypeA
		if strings.Contains(addr, ":") {
			rec.Spec.RecordType = extensionsv1alpha1.DNSRecordTypeAAAA
		}
		rec.Spec.Values = []string{addr}
		rec.Spec.TTL = &ttl
		rec.Spec.Zone = zone
	})
}

// dnsCredentials are the provider credentials of a DNS record: the seed's internal domain credentials, or the
// shoot's primary DNS provider secret, or its cloud provider credentials.
func (op *operation) dnsCredentials(secretName string) map[string][]byte {
	if secretName == secretDNSInternal {
		if ref := op.seed.GetSpec().GetDns().GetInternal().GetCredentialsRef(); ref.GetName() != "" {
			if s, ok := cacheSecret(op.c, ref.GetNamespace(), ref.GetName()); ok {
				return s.GetData()
			}
		}
		return map[string][]byte{}
	}
	for _, p := range op.shoot.GetSpec().GetDns().GetProviders() {
		if p.GetPrimary() && p.GetSecretName() != "" {
			if s, ok := cacheSecret(op.c, op.shoot.GetMetadata().GetNamespace(), p.GetSecretName()); ok {
				return s.GetData()
			}
		}
	}
	if op.credentials != nil {
		return op.credentials.GetData()
	}
	return map[string][]byte{}
}

func (op *operation) deployInternalDNS(ctx context.Context) error {
	return op.deployDNSRecord(ctx, op.shoot.GetMetadata().GetName()+"-internal", op.internalProviderType(), op.internalDomain(),
		secretDNSInternal, op.seed.GetSpec().GetDns().GetInternal().Zone)
}

func (op *operation) deployExternalDNS(ctx context.Context) error {
	return op.deployDNSRecord(ctx, op.shoot.GetMetadata().GetName()+"-external", op.externalProviderType(), op.externalDomain(),
		secretDNSExternal, nil)
}

// dnsRecords are the DNS records the reconcile flow may write.
func (op *operation) dnsRecords() []extensionsv1alpha1.Object {
	n := op.shoot.GetMetadata().GetName()
	return []extensionsv1alpha1.Object{
		&extensionsv1alpha1.DNSRecord{ObjectMeta: op.objectMeta(n + "-external")},
		&extensionsv1alpha1.DNSRecord{ObjectMeta: op.objectMeta(n + "-internal")},
	}
}

func (op *operation) destroyDNSRecords(ctx context.Context) error {
	for _, r := range op.dnsRecords() {
		if err := op.ext.DestroyAndWait(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

func (op *operation) deployControlPlane(ctx context.Context) error {
	status, err := op.infrastructureStatus(ctx)
	if err != nil {
		return err
	}
	cp := &extensionsv1alpha1.ControlPlane{ObjectMeta: op.objectMeta(op.shoot.GetMetadata().GetName())}
	return op.deployOrRestore(ctx, cp, func() {
		cp.Spec.Type = op.shoot.GetSpec().GetProvider().GetType()
		cp.Spec.ProviderConfig = rawExt(op.shoot.GetSpec().GetProvider().GetControlPlaneConfig())
		cp.Spec.Region = op.shoot.GetSpec().GetRegion()
		cp.Spec.SecretRef = op.secretRef()
		cp.Spec.InfrastructureProviderStatus = status
	})
}

func (op *operation) deployNetwork(ctx context.Context) error {
	n := op.shoot.GetSpec().GetNetworking()
	nw := &extensionsv1alpha1.Network{ObjectMeta: op.objectMeta(op.shoot.GetMetadata().GetName())}
	return op.deployOrRestore(ctx, nw, func() {
		nw.Spec.Type = n.GetType()
		nw.Spec.ProviderConfig = rawExt(n.GetProviderConfig())
		nw.Spec.PodCIDR = cmpOr(n.GetPods(), defaultPodsCIDR)
		nw.Spec.ServiceCIDR = cmpOr(n.GetServices(), defaultServicesCIDR)
		nw.Spec.IPFamilies = nil
		for _, f := range n.GetIpFamilies() {
			nw.Spec.IPFamilies = append(nw.Spec.IPFamilies, extensionsv1alpha1.IPFamily(f))
		}
		if len(nw.Spec.IPFamilies) == 0 {
			nw.Spec.IPFamilies = []extensionsv1alpha1.IPFamily{extensionsv1alpha1.IPFamilyIPv4}
		}
	})
}

// oscKey names the operating system configs of a worker pool. It changes with what the node configuration depends
// on (Kubernetes version, CRI, machine image), so that a change rolls the pool, as Gardener's key does.
func (op *operation) oscKey(w *corev1beta1.Worker) string {
	version := op.shoot.GetSpec().GetKubernetes().GetVersion()
	if v := w.GetKubernetes().GetVersion(); v != "" {
		version = v
	}
	h := sha256.Sum256([]byte(strings.Join([]string{version, w.GetCri().GetName(), w.GetMachine().GetImage().GetName(), w.GetMachine().GetImage().GetVersion()}, "|")))
	return fmt.Sprintf("osc-%s-%s", w.GetName(), hex.EncodeToString(h[:])[:5])
}

// oscNames are the names of a pool's provision and reconcile configs.
func (op *operation) oscNames(w *corev1beta1.Worker) (provision, reconcile string) {
	k := op.oscKey(w)
	return k + "-init", k + "-original"
}

func (op *operation) kubernetesVersion(w *corev1beta1.Worker) string {
	if v := w.GetKubernetes().GetVersion(); v != "" {
		return v
	}
	return op.shoot.GetSpec().GetKubernetes().GetVersion()
}

// oscSpec fills an OperatingSystemConfig of a pool: the kubelet unit and its configuration, which a node's agent
// (or the OS extension, for provision) turns into the machine's configuration.
// A provision config also carries the bootstrap token's placeholder and, when the agent runs the control plane, the
// kubelet's bootstrap kubeconfig (bootstrap).
// The kubelet's configuration names the shoot's cluster DNS (dnsIP: the kube-dns Service, systemcomponents.go) and
// domain, and registers the Node with Gardener's critical-components taint (nodegate.go), as Gardener's does.
func (op *operation) oscSpec(osc *extensionsv1alpha1.OperatingSystemConfig, w *corev1beta1.Worker, purpose extensionsv1alpha1.OperatingSystemConfigPurpose, bootstrap, dnsIP string) {
	osc.Spec.Type = w.GetMachine().GetImage().GetName()
	osc.Spec.ProviderConfig = rawExt(w.GetMachine().GetImage().GetProviderConfig())
	osc.Spec.Purpose = purpose
	enable := true
	start := extensionsv1alpha1.UnitCommand("start")
	kubelet := fmt.Sprintf("[Unit]\nDescription=kubelet daemon\n[Service]\nExecStart=/opt/bin/kubelet --config=/var/lib/kubelet/config/kubelet --node-labels=%s=%s\nRestart=always\n[Install]\nWantedBy=multi-user.target\n", labelWorkerPool, w.GetName())
	osc.Spec.Units = []extensionsv1alpha1.Unit{{Name: "kubelet.service", Command: &start, Enable: &enable, Content: &kubelet}}
	perm := int32(0o600)
	config := fmt.Sprintf("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n# Kubernetes %s, pool %s\nclusterDNS: [%s]\nclusterDomain: %s\n"+
		"registerWithTaints:\n- {key: %s, effect: %s}\n",
		op.kubernetesVersion(w), w.GetName(), dnsIP, clusterDomain, TaintCriticalComponentsNotReady, corev1.TaintEffectNoSchedule)
	osc.Spec.Files = []extensionsv1alpha1.File{{Path: extensionsv1alpha1.KubeletConfigPath, Permissions: &perm,
		Content: extensionsv1alpha1.FileContent{Inline: &extensionsv1alpha1.FileContentInline{Encoding: "", Data: config}}}}
	if purpose == extensionsv1alpha1.OperatingSystemConfigPurposeProvision {
		unencoded := true
		osc.Spec.Files = append(osc.Spec.Files, extensionsv1alpha1.File{Path: "/var/lib/gardener-node-agent/credentials/bootstrap-token", Permissions: &perm,
			Content: extensionsv1alpha1.FileContent{Inline: &extensionsv1alpha1.FileContentInline{Data: extensionsv1alpha1.BootstrapTokenPlaceholder}, TransmitUnencoded: &unencoded}})
		if bootstrap != "" {
			// Unencoded too: the Worker extension replaces the token's placeholder in the whole user data.
			osc.Spec.Files = append(osc.Spec.Files, extensionsv1alpha1.File{Path: extensionsv1alpha1.KubeletBootstrapKubeconfigPath, Permissions: &perm,
				Content: extensionsv1alpha1.FileContent{Inline: &extensionsv1alpha1.FileContentInline{Data: bootstrap}, TransmitUnencoded: &unencoded}})
		}
	}
	if name := w.GetCri().GetName(); name != "" {
		osc.Spec.CRIConfig = &extensionsv1alpha1.CRIConfig{Name: extensionsv1alpha1.CRIName(name)}
	} else {
		osc.Spec.CRIConfig = &extensionsv1alpha1.CRIConfig{Name: extensionsv1alpha1.CRIName("containerd")}
	}
}

func (op *operation) deployOperatingSystemConfigs(ctx context.Context) error {
	dns, err := op.serviceIP(clusterDNSIndex)
	if err != nil {
		return err
	}
	var bootstrap string
	if op.controlPlane {
		if bootstrap, err = op.bootstrapKubeconfig(ctx); err != nil {
			return err
		}
	}
	for _, w := range op.shoot.GetSpec().GetProvider().GetWorkers() {
		provision, reconcile := op.oscNames(w)
		for _, p := range []struct {
			name    string
			purpose extensionsv1alpha1.OperatingSystemConfigPurpose
		}{{provision, extensionsv1alpha1.OperatingSystemConfigPurposeProvision}, {reconcile, extensionsv1alpha1.OperatingSystemConfigPurposeReconcile}} {
			osc := &extensionsv1alpha1.OperatingSystemConfig{ObjectMeta: op.objectMeta(p.name)}
			if err := op.deployOrRestore(ctx, osc, func() {
				if osc.Labels == nil {
					osc.Labels = map[string]string{}
				}
				osc.Labels[labelWorkerPool] = w.GetName()
				bs := ""
				if p.purpose == extensionsv1alpha1.OperatingSystemConfigPurposeProvision {
					bs = bootstrap
				}
				op.oscSpec(osc, w, p.purpose, bs, dns.String())
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (op *operation) deployWorker(ctx context.Context) error {
	status, err := op.infrastructureStatus(ctx)
	if err != nil {
		return err
	}
	type poolData struct{ userData string }
	data := map[string]poolData{}
	for _, w := range op.shoot.GetSpec().GetProvider().GetWorkers() {
		provision, _ := op.oscNames(w)
		osc := &extensionsv1alpha1.OperatingSystemConfig{}
		if err := op.c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: provision}, osc); err != nil {
			return fmt.Errorf("read the provision OperatingSystemConfig of pool %s: %w", w.GetName(), err)
		}
		if osc.Status.CloudConfig == nil {
			return fmt.Errorf("OperatingSystemConfig %s has no cloud config secret yet", provision)
		}
		data[w.GetName()] = poolData{userData: osc.Status.CloudConfig.SecretRef.Name}
	}
	worker := &extensionsv1alpha1.Worker{ObjectMeta: op.objectMeta(op.shoot.GetMetadata().GetName())}
	return op.deployOrRestore(ctx, worker, func() {
		worker.Spec.Type = op.shoot.GetSpec().GetProvider().GetType()
		worker.Spec.Region = op.shoot.GetSpec().GetRegion()
		worker.Spec.SecretRef = op.secretRef()
		worker.Spec.InfrastructureProviderStatus = status
		worker.Spec.Pools = nil
		for _, w := range op.shoot.GetSpec().GetProvider().GetWorkers() {
			_, reconcile := op.oscNames(w)
			labels := map[string]string{labelWorkerPool: w.GetName()}
			for k, v := range w.GetLabels() {
				labels[k] = v
			}
			version := op.kubernetesVersion(w)
			pool := extensionsv1alpha1.WorkerPool{
				Name:                w.GetName(),
				Minimum:             w.GetMinimum(),
				Maximum:             w.GetMaximum(),
				MaxSurge:            intOrString(w.GetMaxSurge(), intstr.FromInt32(1)),
				MaxUnavailable:      intOrString(w.GetMaxUnavailable(), intstr.FromInt32(0)),
				MachineType:         w.GetMachine().GetType(),
				MachineImage:        extensionsv1alpha1.MachineImage{Name: w.GetMachine().GetImage().GetName(), Version: w.GetMachine().GetImage().GetVersion()},
				UserDataSecretRef:   corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: data[w.GetName()].userData}, Key: "cloud_config"},
				NodeAgentSecretName: &reconcile,
				Labels:              labels,
				Annotations:         w.GetAnnotations(),
				Zones:               w.GetZones(),
				ProviderConfig:      rawExt(w.GetProviderConfig()),
				KubernetesVersion:   &version,
				Priority:            w.Priority,
				Architecture:        w.GetMachine().Architecture,
			}
			for _, t := range w.GetTaints() {
				pool.Taints = append(pool.Taints, corev1.Taint{Key: t.GetKey(), Value: t.GetValue(), Effect: corev1.TaintEffect(t.GetEffect())})
			}
			if v := w.GetVolume(); v != nil {
				pool.Volume = &extensionsv1alpha1.Volume{Name: v.Name, Type: v.Type, Size: v.GetSize(), Encrypted: v.Encrypted}
			}
			worker.Spec.Pools = append(worker.Spec.Pools, pool)
		}
	})
}

func (op *operation) deployContainerRuntimes(ctx context.Context) error {
	for _, w := range op.shoot.GetSpec().GetProvider().GetWorkers() {
		for _, rt := range w.GetCri().GetContainerRuntimes() {
			cr := &extensionsv1alpha1.ContainerRuntime{ObjectMeta: op.objectMeta(rt.GetType() + "-" + w.GetName())}
			if err := op.deployOrRestore(ctx, cr, func() {
				cr.Spec.Type = rt.GetType()
				cr.Spec.ProviderConfig = rawExt(rt.GetProviderConfig())
				cr.Spec.BinaryPath = containerRuntimeBinPath
				cr.Spec.WorkerPool = extensionsv1alpha1.ContainerRuntimeWorkerPool{Name: w.GetName(),
					Selector: kmetav1.LabelSelector{MatchLabels: map[string]string{labelWorkerPool: w.GetName()}}}
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// wantedExtension is an Extension object the shoot needs, with its lifecycle.
type wantedExtension struct {
	typ            string
	providerConfig *metav1.RawExtension
	reconcile      string        // lifecycle.reconcile
	delete         string        // lifecycle.delete
	migrate        string        // lifecycle.migrate
	timeout        time.Duration // reconcileTimeout
}

// defaultExtensionTimeout bounds the wait for an Extension object without a registered reconcileTimeout, as
// Gardener's default for the Extension kind.
const defaultExtensionTimeout = 3 * time.Minute

// wantedExtensions are the Extension objects of the shoot: the types it lists (not disabled) and those registered to
// be enabled for every shoot (autoEnable: shoot), with lifecycles from their ControllerRegistrations and Gardener's
// defaults (reconcile AfterKubeAPIServer, delete and migrate BeforeKubeAPIServer).
func (op *operation) wantedExtensions() []wantedExtension {
	lifecycles := map[string]*corev1beta1.ControllerResourceLifecycle{}
	timeouts := map[string]time.Duration{}
	auto := map[string]bool{}
	for _, r := range op.registrations {
		for _, res := range r.GetSpec().GetResources() {
			if res.GetKind() != "Extension" {
				continue
			}
			lifecycles[res.GetType()] = res.GetLifecycle()
			if d, err := time.ParseDuration(res.GetReconcileTimeout()); err == nil && d > 0 {
				timeouts[res.GetType()] = d
			}
			if slices.Contains(res.GetAutoEnable(), "shoot") {
				auto[res.GetType()] = true
			}
		}
	}
	listed := map[string]*corev1beta1.Extension{}
	for _, e := range op.shoot.GetSpec().GetExtensions() {
		listed[e.GetType()] = e
	}
	var types []string
	for t, e := range listed {
		if !e.GetDisabled() {
			types = append(types, t)
		}
	}
	for t := range auto {
		if e, ok := listed[t]; !ok || !e.GetDisabled() {
			if !ok {
				types = append(types, t)
			}
		}
	}
	slices.Sort(types)
	out := make([]wantedExtension, 0, len(types))
	for _, t := range types {
		lc := lifecycles[t]
		w := wantedExtension{typ: t, timeout: defaultExtensionTimeout,
			reconcile: cmpOr(lc.GetReconcile(), extensionsv1alpha1.AfterKubeAPIServer),
			delete:    cmpOr(lc.GetDelete(), extensionsv1alpha1.BeforeKubeAPIServer),
			migrate:   cmpOr(lc.GetMigrate(), extensionsv1alpha1.BeforeKubeAPIServer),
		}
		if d, ok := timeouts[t]; ok {
			w.timeout = d
		}
		if e := listed[t]; e != nil {
			w.providerConfig = e.GetProviderConfig()
		}
		out = append(out, w)
	}
	return out
}

// extensionsFn deploys and waits for the Extension objects reconciled at the given lifecycle point.
func (op *operation) extensionsFn(point string) flow.TaskFn {
	return func(ctx context.Context) error {
		for _, w := range op.wantedExtensions() {
			if w.reconcile != point {
				continue
			}
			ext := &extensionsv1alpha1.Extension{ObjectMeta: op.objectMeta(w.typ)}
			// Each Extension gets its registration's reconcileTimeout (default 3m), within the task's own timeout.
			wctx, cancel := context.WithTimeout(ctx, w.timeout)
			err := op.deployOrRestore(wctx, ext, func() {
				ext.Spec.Type = w.typ
				ext.Spec.ProviderConfig = rawExt(w.providerConfig)
			})
			cancel()
			if err != nil {
				return fmt.Errorf("extension %s (reconcileTimeout %s): %w", w.typ, w.timeout, err)
			}
		}
		return nil
	}
}

// deleteStaleExtensions deletes the OperatingSystemConfigs, ContainerRuntimes and Extensions of the namespace that
// the shoot no longer needs (a removed pool, a changed OSC key, a removed runtime or extension).
func (op *operation) deleteStaleExtensions(ctx context.Context) error {
	wanted := map[string]bool{}
	for _, w := range op.shoot.GetSpec().GetProvider().GetWorkers() {
		p, r := op.oscNames(w)
		wanted["OperatingSystemConfig/"+p], wanted["OperatingSystemConfig/"+r] = true, true
		for _, rt := range w.GetCri().GetContainerRuntimes() {
			wanted["ContainerRuntime/"+rt.GetType()+"-"+w.GetName()] = true
		}
	}
	for _, e := range op.wantedExtensions() {
		wanted["Extension/"+e.typ] = true
	}
	var stale []extensionsv1alpha1.Object
	oscs := &extensionsv1alpha1.OperatingSystemConfigList{}
	crs := &extensionsv1alpha1.ContainerRuntimeList{}
	exts := &extensionsv1alpha1.ExtensionList{}
	for _, l := range []client.ObjectList{oscs, crs, exts} {
		if err := op.c.cfg.Seed.List(ctx, l, client.InNamespace(op.ns)); err != nil {
			return fmt.Errorf("list extension objects: %w", err)
		}
	}
	for i := range oscs.Items {
		if !wanted["OperatingSystemConfig/"+oscs.Items[i].Name] {
			stale = append(stale, &oscs.Items[i])
		}
	}
	for i := range crs.Items {
		if !wanted["ContainerRuntime/"+crs.Items[i].Name] {
			stale = append(stale, &crs.Items[i])
		}
	}
	for i := range exts.Items {
		if !wanted["Extension/"+exts.Items[i].Name] {
			stale = append(stale, &exts.Items[i])
		}
	}
	for _, o := range stale {
		op.log.Info("deleting stale extension object", "object", extension.Describe(o))
		if err := op.ext.DestroyAndWait(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// restoreState writes the state the ShootState holds for obj into its status (wait-for-state keeps the extension
// away meanwhile).
func (op *operation) restoreState(ctx context.Context, obj extensionsv1alpha1.Object) error {
	kind := extension.KindOf(obj)
	for _, e := range op.state.GetSpec().GetExtensions() {
		if e.GetKind() != kind || e.GetName() != obj.GetName() {
			continue
		}
		st := obj.GetExtensionStatus()
		if raw := e.GetState().GetRaw(); len(raw) > 0 {
			st.State = &runtime.RawExtension{Raw: raw}
		}
		st.Resources = nil
		for _, r := range e.GetResources() {
			st.Resources = append(st.Resources, extensionsv1alpha1.NamedResourceReference{Name: r.GetName(),
				ResourceRef: extensionsv1alpha1.CrossVersionObjectReference{Kind: r.GetResourceRef().GetKind(), Name: r.GetResourceRef().GetName(), APIVersion: r.GetResourceRef().GetApiVersion()}})
		}
		if err := op.c.cfg.Seed.Status().Update(ctx, obj); err != nil {
			return fmt.Errorf("restore the state of %s: %w", extension.Describe(obj), err)
		}
		return nil
	}
	return nil
}

func rawExt(r *metav1.RawExtension) *runtime.RawExtension { return extension.RawExtension(r) }

func intOrString(v *metav1.IntOrString, def intstr.IntOrString) intstr.IntOrString {
	if v == nil {
		return def
	}
	if v.GetStrVal() != "" {
		return intstr.FromString(v.GetStrVal())
	}
	return intstr.FromInt32(int32(v.GetIntVal()))
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// isNotFound is apierrors.IsNotFound, for the flows' readability.
func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
