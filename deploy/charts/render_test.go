package charts_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/deploy/charts"
	"github.com/trellis-dev/trellis/deploy/crds"
)

// The release as the seed agent installs it: release name = ControllerRegistration name, namespace
// extension-<ControllerInstallation name>.
const (
	releaseName      = "provider-local"
	releaseNamespace = "extension-provider-local-x1b2c"
)

// gardenerValues is a `gardener:` block as Gardener's gardenlet injects it (and the agent does): every key, with the
// seed of the local landscape.
func gardenerValues() map[string]any {
	const manifest = `
version: v1.2.3-trellis
garden:
  clusterIdentity: garden-local
  genericKubeconfigSecretName: generic-token-kubeconfig
seed:
  name: local
  clusterIdentity: seed-local-7f3a
  annotations: {seed.gardener.cloud/note: local}
  labels: {seed.gardener.cloud/provider: local, environment: test}
  provider: local
  region: eu-local-1
  volumeProvider: ""
  volumeProviders: []
  ingressDomain: ingress.local.seed.local.gardener.cloud
  protected: false
  visible: true
  taints: [{key: seed.gardener.cloud/protected}]
  networks: {nodes: 10.0.0.0/16, pods: 10.1.0.0/16, services: 10.2.0.0/16, shootDefaults: {pods: 100.96.0.0/11}}
  blockCIDRs: [169.254.169.254/32]
  spec:
    provider: {type: local, region: eu-local-1}
    ingress: {domain: ingress.local.seed.local.gardener.cloud, controller: {kind: nginx}}
gardenlet:
  featureGates: {}
`
	var v map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &v); err != nil {
		panic(err)
	}
	return v
}

// rendered are the objects of a rendered release, decoded strictly into client-go's types.
type rendered struct {
	objects            []runtime.Object
	deployment         *appsv1.Deployment
	serviceAccount     *corev1.ServiceAccount
	clusterRole        *rbacv1.ClusterRole
	clusterRoleBinding *rbacv1.ClusterRoleBinding
	role               *rbacv1.Role
	roleBinding        *rbacv1.RoleBinding
	secret             *corev1.Secret // machineProviders' token
}

// render installs the archived chart with helm's install action in client-only dry-run mode (`helm template`; what
// the agent does, minus the cluster) with vals, and decodes every manifest strictly: an unknown or misspelt field
// fails the test.
func render(t *testing.T, vals map[string]any) (*rendered, error) {
	t.Helper()
	objs, err := renderChart(t, charts.ProviderLocal, releaseName, releaseNamespace, vals)
	if err != nil {
		return nil, err
	}
	out := &rendered{}
	for _, obj := range objs {
		out.objects = append(out.objects, obj)
		switch o := obj.(type) {
		case *appsv1.Deployment:
			out.deployment = o
		case *corev1.ServiceAccount:
			out.serviceAccount = o
		case *rbacv1.ClusterRole:
			out.clusterRole = o
		case *rbacv1.ClusterRoleBinding:
			out.clusterRoleBinding = o
		case *rbacv1.Role:
			out.role = o
		case *rbacv1.RoleBinding:
			out.roleBinding = o
		case *corev1.Secret:
			out.secret = o
		default:
			t.Errorf("unexpected object %T", obj)
		}
	}
	return out, nil
}

