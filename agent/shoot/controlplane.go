package shoot

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/agent/shoot/credentials"
	"github.com/trellis-dev/trellis/agent/shoot/imagevector"
)

// Names of the control plane's objects in the shoot's namespace, as Gardener names them.
const (
	etcdMain                = "etcd-main"
	serviceETCDClient       = "etcd-main-client"
	etcdEvents              = "etcd-events"
	serviceETCDEventsClient = "etcd-events-client"
	deployKubeAPIServer     = "kube-apiserver"
	deployKCM               = "kube-controller-manager"
	deployScheduler         = "kube-scheduler"
	configMapAuditPolicy    = "audit-policy-config"
	portKubeAPIServer       = 443
	portETCDClient          = 2379
	portETCDMetrics         = 2381
	etcdVolumeSize          = "10Gi"
	nonRootUser             = int64(65532)
	auditPolicyKey          = "policy"
	certKubeAPIServer       = "kube-apiserver"
	certETCDServer          = "etcd-server"
	certETCDClient          = "etcd-client"
	certKCM                 = "kube-controller-manager"
	certScheduler           = "kube-scheduler"
	certGardener            = "gardener"
	userKCM                 = "system:kube-controller-manager"
	userScheduler           = "system:kube-scheduler"
	userGardener            = "gardener"
	groupMasters            = "system:masters"
	kubeconfigKey           = "kubeconfig"
	defaultServiceIPRange   = defaultServicesCIDR
	// labelPurpose and purposeKubeconfig mark the components' kubeconfig secrets, as Gardener marks them.
	labelPurpose      = "gardener.cloud/purpose"
	purposeKubeconfig = "kubeconfig"
)

// Labels of the control plane's pods, as Gardener sets them.
var (
	labelsETCD          = map[string]string{"app": "etcd-statefulset", "instance": etcdMain, "name": "etcd", "role": "main"}
	labelsETCDEvents    = map[string]string{"app": "etcd-statefulset", "instance": etcdEvents, "name": "etcd", "role": "events"}
	labelsKubeAPIServer = map[string]string{"app": "kubernetes", "role": "apiserver"}
	labelsKCM           = map[string]string{"app": "kubernetes", "role": "controller-manager"}
	labelsScheduler     = map[string]string{"app": "kubernetes", "role": "scheduler"}
)

// Task names of the control plane, as Gardener's.
const (
	taskETCD            = "Deploying main and events etcd"
	taskWaitETCD        = "Waiting until main and event etcd report readiness"
	taskKubeAPIServer   = "Deploying Kubernetes API server"
	taskShootSystem     = "Deploying shoot system resources"
	taskKCM             = "Deploying Kubernetes controller manager"
	taskScheduler       = "Deploying Kubernetes scheduler"
	taskHibernateCP     = "Hibernating control plane"
	taskDestroyKAPI     = "Destroying Kubernetes API server, controller manager and scheduler"
	taskDestroyETCD     = "Destroying main and events etcd"
	taskDestroyCAClient = "Deleting the shoot's client CA in the project namespace"
)

// deploysControlPlane reports whether the agent runs the shoot's control plane in the seed: Deploy, or Auto on a
// seed with Nodes. StandIn, or Auto on a seed without Nodes (a seed that runs no pods), keeps only the Service.
func (c *Controller) deploysControlPlane(ctx context.Context) (bool, error) {
	switch c.cfg.ControlPlaneMode {
	case config.ControlPlaneDeploy:
		return true, nil
	case config.ControlPlaneStandIn:
		return false, nil
	}
	nodes := &corev1.NodeList{}
	if err := c.cfg.Seed.List(ctx, nodes, client.Limit(1)); err != nil {
		return false, fmt.Errorf("list the seed's nodes: %w", err)
	}
	return len(nodes.Items) > 0, nil
}

// image is the image of a control plane component for the shoot's Kubernetes version.
func (op *operation) image(component string) (string, error) {
	return op.imageFor(component, op.shoot.GetSpec().GetKubernetes().GetVersion())
}

// imageFor is the image of component for Kubernetes version (a worker pool's, which may differ from the shoot's).
func (op *operation) imageFor(component, version string) (string, error) {
	v := op.c.cfg.Images
	if v == nil {
		v = imagevector.Default()
	}
	return v.Image(component, version)
}

// tunnelName is the shoot's name on the hub's TLS-passthrough listener: api.<shoot>.<project>.<tunnel domain>.
func (op *operation) tunnelName() string {
	d := defaultTunnelDomain
	if op.c.cfg.TunnelDomain != nil {
		d = op.c.cfg.TunnelDomain()
	}
	return fmt.Sprintf("api.%s.%s.%s", op.shoot.GetMetadata().GetName(), op.project, d)
}

// defaultTunnelDomain is the hub's default tunnel domain (docs/tunnels.md).
const defaultTunnelDomain = "tunnel.trellis.local"

