package shoot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	discoveryv1ac "k8s.io/client-go/applyconfigurations/discovery/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/trellis-dev/trellis/agent/shoot/imagevector"
)

// The system components the agent deploys into a shoot with workers, as gardenlet deploys them (its ManagedResources
// shoot-core-kube-proxy-<pool> and shoot-core-coredns): kube-proxy per worker pool and CoreDNS behind kube-dns.
const (
	taskKubeProxy = "Deploying kube-proxy system component"
	taskCoreDNS   = "Deploying CoreDNS system component"

	// fieldManagerAgent owns what the agent applies into a shoot (server-side apply, forced).
	fieldManagerAgent = "trellis-agent"

	kubeProxy            = "kube-proxy"
	kubeProxyConfig      = "kube-proxy-config"
	portKubeProxyHealthz = 10256
	portKubeProxyMetrics = 10249
	coreDNS              = "coredns"
	coreDNSCustom        = "coredns-custom"
	serviceKubeDNS       = "kube-dns"
	portCoreDNS          = 8053
	portCoreDNSMetrics   = 9153
	portCoreDNSHealth    = 8080
	portCoreDNSReady     = 8181
	clusterDomain        = "cluster.local"
	// clusterDNSIndex is the address of the cluster DNS in the shoot's service network (Gardener: the 10th), and
	// apiServiceIndex that of the Service default/kubernetes (the first).
	clusterDNSIndex = 10
	apiServiceIndex = 1
	// serviceAccountDir is where a pod's service account token and the cluster's CA bundle are mounted.
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// corefile is CoreDNS's configuration, Gardener's default: the cluster's names, the upstream of the node's
// resolv.conf, and the server blocks and overrides of ConfigMap coredns-custom.
const corefile = `.:8053 {
  errors
  log . {
    class error
  }
  health {
    lameduck 15s
  }
  ready
  kubernetes ` + clusterDomain + ` in-addr.arpa ip6.arpa {
    pods insecure
    fallthrough in-addr.arpa ip6.arpa
    ttl 30
  }
  prometheus :9153
  forward . /etc/resolv.conf
  cache 30
  loop
  reload
  loadbalance round_robin
  import custom/*.override
}
import custom/*.server
`

// applyOptions are the options of every apply into the shoot.
var applyOptions = kmetav1.ApplyOptions{FieldManager: fieldManagerAgent, Force: true}

// systemLabels mark an object as a system component Gardener manages (origin=gardener,
// gardener.cloud/role=system-component).
var systemLabels = map[string]string{"origin": "gardener", labelRole: "system-component"}

func mergeLabels(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// serviceIP returns the n-th address of the shoot's service network.
func (op *operation) serviceIP(n int) (netip.Addr, error) {
	cidr := cmpOr(op.shoot.GetSpec().GetNetworking().GetServices(), defaultServicesCIDR)
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("the shoot's service network %q: %w", cidr, err)
	}
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	if !p.Contains(a) {
		return netip.Addr{}, fmt.Errorf("the shoot's service network %s has no address number %d", cidr, n)
	}
	return a, nil
}

// kubeProxyKubeconfig is kube-proxy's kubeconfig: the shoot's kube-apiserver at the address the kubelets use (kube-proxy
// cannot use the Service it programs), its service account's token and the cluster CA bundle, both mounted by the
// kubelet.
func kubeProxyKubeconfig(server string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: shoot
  cluster:
    server: %s
    certificate-authority: %s/ca.crt
users:
- name: kube-proxy
  user:
    tokenFile: %s/token
contexts:
- name: shoot
  context: {cluster: shoot, user: kube-proxy}
current-context: shoot
`, server, serviceAccountDir, serviceAccountDir)
}

// kubeProxyComponentConfig is kube-proxy's configuration: iptables mode with the shoot's pod network as the cluster
// CIDR, as Gardener's. Unlike Gardener's it leaves machine-wide settings alone (conntrack table size and timeouts,
// route_localnet for localhost NodePorts): a local machine is a network namespace of a shared host.
func kubeProxyComponentConfig(podCIDR string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: /var/lib/kube-proxy-kubeconfig/kubeconfig}
mode: iptables
clusterCIDR: %s
metricsBindAddress: 0.0.0.0:%d
healthzBindAddress: 0.0.0.0:%d
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
`, podCIDR, portKubeProxyMetrics, portKubeProxyHealthz)
}