// mustRender is render that fails the test on a rendering error.
func mustRender(t *testing.T, vals map[string]any) *rendered {
	t.Helper()
	r, err := render(t, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	if r.deployment == nil || r.serviceAccount == nil || r.clusterRole == nil || r.clusterRoleBinding == nil ||
		r.role == nil || r.roleBinding == nil {
		t.Fatalf("rendered %d objects, want a Deployment, ServiceAccount, ClusterRole(Binding) and Role(Binding)", len(r.objects))
	}
	return r
}

// env returns the container's environment by name.
func env(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

func TestRenderInjectedValues(t *testing.T) {
	g := gardenerValues()
	// The ControllerDeployment's helm.values with the agent's block merged in.
	r := mustRender(t, map[string]any{"gardener": g})
	d := r.deployment
	seed := g["seed"].(map[string]any)

	if got := d.Annotations["gardener.cloud/version"]; got != g["version"] {
		t.Errorf("annotation gardener.cloud/version = %q, want %q", got, g["version"])
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]
	e := env(c)
	for name, want := range map[string]any{"SEED_NAME": seed["name"], "SEED_PROVIDER": seed["provider"], "SEED_REGION": seed["region"]} {
		if e[name].Value != want {
			t.Errorf("env %s = %q, want %q", name, e[name].Value, want)
		}
	}
	if ns := e["POD_NAMESPACE"]; ns.ValueFrom == nil || ns.ValueFrom.FieldRef == nil || ns.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("POD_NAMESPACE is not the pod's namespace from the downward API: %+v", ns)
	}

	// Every flag of provider-local the chart owns, with the defaults of values.yaml; --namespace is the pod's.
	wantArgs := []string{
		"--namespace=$(POD_NAMESPACE)",
		"--backup-dir=/var/lib/provider-local/backupbuckets",
		"--dns-namespace=gardener-extension-provider-local-coredns",
		"--health-check-interval=30s",
		"--heartbeat-interval=30s",
		"--max-concurrent-reconciles=5",
		"--metrics-bind-address=:8080",
		"--health-probe-bind-address=:8081",
		"--log-level=info",
		"--log-format=json",
	}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args\n got  %q\n want %q", c.Args, wantArgs)
	}
	if c.Image != "ghcr.io/trellis-dev/trellis/provider-local:0.1.0" {
		t.Errorf("image %q, want the appVersion as tag", c.Image)
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.StartupProbe == nil {
		t.Error("probes missing with the health probe port on")
	}
	vols := d.Spec.Template.Spec.Volumes
	if len(vols) != 1 || vols[0].EmptyDir == nil || len(c.VolumeMounts) != 1 ||
		c.VolumeMounts[0].MountPath != "/var/lib/provider-local/backupbuckets" {
		t.Errorf("backup volume: %+v mounted %+v, want an emptyDir at the backup dir", vols, c.VolumeMounts)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %v, strategy %q; want 1, Recreate", d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	if d.Spec.Template.Annotations["prometheus.io/port"] != "8080" {
		t.Errorf("pod annotations %v lack the Prometheus port", d.Spec.Template.Annotations)
	}

	// The names tie together, namespaced objects are in the release namespace.
	sa := d.Spec.Template.Spec.ServiceAccountName
	if sa != r.serviceAccount.Name || sa != "provider-local" {
		t.Errorf("pod service account %q, ServiceAccount %q", sa, r.serviceAccount.Name)
	}
	for _, o := range []interface {
		GetNamespace() string
		GetName() string
	}{d, r.serviceAccount, r.role, r.roleBinding} {
		if o.GetNamespace() != releaseNamespace {
			t.Errorf("%T %s in namespace %q, want %q", o, o.GetName(), o.GetNamespace(), releaseNamespace)
		}
	}
	crb := r.clusterRoleBinding
	if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != r.clusterRole.Name || len(crb.Subjects) != 1 ||
		crb.Subjects[0].Kind != "ServiceAccount" || crb.Subjects[0].Name != sa || crb.Subjects[0].Namespace != releaseNamespace {
		t.Errorf("ClusterRoleBinding %+v does not bind ClusterRole %s to the ServiceAccount", crb, r.clusterRole.Name)
	}
	if !strings.Contains(r.clusterRole.Name, releaseNamespace) {
		t.Errorf("ClusterRole %q does not carry the release namespace: two installations in one cluster would share it", r.clusterRole.Name)
	}
	rb := r.roleBinding
	if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != r.role.Name || len(rb.Subjects) != 1 || rb.Subjects[0].Name != sa {
		t.Errorf("RoleBinding %+v does not bind Role %s to the ServiceAccount", rb, r.role.Name)
	}
}

func TestRenderWithoutGardenerValues(t *testing.T) {
	d := mustRender(t, nil).deployment
	if v, ok := d.Annotations["gardener.cloud/version"]; ok {
		t.Errorf("version annotation %q without injected values", v)
	}
	e := env(d.Spec.Template.Spec.Containers[0])
	for _, name := range []string{"SEED_NAME", "SEED_PROVIDER", "SEED_REGION"} {
		if v, ok := e[name]; !ok || v.Value != "" {
			t.Errorf("env %s = %+v, want present and empty", name, v)
		}
	}
	// A partial block (no seed) renders too.
	d = mustRender(t, map[string]any{"gardener": map[string]any{"version": "v9"}}).deployment
	if d.Annotations["gardener.cloud/version"] != "v9" || env(d.Spec.Template.Spec.Containers[0])["SEED_NAME"].Value != "" {
		t.Errorf("partial block: annotations %v", d.Annotations)
	}
}

func TestRenderReplicas(t *testing.T) {
	for _, n := range []int32{0, 1} {
		d := mustRender(t, map[string]any{"replicaCount": n, "gardener": gardenerValues()}).deployment
		if d.Spec.Replicas == nil || *d.Spec.Replicas != n {
			t.Errorf("replicaCount %d: replicas %v", n, d.Spec.Replicas)
		}
	}
	if _, err := render(t, map[string]any{"replicaCount": 2}); err == nil || !strings.Contains(err.Error(), "leader election") {
		t.Errorf("replicaCount 2: %v, want a refusal", err)
	}
}

func TestRenderValues(t *testing.T) {
	d := mustRender(t, map[string]any{
		"image":       map[string]any{"repository": "registry.local/pl", "tag": "v2", "pullPolicy": "Always"},
		"backup":      map[string]any{"hostPath": "/var/lib/trellis/backups", "mountPath": "/backups"},
		"metrics":     map[string]any{"port": 0},
		"healthProbe": map[string]any{"port": 0},
		"config": map[string]any{"extraTypes": []any{"OperatingSystemConfig=gardenlinux", "Network=calico"},
			"logLevel": "debug", "logFormat": "text", "heartbeatInterval": "2s", "maxConcurrentReconciles": 20},
		"priorityClassName": "gardener-system-900",
	}).deployment
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	if c.Image != "registry.local/pl:v2" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %q %q", c.Image, c.ImagePullPolicy)
	}
	for _, want := range []string{"--backup-dir=/backups", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--extra-type=OperatingSystemConfig=gardenlinux", "--extra-type=Network=calico", "--log-level=debug",
		"--log-format=text", "--heartbeat-interval=2s", "--max-concurrent-reconciles=20"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %q", c.Args, want)
		}
	}
	if len(c.Ports) != 0 || c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil {
		t.Errorf("ports %v or probes with both ports off", c.Ports)
	}
	if _, ok := d.Spec.Template.Annotations["prometheus.io/scrape"]; ok {
		t.Error("Prometheus annotations with metrics off")
	}
	if v := spec.Volumes[0]; v.HostPath == nil || v.HostPath.Path != "/var/lib/trellis/backups" || v.EmptyDir != nil {
		t.Errorf("backup volume %+v, want the hostPath", v)
	}
	if spec.PriorityClassName != "gardener-system-900" {
		t.Errorf("priorityClassName %q", spec.PriorityClassName)
	}
}