// credentialSet returns the credentials in use (generating nothing that exists), for the control plane's steps.
func (op *operation) credentialSet(ctx context.Context) (*credentials.Set, error) {
	return op.credentialsManager().Ensure(ctx, rotationWant(op.shoot))
}

// setReplicas sets the replicas of a workload the flow deploys: 1, unless the shoot is hibernated, where a new one
// starts with none and an existing one keeps its count (the hibernation step scales it down in order).
func setReplicas(cur **int32, exists, hibernated bool) {
	switch {
	case !hibernated:
		*cur = ptr(int32(1))
	case !exists:
		*cur = ptr(int32(0))
	}
}

func ptr[T any](v T) *T { return &v }

// secretVolume is a volume of a secret's keys.
func secretVolume(name, secret string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr(int32(0o640))}}}
}

// podSecurity runs a pod as the non-root user of the images, its files readable by its group.
func podSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{RunAsUser: ptr(nonRootUser), RunAsGroup: ptr(nonRootUser), FSGroup: ptr(nonRootUser), RunAsNonRoot: ptr(true)}
}

// startupProbe guards a control-plane container's start with its liveness check, as kubeadm does for the
// control plane's static pods: at least four minutes (240 tries a second apart, each allowed 15 s) before the liveness
// probe takes over; the readiness probe, too, waits for it (the kubelet runs it at once when the start is confirmed).
// Without it a kube-apiserver that needs longer than its liveness probe's budget to finish its post-start hooks (a
// loaded seed: etcd slow to answer, the CPU shared) is killed before it is up, starts its work again, and never comes
// up: a restart loop that loads the seed further.
func startupProbe(check corev1.ProbeHandler) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: check, PeriodSeconds: 1, TimeoutSeconds: probeTimeoutSeconds, FailureThreshold: 240}
}

// probeTimeoutSeconds is what every control-plane probe allows an answer, as Gardener's kube-apiserver and kubeadm's
// static pods do: a loaded seed answers /readyz or etcd's /health in seconds, not in the kubelet's default 1 s.
const probeTimeoutSeconds = 15

// readinessProbe takes a running control-plane container out of its Service only after half a minute of failed checks
// (Gardener's kube-apiserver: 3 × 10 s), each allowed 15 s, and back within 5 s of a passing one. A readiness probe
// that gives up within seconds (it was 3 × 1 s, etcd's answers allowed 1 s) cascades on a loaded seed: etcd's Service
// loses its endpoint, kube-apiserver's /readyz fails on etcd, and the shoot's API refuses connections for minutes.
func readinessProbe(check corev1.ProbeHandler) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: check, PeriodSeconds: 5, TimeoutSeconds: probeTimeoutSeconds, FailureThreshold: 6}
}

// livenessProbe restarts a control-plane container after a minute of failed checks (6 × 10 s), each allowed 15 s.
func livenessProbe(check corev1.ProbeHandler) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: check, PeriodSeconds: 10, TimeoutSeconds: probeTimeoutSeconds, FailureThreshold: 6}
}

// etcdMember is one of the shoot's etcds, as Gardener runs them: main (every object but events, backed up) and
// events (the events, kube-apiserver's --etcd-servers-overrides; not backed up, as in Gardener).
type etcdMember struct {
	// name is the StatefulSet's, its volume claim template's and its instance label's; service its client Service's.
	name, service string
	labels        map[string]string
	// backedUp runs the backup sidecar and the restore step beside it.
	backedUp bool
}

// etcdMembers are etcd-main and etcd-events.
var etcdMembers = []etcdMember{
	{name: etcdMain, service: serviceETCDClient, labels: labelsETCD, backedUp: true},
	{name: etcdEvents, service: serviceETCDEventsClient, labels: labelsETCDEvents},
}

// deployETCD deploys etcd-main and etcd-events: for each its client Service and a StatefulSet of one member with its
// data on a volume of the seed's default StorageClass, serving clients with TLS from the etcd CA (one server
// certificate for both); etcd-main with its backups (etcdbackup.go). waitETCD waits for them.
func (op *operation) deployETCD(ctx context.Context) error {
	set, err := op.credentialSet(ctx)
	if err != nil {
		return err
	}
	names := []string{"localhost"}
	for _, e := range etcdMembers {
		names = append(names, serviceNames(e.service, op.ns)...)
	}
	server, err := op.credentialsManager().Certificate(ctx, credentials.CertConfig{Name: certETCDServer, CA: credentials.ServerCA(set.CAETCD, set.CAETCDOld),
		CommonName: "etcd-server", DNSNames: names, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Client: true})
	if err != nil {
		return err
	}
	img, err := op.image(imagevector.ETCD)
	if err != nil {
		return err
	}
	backup, err := op.etcdBackup(ctx)
	if err != nil {
		return err
	}
	var backupImg string
	if backup != nil {
		if backupImg, err = op.etcdBackupImage(); err != nil {
			return err
		}
	}
	for _, e := range etcdMembers {
		b := backup
		if !e.backedUp {
			b = nil
		}
		if err := op.deployETCDMember(ctx, e, set, server.Name, img, b, backupImg); err != nil {
			return err
		}
	}
	return nil
}