// deployKubeProxy applies kube-proxy into the shoot: its ServiceAccount bound to system:node-proxier, its kubeconfig
// Secret and configuration ConfigMap, the headless metrics Service and a DaemonSet kube-proxy-<pool> per worker pool
// (host network, privileged, the pool's Kubernetes version's image), as gardenlet's kube-proxy component; DaemonSets
// of pools no longer in the spec are deleted. It also writes the endpoints of Service default/kubernetes (the
// kube-apiserver runs with --endpoint-reconciler-type=none): the address the kubelets use.
func (op *operation) deployKubeProxy(ctx context.Context) error {
	return op.inShoot(ctx, func(cs clientset) error { return op.applyKubeProxy(ctx, cs) })
}

// inShoot runs fn with a clientset of the shoot (shootClientset), closing its connections after.
func (op *operation) inShoot(ctx context.Context, fn func(clientset) error) error {
	cs, closeIdle, err := op.shootClientset(ctx)
	if err != nil {
		return err
	}
	defer closeIdle()
	return fn(cs)
}

func (op *operation) applyKubeProxy(ctx context.Context, cs clientset) error {
	addr, err := op.apiServerAddress(ctx)
	if err != nil {
		return err
	}
	if err := applyAPIServerEndpoints(ctx, cs, addr); err != nil {
		return err
	}
	server := "https://" + net.JoinHostPort(addr, strconv.Itoa(portKubeAPIServer))
	kubeconfig := kubeProxyKubeconfig(server)
	config := kubeProxyComponentConfig(cmpOr(op.shoot.GetSpec().GetNetworking().GetPods(), defaultPodsCIDR))
	sys := kmetav1.NamespaceSystem
	labels := map[string]string{"app": "kubernetes", "role": "proxy"}
	apply := []func() error{
		func() error {
			return applyServiceAccount(ctx, cs, kubeProxy, "gardener.cloud:target:node-proxier", "system:node-proxier")
		},
		func() error {
			_, err := cs.CoreV1().Secrets(sys).Apply(ctx, corev1ac.Secret(kubeProxy, sys).WithLabels(mergeLabels(labels, systemLabels)).
				WithType(corev1.SecretTypeOpaque).WithStringData(map[string]string{"kubeconfig": kubeconfig}), applyOptions)
			return err
		},
		func() error {
			_, err := cs.CoreV1().ConfigMaps(sys).Apply(ctx, corev1ac.ConfigMap(kubeProxyConfig, sys).WithLabels(mergeLabels(labels, systemLabels)).
				WithData(map[string]string{"config.yaml": config}), applyOptions)
			return err
		},
		func() error {
			_, err := cs.CoreV1().Services(sys).Apply(ctx, corev1ac.Service(kubeProxy, sys).WithLabels(labels).WithSpec(corev1ac.ServiceSpec().
				WithClusterIP(corev1.ClusterIPNone).WithSelector(labels).
				WithPorts(corev1ac.ServicePort().WithName("metrics").WithPort(portKubeProxyMetrics).WithProtocol(corev1.ProtocolTCP))), applyOptions)
			return err
		},
	}
	for _, f := range apply {
		if err := f(); err != nil {
			return fmt.Errorf("shoot: apply kube-proxy: %w", err)
		}
	}
	checksum := sha256.Sum256([]byte(kubeconfig + "\x00" + config))
	pools := map[string]bool{}
	for _, w := range op.shoot.GetSpec().GetProvider().GetWorkers() {
		pools[w.GetName()] = true
		img, err := op.imageFor(imagevector.KubeProxy, op.kubernetesVersion(w))
		if err != nil {
			return err
		}
		ds := kubeProxyDaemonSet(w.GetName(), img, hex.EncodeToString(checksum[:8]), labels)
		if _, err := cs.AppsV1().DaemonSets(sys).Apply(ctx, ds, applyOptions); err != nil {
			return fmt.Errorf("shoot: apply DaemonSet %s: %w", *ds.Name, err)
		}
	}
	list, err := cs.AppsV1().DaemonSets(sys).List(ctx, kmetav1.ListOptions{LabelSelector: "app=kubernetes,role=proxy"})
	if err != nil {
		return fmt.Errorf("shoot: list kube-proxy DaemonSets: %w", err)
	}
	for _, ds := range list.Items {
		if !pools[ds.Labels["pool"]] {
			if err := cs.AppsV1().DaemonSets(sys).Delete(ctx, ds.Name, kmetav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("shoot: delete DaemonSet %s of a removed pool: %w", ds.Name, err)
			}
		}
	}
	return nil
}