// TestRenderMachineProvider: the seed the chart installs in picks its machine provider from machineProviders; its
// token goes into a Secret the pod mounts, and the flags point at both. Another seed's entry gives nothing.
func TestRenderMachineProvider(t *testing.T) {
	mps := map[string]any{gardenerValues()["seed"].(map[string]any)["name"].(string): map[string]any{"url": "http://10.226.0.1:8446", "token": "t0ken"}}
	r := mustRender(t, map[string]any{"gardener": gardenerValues(), "machineProviders": mps})
	if r.secret == nil || r.secret.StringData["token"] != "t0ken" {
		t.Fatalf("machine provider secret %+v, want the token", r.secret)
	}
	spec := r.deployment.Spec.Template.Spec
	c := spec.Containers[0]
	for _, want := range []string{"--machine-provider-url=http://10.226.0.1:8446", "--machine-provider-token-file=/etc/provider-local/machine-provider/token"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %q", c.Args, want)
		}
	}
	mounted := false
	for _, v := range spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == r.secret.Name {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("volumes %+v do not mount Secret %s", spec.Volumes, r.secret.Name)
	}
	other := mustRender(t, map[string]any{"gardener": gardenerValues(), "machineProviders": map[string]any{"elsewhere": mps[gardenerValues()["seed"].(map[string]any)["name"].(string)]}})
	if other.secret != nil || slices.ContainsFunc(other.deployment.Spec.Template.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--machine-provider") }) {
		t.Errorf("another seed's machine provider is used: %v", other.deployment.Spec.Template.Spec.Containers[0].Args)
	}
}

// TestClusterRoleCoversCRDs checks the ClusterRole against the extension CRDs the agent installs (deploy/crds):
// provider-local reconciles every kind but Cluster, which it only reads, and never creates, updates or deletes one.
// TestRBACSufficesOnSeed checks on a real seed that the rules are enough.
func TestClusterRoleCoversCRDs(t *testing.T) {
	role := mustRender(t, nil).clusterRole
	allowed := func(resource, verb string) bool {
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, "extensions.gardener.cloud") && slices.Contains(r.Resources, resource) &&
				slices.Contains(r.Verbs, verb) && len(r.ResourceNames) == 0 {
				return true
			}
		}
		return false
	}
	list, err := crds.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range list {
		plural := crd.Spec.Names.Plural
		if plural == "clusters" {
			for _, verb := range []string{"get", "list", "watch"} {
				if !allowed(plural, verb) {
					t.Errorf("%s: %s not allowed", plural, verb)
				}
			}
			for _, verb := range []string{"create", "update", "patch", "delete"} {
				if allowed(plural, verb) {
					t.Errorf("%s: %s allowed, provider-local only reads Clusters", plural, verb)
				}
			}
			continue
		}
		for _, verb := range []string{"get", "list", "watch", "patch"} {
			if !allowed(plural, verb) {
				t.Errorf("%s: %s not allowed", plural, verb)
			}
		}
		if !allowed(plural+"/status", "patch") {
			t.Errorf("%s/status: patch not allowed", plural)
		}
		for _, verb := range []string{"create", "update", "delete", "deletecollection", "*"} {
			if allowed(plural, verb) {
				t.Errorf("%s: %s allowed; the agent creates and deletes extension objects, not provider-local", plural, verb)
			}
		}
	}
}