// deployETCDMember deploys one etcd's Service and StatefulSet, with the backup sidecar and restore step when backup
// is set.
func (op *operation) deployETCDMember(ctx context.Context, e etcdMember, set *credentials.Set, serverSecret, img string,
	backup *etcdBackupStore, backupImg string) error {
	health := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(portETCDMetrics)}}
	svcName := e.service
	selector := map[string]string{"instance": e.name, "name": "etcd"}
	svc := &corev1.Service{ObjectMeta: op.objectMeta(svcName)}
	if _, err := controllerutil.CreateOrUpdate(ctx, op.c.cfg.Seed, svc, func() error {
		svc.Labels = maps.Clone(e.labels)
		svc.Spec.Selector = selector
		svc.Spec.Ports = []corev1.ServicePort{{Name: "client", Port: portETCDClient, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(portETCDClient)}}
		if e.backedUp {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "backuprestore", Port: portBackupRestore, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromInt32(portBackupRestore)})
		}
		return nil
	}); err != nil {
		return fmt.Errorf("service %s/%s: %w", op.ns, svcName, err)
	}
	sts := &appsv1.StatefulSet{ObjectMeta: op.objectMeta(e.name)}
	_, err := controllerutil.CreateOrUpdate(ctx, op.c.cfg.Seed, sts, func() error {
		exists := !sts.CreationTimestamp.IsZero()
		sts.Labels = maps.Clone(e.labels)
		setReplicas(&sts.Spec.Replicas, exists, op.hibernated())
		if !exists { // immutable
			sts.Spec.Selector = &kmetav1.LabelSelector{MatchLabels: selector}
			sts.Spec.ServiceName = svcName
			sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
				ObjectMeta: kmetav1.ObjectMeta{Name: e.name},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(etcdVolumeSize)}}},
			}}
		}
		// The volume goes with the StatefulSet (the delete flow deletes it explicitly too).
		sts.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType}
		peer := "http://127.0.0.1:2380"
		sts.Spec.Template = corev1.PodTemplateSpec{
			ObjectMeta: kmetav1.ObjectMeta{Labels: maps.Clone(e.labels), Annotations: map[string]string{
				"checksum/ca-etcd-bundle": checksum(set.CAETCDBundle)}},
			Spec: corev1.PodSpec{
				SecurityContext:               podSecurity(),
				TerminationGracePeriodSeconds: ptr(int64(30)),
				AutomountServiceAccountToken:  ptr(false),
				Containers: []corev1.Container{{
					Name: "etcd", Image: img, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"/usr/local/bin/etcd",
						"--name=" + e.name + "-0",
						"--data-dir=" + etcdDataDir,
						fmt.Sprintf("--listen-client-urls=https://0.0.0.0:%d", portETCDClient),
						fmt.Sprintf("--advertise-client-urls=https://%s.%s.svc:%d", svcName, op.ns, portETCDClient),
						"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
						"--initial-cluster=" + e.name + "-0=" + peer, "--initial-cluster-state=new",
						fmt.Sprintf("--listen-metrics-urls=http://0.0.0.0:%d", portETCDMetrics),
						"--client-cert-auth=true",
						"--trusted-ca-file=/var/etcd/ssl/ca/" + credentials.DataKeyCertificateBundle,
						"--cert-file=/var/etcd/ssl/server/" + credentials.DataKeyCertificate,
						"--key-file=/var/etcd/ssl/server/" + credentials.DataKeyPrivateKey,
						"--quota-backend-bytes=8589934592",
						"--auto-compaction-mode=periodic", "--auto-compaction-retention=30m",
					},
					Ports:          []corev1.ContainerPort{{Name: "client", ContainerPort: portETCDClient}, {Name: "metrics", ContainerPort: portETCDMetrics}},
					ReadinessProbe: readinessProbe(health),
					StartupProbe:   startupProbe(health),
					LivenessProbe:  livenessProbe(health),
					Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
					VolumeMounts: []corev1.VolumeMount{
						{Name: e.name, MountPath: "/var/etcd/data"},
						{Name: "ca", MountPath: "/var/etcd/ssl/ca"},
						{Name: "server-tls", MountPath: "/var/etcd/ssl/server"},
					},
				}},
				Volumes: []corev1.Volume{secretVolume("ca", credentials.NameCAETCDBundle), secretVolume("server-tls", serverSecret)},
			},
		}
		if backup != nil {
			backup.addToPod(&sts.Spec.Template.Spec, backupImg, op.c.cfg.ETCDSnapshotInterval)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("statefulset %s/%s: %w", op.ns, e.name, err)
	}
	return nil
}