// applyServiceAccount applies the ServiceAccount kube-system/<name> and the ClusterRoleBinding binding of it to the
// ClusterRole role.
func applyServiceAccount(ctx context.Context, cs clientset, name, binding, role string) error {
	sys := kmetav1.NamespaceSystem
	if _, err := cs.CoreV1().ServiceAccounts(sys).Apply(ctx, corev1ac.ServiceAccount(name, sys).WithLabels(systemLabels), applyOptions); err != nil {
		return err
	}
	_, err := cs.RbacV1().ClusterRoleBindings().Apply(ctx, rbacv1ac.ClusterRoleBinding(binding).WithLabels(systemLabels).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(role)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(name).WithNamespace(sys)), applyOptions)
	return err
}

// kubeProxyDaemonSetName is the name of the kube-proxy DaemonSet of a worker pool.
func kubeProxyDaemonSetName(pool string) string { return kubeProxy + "-" + pool }

// kubeProxyDaemonSet is the kube-proxy DaemonSet of a worker pool; checksum of its configuration rolls its pods when
// the configuration changes.
func kubeProxyDaemonSet(pool, image, checksum string, labels map[string]string) *appsv1ac.DaemonSetApplyConfiguration {
	poolLabels := mergeLabels(labels, map[string]string{"pool": pool})
	privileged := true
	return appsv1ac.DaemonSet(kubeProxyDaemonSetName(pool), kmetav1.NamespaceSystem).
		WithLabels(mergeLabels(poolLabels, systemLabels, map[string]string{labelCriticalComponent: "true"})).
		WithSpec(appsv1ac.DaemonSetSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(poolLabels)).
			WithRevisionHistoryLimit(2).
			WithUpdateStrategy(appsv1ac.DaemonSetUpdateStrategy().WithType("RollingUpdate")).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(mergeLabels(poolLabels, systemLabels, map[string]string{labelCriticalComponent: "true"})).
				WithAnnotations(map[string]string{"checksum/config": checksum}).
				WithSpec(corev1ac.PodSpec().
					WithNodeSelector(map[string]string{labelWorkerPool: pool}).
					WithPriorityClassName("system-node-critical").
					WithHostNetwork(true).
					WithServiceAccountName(kubeProxy).
					WithTolerations(
						corev1ac.Toleration().WithEffect(corev1.TaintEffectNoSchedule).WithOperator(corev1.TolerationOpExists),
						corev1ac.Toleration().WithEffect(corev1.TaintEffectNoExecute).WithOperator(corev1.TolerationOpExists)).
					WithContainers(corev1ac.Container().
						WithName(kubeProxy).
						WithImage(image).
						WithImagePullPolicy(corev1.PullIfNotPresent).
						WithCommand("/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy-config/config.yaml", "--hostname-override=$(NODE_NAME)").
						WithEnv(corev1ac.EnvVar().WithName("NODE_NAME").WithValueFrom(corev1ac.EnvVarSource().
							WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath("spec.nodeName"))),
							// kube-proxy runs iptables from PATH, which an image without environment does not set.
							corev1ac.EnvVar().WithName("PATH").WithValue("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")).
						WithSecurityContext(corev1ac.SecurityContext().WithPrivileged(privileged)).
						WithPorts(corev1ac.ContainerPort().WithName("metrics").WithContainerPort(portKubeProxyMetrics).WithProtocol(corev1.ProtocolTCP)).
						WithReadinessProbe(systemReadiness().WithHTTPGet(corev1ac.HTTPGetAction().
							WithPath("/healthz").WithPort(intstr.FromInt32(portKubeProxyHealthz)))).
						WithLivenessProbe(corev1ac.Probe().WithInitialDelaySeconds(15).WithTimeoutSeconds(probeTimeoutSeconds).WithHTTPGet(corev1ac.HTTPGetAction().
							WithPath("/livez").WithPort(intstr.FromInt32(portKubeProxyHealthz)))).
						WithResources(corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")})).
						// No host paths (Gardener mounts /lib/modules and /run/xtables.lock): iptables-nft takes no
						// xtables lock, kube-proxy loads no kernel modules (its image has no modprobe; the node loads
						// them), and a local machine's host paths are the shared host's.
						WithVolumeMounts(
							corev1ac.VolumeMount().WithName("kubeconfig").WithMountPath("/var/lib/kube-proxy-kubeconfig").WithReadOnly(true),
							corev1ac.VolumeMount().WithName("config").WithMountPath("/var/lib/kube-proxy-config").WithReadOnly(true))).
					WithVolumes(
						corev1ac.Volume().WithName("kubeconfig").WithSecret(corev1ac.SecretVolumeSource().WithSecretName(kubeProxy)),
						corev1ac.Volume().WithName("config").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(kubeProxyConfig))))))
}

