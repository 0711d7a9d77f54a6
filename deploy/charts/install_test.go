package charts_test

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/deploy/charts"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// The Trellis charts' tests: what is common to the hub's and the agent's.

// renderChart renders the embedded chart name as `helm template` does (install action, client-only dry run) into
// namespace ns with vals, and decodes every manifest strictly into client-go's types; kinds client-go does not know
// (the ServiceMonitor) come back unstructured.
func renderChart(t *testing.T, name, release, ns string, vals map[string]any) ([]client.Object, error) {
	t.Helper()
	archive, err := charts.Archive(name)
	if err != nil {
		t.Fatal(err)
	}
	chrt, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{Log: t.Logf})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = release, ns
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return nil, err
	}
	decoder := serializer.NewCodecFactory(clientgoscheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	var out []client.Object
	manifests := releaseutil.SplitManifests(rel.Manifest)
	for _, key := range slices.Sorted(maps.Keys(manifests)) {
		obj, _, err := decoder.Decode([]byte(manifests[key]), nil, nil)
		if runtime.IsNotRegisteredError(err) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(manifests[key]), &u.Object); err != nil {
				t.Fatalf("decode rendered manifest:\n%s\n%v", manifests[key], err)
			}
			out = append(out, u)
			continue
		}
		if err != nil {
			t.Fatalf("decode rendered manifest:\n%s\n%v", manifests[key], err)
		}
		out = append(out, obj.(client.Object))
	}
	return out, nil
}

// mustRenderChart is renderChart failing the test on a rendering error.
func mustRenderChart(t *testing.T, name, release, ns string, vals map[string]any) []client.Object {
	t.Helper()
	objs, err := renderChart(t, name, release, ns, vals)
	if err != nil {
		t.Fatalf("render %s: %v", name, err)
	}
	return objs
}

// find returns the rendered object of type T named name ("" for the only one), failing the test when missing.
func find[T client.Object](t *testing.T, objs []client.Object, name string) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if v, ok := o.(T); ok && (name == "" || o.GetName() == name) {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("rendered %d objects of type %T named %q, want 1", len(found), zero, name)
	}
	return found[0]
}

// kinds lists the rendered objects as Kind/name, sorted.
func kinds(objs []client.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, kindOf(o)+"/"+o.GetName())
	}
	slices.Sort(out)
	return out
}

func kindOf(o client.Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	gvks, _, err := clientgoscheme.Scheme.ObjectKinds(o)
	if err != nil || len(gvks) == 0 {
		return "?"
	}
	return gvks[0].Kind
}

// lintChart runs helm lint on the embedded chart's directory with vals: errors and warnings fail the test.
func lintChart(t *testing.T, name, ns string, vals map[string]any) {
	t.Helper()
	l := lint.All(name, vals, ns, false)
	for _, msg := range l.Messages {
		if msg.Severity >= support.WarningSev {
			t.Errorf("helm lint %s: %v", name, msg)
		} else {
			t.Logf("helm lint %s: %v", name, msg)
		}
	}
}

// checkPodSecurity asserts the hardening every Trellis workload has: non-root, no privilege escalation, read-only
// root file system, every capability dropped, the runtime's seccomp profile, resources and both probes.
func checkPodSecurity(t *testing.T, what string, spec corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil ||
		psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod security context %+v: want runAsNonRoot and the RuntimeDefault seccomp profile", what, psc)
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil ||
			!*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: container %s security context %+v", what, c.Name, sc)
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet == nil {
			t.Errorf("%s: container %s lacks HTTP liveness and readiness probes", what, c.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: container %s resources %+v: want CPU and memory requests and a memory limit", what, c.Name, c.Resources)
		}
	}
}

// dryRunAll creates every object of objs in the seed with a server-side dry run (namespace ns is created for real
// first): the seed's kube-apiserver validates and defaults each one, runs admission, and stores nothing. Kinds the
// seed does not serve (a ServiceMonitor without its CRD) are skipped and returned.
func dryRunAll(t *testing.T, seed *seedtest.Seed, ns string, objs []client.Object) (skipped []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(seed.Config, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, o := range objs {
		o = o.DeepCopyObject().(client.Object)
		err := c.Create(ctx, o, client.DryRunAll)
		if _, ok := o.(*unstructured.Unstructured); ok && err != nil && strings.Contains(err.Error(), "no matches for kind") {
			skipped = append(skipped, kindOf(o)+"/"+o.GetName())
			continue
		}
		if err != nil {
			t.Errorf("the seed refuses %s %s/%s: %v", kindOf(o), o.GetNamespace(), o.GetName(), err)
		}
	}
	return skipped
}