// waitETCD waits until etcd-main and etcd-events are ready. The kube-apiserver starts meanwhile: it waits for etcd
// itself, so that the volumes' provisioning and etcd's start overlap with the API server's.
func (op *operation) waitETCD(ctx context.Context) error {
	if op.hibernated() {
		return nil
	}
	for _, e := range etcdMembers {
		if err := op.waitReady(ctx, &appsv1.StatefulSet{ObjectMeta: op.objectMeta(e.name)}); err != nil {
			return err
		}
	}
	return nil
}

// serviceNames are the names a Service is reached at in the seed: name, name.ns, name.ns.svc,
// name.ns.svc.cluster.local.
func serviceNames(name, ns string) []string {
	return []string{name, name + "." + ns, name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local"}
}

// kubeAPIServerNames are the names the shoot's kube-apiserver serves: its Service's, the internal and external
// domain, and its name on the hub's tunnel listener.
func (op *operation) kubeAPIServerNames() []string {
	names := serviceNames(serviceKubeAPIServer, op.ns)
	names = append(names, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	for _, d := range []string{op.internalDomain(), op.externalDomain(), op.tunnelName()} {
		if d != "" && !slices.Contains(names, d) {
			names = append(names, d)
		}
	}
	return names
}

// kubeconfigSecret writes a kubeconfig for a control plane component into the namespace: the kube-apiserver's
// Service as server, the cluster CA bundle, and a client certificate signed by the client CA. It returns the
// secret's name, which changes with the certificate (so that pods mounting it roll).
func (op *operation) kubeconfigSecret(ctx context.Context, set *credentials.Set, name, user string, groups []string) (string, error) {
	cert, err := op.credentialsManager().Certificate(ctx, credentials.CertConfig{Name: name, CA: set.CAClient, CommonName: user,
		Organization: groups, Client: true})
	if err != nil {
		return "", err
	}
	kc := kubeconfig(fmt.Sprintf("https://%s.%s.svc:%d", serviceKubeAPIServer, op.ns, portKubeAPIServer), set.CABundle,
		cert.Data[credentials.DataKeyCertificate], cert.Data[credentials.DataKeyPrivateKey])
	secretName := "kubeconfig-" + cert.Name
	if err := op.deploySecret(ctx, secretName, map[string][]byte{kubeconfigKey: kc}, map[string]string{labelPurpose: purposeKubeconfig}); err != nil {
		return "", err
	}
	return secretName, nil
}

// kubeconfig is a kubeconfig with one cluster and one user.
func kubeconfig(server string, ca, cert, key []byte) []byte {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: shoot
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: user
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: shoot
  context: {cluster: shoot, user: user}
current-context: shoot
`, server, b64(ca), b64(cert), b64(key))
}

// serviceClusterIP is the cluster IP of the kube-apiserver Service.
func (op *operation) serviceClusterIP(ctx context.Context) (net.IP, error) {
	addr, err := op.apiServerAddress(ctx)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(addr)
	if ip == nil {
		return nil, fmt.Errorf("the API server service's cluster IP %q is no IP", addr)
	}
	return ip, nil
}

// auditPolicy copies the shoot's audit policy (the ConfigMap spec.kubernetes.kubeAPIServer.auditConfig.auditPolicy
// refers to, key "policy") into the namespace; ok is false when the shoot has none.
func (op *operation) auditPolicy(ctx context.Context) (ok bool, err error) {
	ref := op.shoot.GetSpec().GetKubernetes().GetKubeApiServer().GetAuditConfig().GetAuditPolicy().GetConfigMapRef()
	if ref.GetName() == "" {
		return false, nil
	}
	cm, found := cacheConfigMap(op.c, op.shoot.GetMetadata().GetNamespace(), ref.GetName())
	if !found {
		return false, fmt.Errorf("audit policy config map %s/%s is not known to the agent yet", op.shoot.GetMetadata().GetNamespace(), ref.GetName())
	}
	policy, found := cm.GetData()[auditPolicyKey]
	if !found {
		return false, fmt.Errorf("audit policy config map %s/%s has no key %q", op.shoot.GetMetadata().GetNamespace(), ref.GetName(), auditPolicyKey)
	}
	obj := &corev1.ConfigMap{ObjectMeta: op.objectMeta(configMapAuditPolicy)}
	if _, err := controllerutil.CreateOrUpdate(ctx, op.c.cfg.Seed, obj, func() error {
		obj.Data = map[string]string{"audit-policy.yaml": policy}
		return nil
	}); err != nil {
		return false, fmt.Errorf("config map %s/%s: %w", op.ns, configMapAuditPolicy, err)
	}
	return true, nil
}

// serviceAccountIssuer is the issuer of the shoot's service account tokens: its external domain, else its internal
// one, else its name on the hub's tunnel listener.
func (op *operation) serviceAccountIssuer() string {
	for _, d := range []string{op.externalDomain(), op.internalDomain()} {
		if d != "" {
			return "https://" + d
		}
	}
	return "https://" + op.tunnelName()
}

// checksum is a short SHA-256 of parts, for annotations that roll pods when what they read changes.
func checksum(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// boolMap renders a map of names to booleans as "a=true,b=false", sorted.
func boolMap(m map[string]bool) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%t", k, m[k]))
	}
	return strings.Join(parts, ",")
}

// kubeAPIServerWatchDrain is how long a stopping kube-apiserver takes to end its watches
// (--shutdown-watch-termination-grace-period), and kubeAPIServerTerminationGrace how long the kubelet lets it stop
// (Gardener's 30 s). kube-apiserver's default leaves watches to its HTTP server's shutdown, which waits for them until
// the request timeout (60 s), so every replaced pod was killed at the grace period: measured, a CA rotation's phases
// took 55–58 s, each waiting 30 s for the old pod; ending the watches (their clients resume them at the new pod from
// their resourceVersion) lets it exit on its own within 1–7 s, and the phases take 28–31 s.
const (
	kubeAPIServerWatchDrain       = 5 * time.Second
	kubeAPIServerTerminationGrace = 30 * time.Second
)

// kubeAPIServerFlags are the kube-apiserver's flags from the shoot's spec.kubernetes.kubeAPIServer.
func (op *operation) kubeAPIServerFlags(audit bool) []string {
	k := op.shoot.GetSpec().GetKubernetes().GetKubeApiServer()
	authz := "RBAC"
	var workers []string
	if len(op.shoot.GetSpec().GetProvider().GetWorkers()) > 0 {
		authz = "Node,RBAC"
		workers = []string{"--enable-bootstrap-token-auth=true"} // kubelets join with bootstrap tokens (machines.go)
	}
	flags := []string{
		"--allow-privileged=true",
		"--authorization-mode=" + authz,
		"--client-ca-file=/srv/kubernetes/ca-client/" + credentials.DataKeyCertificateBundle,
		"--encryption-provider-config=/etc/kubernetes/etcd-encryption-secret/" + credentials.DataKeyEncryptionConfig,
		"--etcd-cafile=/srv/kubernetes/etcd/ca/" + credentials.DataKeyCertificateBundle,
		"--etcd-certfile=/srv/kubernetes/etcd/client/" + credentials.DataKeyCertificate,
		"--etcd-keyfile=/srv/kubernetes/etcd/client/" + credentials.DataKeyPrivateKey,
		fmt.Sprintf("--etcd-servers=https://%s.%s.svc:%d", serviceETCDClient, op.ns, portETCDClient),
		fmt.Sprintf("--etcd-servers-overrides=/events#https://%s.%s.svc:%d", serviceETCDEventsClient, op.ns, portETCDClient),
		fmt.Sprintf("--secure-port=%d", portKubeAPIServer),
		"--service-account-issuer=" + op.serviceAccountIssuer(),
		"--service-account-key-file=/srv/kubernetes/service-account-key-bundle/" + credentials.DataKeyPublicKeyBundle,
		"--service-account-signing-key-file=/srv/kubernetes/service-account-key/" + credentials.DataKeyRSAPrivateKey,
		"--service-cluster-ip-range=" + cmpOr(op.shoot.GetSpec().GetNetworking().GetServices(), defaultServiceIPRange),
		"--tls-cert-file=/srv/kubernetes/tls/" + credentials.DataKeyCertificate,
		"--tls-private-key-file=/srv/kubernetes/tls/" + credentials.DataKeyPrivateKey,
		"--kubelet-preferred-address-types=InternalIP,Hostname,ExternalIP",
		"--profiling=false",
		"--endpoint-reconciler-type=none",
		"--shutdown-watch-termination-grace-period=" + kubeAPIServerWatchDrain.String(),
	}
	flags = append(flags, workers...)
	if aud := k.GetApiAudiences(); len(aud) > 0 {
		flags = append(flags, "--api-audiences="+strings.Join(aud, ","))
	}
	var enable, disable []string
	for _, p := range k.GetAdmissionPlugins() {
		if p.GetDisabled() {
			disable = append(disable, p.GetName())
		} else {
			enable = append(enable, p.GetName())
		}
	}
	if len(workers) > 0 && !slices.Contains(enable, "NodeRestriction") && !slices.Contains(disable, "NodeRestriction") {
		// As Gardener's default: kubelets change (and delete, machines.go) only their own Node and pods.
		enable = append(enable, "NodeRestriction")
	}
	if len(enable) > 0 {
		flags = append(flags, "--enable-admission-plugins="+strings.Join(enable, ","))
	}
	if len(disable) > 0 {
		flags = append(flags, "--disable-admission-plugins="+strings.Join(disable, ","))
	}
	if fg := k.GetFeatureGates(); len(fg) > 0 {
		flags = append(flags, "--feature-gates="+boolMap(fg))
	}
	if rc := k.GetRuntimeConfig(); len(rc) > 0 {
		flags = append(flags, "--runtime-config="+boolMap(rc))
	}
	if audit {
		flags = append(flags, "--audit-policy-file=/etc/kubernetes/audit/audit-policy.yaml", "--audit-log-path=/var/lib/audit-log/audit.log",
			"--audit-log-maxsize=100", "--audit-log-maxbackup=1")
	}
	if ttl := k.GetEventTtl(); ttl != "" {
		flags = append(flags, "--event-ttl="+ttl)
	}
	if v := k.GetTlsMinVersion(); v != "" {
		flags = append(flags, "--tls-min-version="+v)
	}
	if o := k.GetOidcConfig(); o.GetIssuerUrl() != "" {
		flags = append(flags, "--oidc-issuer-url="+o.GetIssuerUrl(), "--oidc-client-id="+o.GetClientId())
		for flag, v := range map[string]string{"--oidc-username-claim": o.GetUsernameClaim(), "--oidc-username-prefix": o.GetUsernamePrefix(),
			"--oidc-groups-claim": o.GetGroupsClaim(), "--oidc-groups-prefix": o.GetGroupsPrefix(), "--oidc-signing-algs": strings.Join(o.GetSigningAlgs(), ",")} {
			if v != "" {
				flags = append(flags, flag+"="+v)
			}
		}
		for _, c := range slices.Sorted(maps.Keys(o.GetRequiredClaims())) {
			flags = append(flags, fmt.Sprintf("--oidc-required-claim=%s=%s", c, o.GetRequiredClaims()[c]))
		}
		if o.GetCaBundle() != "" {
			flags = append(flags, "--oidc-ca-file=/srv/kubernetes/oidc/ca.crt")
		}
	}
	return flags
}

// deployKubeAPIServer deploys the shoot's kube-apiserver behind the Service kube-apiserver and waits until it is
// ready: the serving certificate from the cluster CA for every name it is reached at, the client CAs, the service
// account keys, the etcd encryption configuration and the client certificate for etcd.
func (op *operation) deployKubeAPIServer(ctx context.Context) error {
	set, err := op.credentialSet(ctx)
	if err != nil {
		return err
	}
	ip, err := op.serviceClusterIP(ctx)
	if err != nil {
		return err
	}
	// Pods reach it at the first address of the shoot's service network too (Service default/kubernetes).
	inCluster, err := op.serviceIP(apiServiceIndex)
	if err != nil {
		return err
	}
	m := op.credentialsManager()
	serving, err := m.Certificate(ctx, credentials.CertConfig{Name: certKubeAPIServer, CA: credentials.ServerCA(set.CA, set.CAOld), CommonName: "kube-apiserver",
		DNSNames: op.kubeAPIServerNames(), IPs: []net.IP{ip, net.IP(inCluster.AsSlice()), net.IPv4(127, 0, 0, 1)}, Server: true})
	if err != nil {
		return err
	}
	etcdClient, err := m.Certificate(ctx, credentials.CertConfig{Name: certETCDClient, CA: set.CAETCD, CommonName: "etcd-client", Client: true})
	if err != nil {
		return err
	}
	img, err := op.image(imagevector.KubeAPIServer)
	if err != nil {
		return err
	}
	audit, err := op.auditPolicy(ctx)
	if err != nil {
		return err
	}
	volumes := []corev1.Volume{
		secretVolume("tls", serving.Name),
		secretVolume("ca-client", credentials.NameCAClientBundle),
		secretVolume("etcd-ca", credentials.NameCAETCDBundle),
		secretVolume("etcd-client", etcdClient.Name),
		secretVolume("service-account-key", set.ServiceAccountKey.Name),
		secretVolume("service-account-key-bundle", credentials.NameServiceAccountKeyBundle),
		secretVolume("etcd-encryption-secret", credentials.NameETCDEncryptionConfig),
	}
	mounts := []corev1.VolumeMount{
		{Name: "tls", MountPath: "/srv/kubernetes/tls"},
		{Name: "ca-client", MountPath: "/srv/kubernetes/ca-client"},
		{Name: "etcd-ca", MountPath: "/srv/kubernetes/etcd/ca"},
		{Name: "etcd-client", MountPath: "/srv/kubernetes/etcd/client"},
		{Name: "service-account-key", MountPath: "/srv/kubernetes/service-account-key"},
		{Name: "service-account-key-bundle", MountPath: "/srv/kubernetes/service-account-key-bundle"},
		{Name: "etcd-encryption-secret", MountPath: "/etc/kubernetes/etcd-encryption-secret"},
	}
	if audit {
		volumes = append(volumes, corev1.Volume{Name: "audit-policy", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMapAuditPolicy}}}},
			corev1.Volume{Name: "audit-log", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(resource.MustParse("250Mi"))}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "audit-policy", MountPath: "/etc/kubernetes/audit"},
			corev1.VolumeMount{Name: "audit-log", MountPath: "/var/lib/audit-log"})
	}
	if ca := op.shoot.GetSpec().GetKubernetes().GetKubeApiServer().GetOidcConfig().GetCaBundle(); ca != "" {
		if err := op.deploySecret(ctx, "kube-apiserver-oidc-cabundle", map[string][]byte{"ca.crt": []byte(ca)}, nil); err != nil {
			return err
		}
		volumes = append(volumes, secretVolume("oidc-cabundle", "kube-apiserver-oidc-cabundle"))
		mounts = append(mounts, corev1.VolumeMount{Name: "oidc-cabundle", MountPath: "/srv/kubernetes/oidc"})
	}
	probe := func(path string) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(portKubeAPIServer), Scheme: corev1.URISchemeHTTPS}}
	}
	dep := &appsv1.Deployment{ObjectMeta: op.objectMeta(deployKubeAPIServer)}
	_, err = controllerutil.CreateOrUpdate(ctx, op.c.cfg.Seed, dep, func() error {
		exists := !dep.CreationTimestamp.IsZero()
		dep.Labels = maps.Clone(labelsKubeAPIServer)
		setReplicas(&dep.Spec.Replicas, exists, op.hibernated())
		dep.Spec.Selector = &kmetav1.LabelSelector{MatchLabels: maps.Clone(labelsKubeAPIServer)}
		dep.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge: ptr(intstr.FromInt32(1)), MaxUnavailable: ptr(intstr.FromInt32(0))}}
		sec := podSecurity()
		// Port 443 without root: the pod's own network namespace lets unprivileged processes bind it.
		sec.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}
		dep.Spec.Template = corev1.PodTemplateSpec{
			// The bundles and the encryption configuration keep their secrets' names: their checksum rolls the pods
			// when a rotation changes them (kube-apiserver reads the service account keys and the encryption
			// configuration at its start only).
			ObjectMeta: kmetav1.ObjectMeta{Labels: maps.Clone(labelsKubeAPIServer), Annotations: map[string]string{
				"checksum/credentials": checksum(set.ServiceAccountKeyBundle, set.CAClientBundle, []byte(strings.Join(set.ETCDEncryptionKeys, ","))),
			}},
			Spec: corev1.PodSpec{
				SecurityContext:               sec,
				TerminationGracePeriodSeconds: ptr(int64(kubeAPIServerTerminationGrace / time.Second)),
				AutomountServiceAccountToken:  ptr(false),
				Containers: []corev1.Container{{
					Name: "kube-apiserver", Image: img, ImagePullPolicy: corev1.PullIfNotPresent,
					Command:         append([]string{"/usr/local/bin/kube-apiserver"}, op.kubeAPIServerFlags(audit)...),
					Ports:           []corev1.ContainerPort{{Name: "https", ContainerPort: portKubeAPIServer}},
					ReadinessProbe:  readinessProbe(probe("/readyz")),
					StartupProbe:    startupProbe(probe("/livez")),
					LivenessProbe:   livenessProbe(probe("/livez")),
					Resources:       corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")}},
					VolumeMounts:    mounts,
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false)},
				}},
				Volumes: volumes,
			},
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deployment %s/%s: %w", op.ns, deployKubeAPIServer, err)
	}
	if op.hibernated() {
		return nil
	}
	if err := op.waitReady(ctx, dep); err != nil {
		return err
	}
	// A rolled-out Deployment no longer counts its old, terminating pods; until they are gone, a new connection
	// may still reach one (serving the old certificate during a CA rotation's completion): wait for them too.
	return op.waitOnlyCurrentPods(ctx, labelsKubeAPIServer)
}

// deployKubeControllerManager deploys the shoot's kube-controller-manager: a kubeconfig for
// system:kube-controller-manager, the service account signing key, the cluster CA as root CA, and the client CA
// as the signer of the certificates API.
func (op *operation) deployKubeControllerManager(ctx context.Context) error {
	set, err := op.credentialSet(ctx)
	if err != nil {
		return err
	}
	kc, err := op.kubeconfigSecret(ctx, set, certKCM, userKCM, nil)
	if err != nil {
		return err
	}
	img, err := op.image(imagevector.KubeControllerManager)
	if err != nil {
		return err
	}
	controllers := "*,bootstrapsigner,tokencleaner"
	if len(op.shoot.GetSpec().GetProvider().GetWorkers()) == 0 {
		// A workerless shoot has no nodes, volumes or cloud routes: Gardener turns their controllers off.
		controllers = "*,-nodeipam,-nodelifecycle,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-ttl,-cloud-node-lifecycle,-route,-service"
	}
	flags := []string{
		"--kubeconfig=/var/run/secrets/kubeconfig/" + kubeconfigKey,
		"--authentication-kubeconfig=/var/run/secrets/kubeconfig/" + kubeconfigKey,
		"--authorization-kubeconfig=/var/run/secrets/kubeconfig/" + kubeconfigKey,
		"--controllers=" + controllers,
		"--leader-elect=true",
		"--root-ca-file=/srv/kubernetes/ca/" + credentials.DataKeyCertificateBundle,
		"--service-account-private-key-file=/srv/kubernetes/service-account-key/" + credentials.DataKeyRSAPrivateKey,
		"--cluster-signing-cert-file=/srv/kubernetes/ca-client/" + credentials.DataKeyCertificateCA,
		"--cluster-signing-key-file=/srv/kubernetes/ca-client/" + credentials.DataKeyPrivateKeyCA,
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range=" + cmpOr(op.shoot.GetSpec().GetNetworking().GetServices(), defaultServiceIPRange),
		"--secure-port=10257",
		"--profiling=false",
	}
	if p := op.shoot.GetSpec().GetNetworking().GetPods(); p != "" && len(op.shoot.GetSpec().GetProvider().GetWorkers()) > 0 {
		flags = append(flags, "--allocate-node-cidrs=true", "--cluster-cidr="+p)
	}
	if fg := op.shoot.GetSpec().GetKubernetes().GetKubeControllerManager().GetFeatureGates(); len(fg) > 0 {
		flags = append(flags, "--feature-gates="+boolMap(fg))
	}
	return op.deployComponent(ctx, deployKCM, labelsKCM, img, append([]string{"/usr/local/bin/kube-controller-manager"}, flags...), 10257,
		[]corev1.Volume{secretVolume("kubeconfig", kc), secretVolume("ca", credentials.NameCABundle),
			secretVolume("service-account-key", set.ServiceAccountKey.Name), secretVolume("ca-client", set.CAClient.Name)},
		[]corev1.VolumeMount{{Name: "kubeconfig", MountPath: "/var/run/secrets/kubeconfig"}, {Name: "ca", MountPath: "/srv/kubernetes/ca"},
			{Name: "service-account-key", MountPath: "/srv/kubernetes/service-account-key"}, {Name: "ca-client", MountPath: "/srv/kubernetes/ca-client"}})
}

// deployKubeScheduler deploys the shoot's kube-scheduler (shoots with workers only).
func (op *operation) deployKubeScheduler(ctx context.Context) error {
	set, err := op.credentialSet(ctx)
	if err != nil {
		return err
	}
	kc, err := op.kubeconfigSecret(ctx, set, certScheduler, userScheduler, nil)
	if err != nil {
		return err
	}
	img, err := op.image(imagevector.KubeScheduler)
	if err != nil {
		return err
	}
	flags := []string{
		"--kubeconfig=/var/run/secrets/kubeconfig/" + kubeconfigKey,
		"--authentication-kubeconfig=/var/run/secrets/kubeconfig/" + kubeconfigKey,
		"--authorization-kubeconfig=/var/run/secrets/kubeconfig/" + kubeconfigKey,
		"--leader-elect=true",
		"--secure-port=10259",
		"--profiling=false",
	}
	if fg := op.shoot.GetSpec().GetKubernetes().GetKubeScheduler().GetFeatureGates(); len(fg) > 0 {
		flags = append(flags, "--feature-gates="+boolMap(fg))
	}
	return op.deployComponent(ctx, deployScheduler, labelsScheduler, img, append([]string{"/usr/local/bin/kube-scheduler"}, flags...), 10259,
		[]corev1.Volume{secretVolume("kubeconfig", kc)}, []corev1.VolumeMount{{Name: "kubeconfig", MountPath: "/var/run/secrets/kubeconfig"}})
}

// deployComponent deploys a one-replica Deployment of a controller of the control plane, probed at /healthz on its
// secure port, and waits until it is ready.
func (op *operation) deployComponent(ctx context.Context, name string, labels map[string]string, img string, command []string,
	port int32, volumes []corev1.Volume, mounts []corev1.VolumeMount) error {
	healthz := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTPS}}
	dep := &appsv1.Deployment{ObjectMeta: op.objectMeta(name)}
	_, err := controllerutil.CreateOrUpdate(ctx, op.c.cfg.Seed, dep, func() error {
		exists := !dep.CreationTimestamp.IsZero()
		dep.Labels = maps.Clone(labels)
		setReplicas(&dep.Spec.Replicas, exists, op.hibernated())
		dep.Spec.Selector = &kmetav1.LabelSelector{MatchLabels: maps.Clone(labels)}
		dep.Spec.Template = corev1.PodTemplateSpec{
			ObjectMeta: kmetav1.ObjectMeta{Labels: maps.Clone(labels)},
			Spec: corev1.PodSpec{
				SecurityContext:              podSecurity(),
				AutomountServiceAccountToken: ptr(false),
				Containers: []corev1.Container{{
					Name: name, Image: img, ImagePullPolicy: corev1.PullIfNotPresent, Command: command,
					StartupProbe:    startupProbe(healthz),
					LivenessProbe:   livenessProbe(healthz),
					Resources:       corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
					VolumeMounts:    mounts,
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false)},
				}},
				Volumes: volumes,
			},
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deployment %s/%s: %w", op.ns, name, err)
	}
	if op.hibernated() {
		return nil
	}
	return op.waitReady(ctx, dep)
}