// applyAPIServerEndpoints writes the EndpointSlice of Service default/kubernetes (what kube-proxy and CoreDNS read):
// the kube-apiserver at addr:443, as the kube-apiserver's own endpoint reconciler would. The deprecated Endpoints
// object is not written.
func applyAPIServerEndpoints(ctx context.Context, cs clientset, addr string) error {
	const name = "kubernetes"
	ns := kmetav1.NamespaceDefault
	family := discoveryv1.AddressTypeIPv4
	if ip := net.ParseIP(addr); ip != nil && ip.To4() == nil {
		family = discoveryv1.AddressTypeIPv6
	}
	slice := discoveryv1ac.EndpointSlice(name, ns).
		WithLabels(map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: fieldManagerAgent}).
		WithAddressType(family).
		WithEndpoints(discoveryv1ac.Endpoint().WithAddresses(addr).WithConditions(discoveryv1ac.EndpointConditions().WithReady(true))).
		WithPorts(discoveryv1ac.EndpointPort().WithName("https").WithPort(portKubeAPIServer).WithProtocol(corev1.ProtocolTCP))
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Apply(ctx, slice, applyOptions); err != nil {
		return fmt.Errorf("shoot: apply the EndpointSlice of Service default/kubernetes: %w", err)
	}
	return nil
}

// deployCoreDNS applies CoreDNS into the shoot as gardenlet's coredns component: its ServiceAccount and RBAC, the
// Corefile (Gardener's default, with the optional ConfigMap coredns-custom for extra server blocks and overrides),
// the Deployment coredns (two replicas spread over nodes, listening on 8053 as non-root) and Service kube-dns at
// the cluster DNS address (the 10th of the service network, the kubelets' clusterDNS).
func (op *operation) deployCoreDNS(ctx context.Context) error {
	return op.inShoot(ctx, func(cs clientset) error { return op.applyCoreDNS(ctx, cs) })
}

func (op *operation) applyCoreDNS(ctx context.Context, cs clientset) error {
	dns, err := op.serviceIP(clusterDNSIndex)
	if err != nil {
		return err
	}
	img, err := op.image(imagevector.CoreDNS)
	if err != nil {
		return err
	}
	sys := kmetav1.NamespaceSystem
	selector := map[string]string{"k8s-app": serviceKubeDNS}
	labels := mergeLabels(selector, systemLabels)
	checksum := sha256.Sum256([]byte(corefile))
	read := []string{"list", "watch"}
	apply := []func() error{
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Apply(ctx, rbacv1ac.ClusterRole("system:coredns").WithLabels(systemLabels).WithRules(
				rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("endpoints", "services", "pods", "namespaces").WithVerbs(read...),
				rbacv1ac.PolicyRule().WithAPIGroups(discoveryv1.GroupName).WithResources("endpointslices").WithVerbs(read...)), applyOptions)
			return err
		},
		func() error { return applyServiceAccount(ctx, cs, coreDNS, "system:coredns", "system:coredns") },
		func() error {
			_, err := cs.CoreV1().ConfigMaps(sys).Apply(ctx, corev1ac.ConfigMap(coreDNS, sys).WithLabels(labels).
				WithData(map[string]string{"Corefile": corefile}), applyOptions)
			return err
		},
		func() error {
			_, err := cs.AppsV1().Deployments(sys).Apply(ctx, coreDNSDeployment(img, hex.EncodeToString(checksum[:8]), selector, labels), applyOptions)
			return err
		},
		func() error {
			_, err := cs.CoreV1().Services(sys).Apply(ctx, corev1ac.Service(serviceKubeDNS, sys).
				WithLabels(mergeLabels(labels, map[string]string{"kubernetes.io/name": "CoreDNS"})).
				WithSpec(corev1ac.ServiceSpec().WithSelector(selector).WithClusterIP(dns.String()).WithPorts(
					corev1ac.ServicePort().WithName("dns").WithPort(53).WithTargetPort(intstr.FromInt32(portCoreDNS)).WithProtocol(corev1.ProtocolUDP),
					corev1ac.ServicePort().WithName("dns-tcp").WithPort(53).WithTargetPort(intstr.FromInt32(portCoreDNS)).WithProtocol(corev1.ProtocolTCP),
					corev1ac.ServicePort().WithName("metrics").WithPort(portCoreDNSMetrics).WithProtocol(corev1.ProtocolTCP))), applyOptions)
			return err
		},
	}
	for _, f := range apply {
		if err := f(); err != nil {
			return fmt.Errorf("shoot: apply CoreDNS: %w", err)
		}
	}
	return nil
}

// systemReadiness is the readiness probe of the shoot's kube-proxy and CoreDNS: tried every 2 s, each try allowed
// probeTimeoutSeconds as the control plane's are, out of its Service only after 30 s of failures (15 × 2 s): a loaded
// node answers slowly, and a DNS without endpoints fails every name the shoot's pods look up.
func systemReadiness() *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().WithPeriodSeconds(2).WithTimeoutSeconds(probeTimeoutSeconds).WithFailureThreshold(15)
}

// coreDNSDeployment is CoreDNS's Deployment.
func coreDNSDeployment(image, checksum string, selector, labels map[string]string) *appsv1ac.DeploymentApplyConfiguration {
	optional := true
	return appsv1ac.Deployment(coreDNS, kmetav1.NamespaceSystem).WithLabels(labels).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(2).
			WithRevisionHistoryLimit(2).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector)).
			WithStrategy(appsv1ac.DeploymentStrategy().WithType("RollingUpdate").WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
				WithMaxUnavailable(intstr.FromInt32(0)).WithMaxSurge(intstr.FromInt32(1)))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithAnnotations(map[string]string{"checksum/config": checksum}).
				WithSpec(corev1ac.PodSpec().
					WithServiceAccountName(coreDNS).
					WithPriorityClassName("system-cluster-critical").
					WithDNSPolicy(corev1.DNSDefault).
					WithSecurityContext(corev1ac.PodSecurityContext().WithRunAsNonRoot(true).WithRunAsUser(65532).WithRunAsGroup(65532).
						WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
					WithTolerations(corev1ac.Toleration().WithKey("CriticalAddonsOnly").WithOperator(corev1.TolerationOpExists)).
					WithTopologySpreadConstraints(corev1ac.TopologySpreadConstraint().WithMaxSkew(1).WithTopologyKey(corev1.LabelHostname).
						WithWhenUnsatisfiable(corev1.ScheduleAnyway).WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(selector))).
					WithContainers(corev1ac.Container().
						WithName(coreDNS).
						WithImage(image).
						WithImagePullPolicy(corev1.PullIfNotPresent).
						WithArgs("-conf", "/etc/coredns/Corefile").
						WithPorts(
							corev1ac.ContainerPort().WithName("dns-udp").WithContainerPort(portCoreDNS).WithProtocol(corev1.ProtocolUDP),
							corev1ac.ContainerPort().WithName("dns-tcp").WithContainerPort(portCoreDNS).WithProtocol(corev1.ProtocolTCP),
							corev1ac.ContainerPort().WithName("metrics").WithContainerPort(portCoreDNSMetrics).WithProtocol(corev1.ProtocolTCP)).
						WithReadinessProbe(systemReadiness().WithHTTPGet(corev1ac.HTTPGetAction().
							WithPath("/ready").WithPort(intstr.FromInt32(portCoreDNSReady)))).
						WithLivenessProbe(corev1ac.Probe().WithInitialDelaySeconds(60).WithTimeoutSeconds(probeTimeoutSeconds).WithHTTPGet(corev1ac.HTTPGetAction().
							WithPath("/health").WithPort(intstr.FromInt32(portCoreDNSHealth)))).
						WithResources(corev1ac.ResourceRequirements().
							WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("15Mi")}).
							WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1500Mi")})).
						WithSecurityContext(corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false).WithReadOnlyRootFilesystem(true).
							WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))).
						WithVolumeMounts(
							corev1ac.VolumeMount().WithName("config").WithMountPath("/etc/coredns").WithReadOnly(true),
							corev1ac.VolumeMount().WithName("custom").WithMountPath("/etc/coredns/custom").WithReadOnly(true))).
					WithVolumes(
						corev1ac.Volume().WithName("config").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(coreDNS).
							WithItems(corev1ac.KeyToPath().WithKey("Corefile").WithPath("Corefile"))),
						corev1ac.Volume().WithName("custom").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(coreDNSCustom).
							WithOptional(optional))))))
}
