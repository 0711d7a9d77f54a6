package admission_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/componentconfig"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

var (
	secretsGR      = schema.GroupResource{Resource: "secrets"}
	configMapsGR   = schema.GroupResource{Resource: "configmaps"}
	shootsGR       = schema.GroupResource{Group: "core.gardener.cloud", Resource: "shoots"}
	bindingsGR     = schema.GroupResource{Group: "core.gardener.cloud", Resource: "secretbindings"}
	credBindingsGR = schema.GroupResource{Group: "security.gardener.cloud", Resource: "credentialsbindings"}
)

// quotaGarden is the hub's real registry with projects dev (tier=free, namespace garden-dev) and big (tier=paid,
// namespace garden-big), a namespace of no project (plain), and one labelled for dev that dev does not own (spoof).
func quotaGarden(t testing.TB) (*api.Registry, func(gr schema.GroupResource) *store.Collection) {
	t.Helper()
	ctx := context.Background()
	reg, err := api.NewRegistry(ctx, api.Config{Store: storetest.NewStore(t), Services: grpc.NewServer(), Admission: admission.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	coll := func(gr schema.GroupResource) *store.Collection {
		c, ok := reg.Collection(gr)
		if !ok {
			t.Fatalf("%s not served", gr)
		}
		return c
	}
	create := func(gr schema.GroupResource, obj store.Object) {
		if _, err := coll(gr).Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	projectsGR, namespacesGR := schema.GroupResource{Group: "core.gardener.cloud", Resource: "projects"}, schema.GroupResource{Resource: "namespaces"}
	for _, p := range []struct{ name, tier string }{{"dev", "free"}, {"big", "paid"}} {
		create(projectsGR, &corev1beta1.Project{Metadata: &metav1.ObjectMeta{Name: p.name, Labels: map[string]string{"tier": p.tier}},
			Spec: &corev1beta1.ProjectSpec{Namespace: proto.String("garden-" + p.name)}})
		create(namespacesGR, &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: "garden-" + p.name,
			Labels: map[string]string{"gardener.cloud/role": "project", "project.gardener.cloud/name": p.name}}})
	}
	create(namespacesGR, &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: "plain"}})
	create(namespacesGR, &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: "spoof", Labels: map[string]string{"project.gardener.cloud/name": "dev"}}})
	return reg, coll
}

// object returns an object of gr's kind named name in namespace.
func object(gr schema.GroupResource, namespace, name string) store.Object {
	md := &metav1.ObjectMeta{Namespace: namespace, Name: name}
	switch gr {
	case secretsGR:
		return &kcorev1.Secret{Metadata: md}
	case configMapsGR:
		return &kcorev1.ConfigMap{Metadata: md}
	case shootsGR:
		return &corev1beta1.Shoot{Metadata: md}
	case bindingsGR:
		return &corev1beta1.SecretBinding{Metadata: md}
	case credBindingsGR:
		return &securityv1alpha1.CredentialsBinding{Metadata: md}
	}
	panic("no kind for " + gr.String())
}

// freeAndAll is a configuration with a quota for tier=free projects and one for all others.
var freeAndAll = []componentconfig.QuotaConfiguration{
	{ProjectSelector: &kmetav1.LabelSelector{MatchLabels: map[string]string{"tier": "free"}},
		Config: componentconfig.ResourceQuota{Spec: componentconfig.ResourceQuotaSpec{Hard: map[string]string{
			"count/secrets": "2", "secrets": "3", "configmaps": "1", "count/shoots.core.gardener.cloud": "1",
			"count/secretbindings.core.gardener.cloud": "1", "count/credentialsbindings.security.gardener.cloud": "0",
			"requests.cpu": "10",
		}}}},
	{ProjectSelector: &kmetav1.LabelSelector{},
		Config: componentconfig.ResourceQuota{Spec: componentconfig.ResourceQuotaSpec{Hard: map[string]string{"count/secrets": "5"}}}},
}

// TestProjectQuotas: a create over a limit of its project's quota is refused as kube-apiserver's quota admission
// refuses it; everything else passes.
func TestProjectQuotas(t *testing.T) {
	for _, tc := range []struct {
		name      string
		gr        schema.GroupResource
		namespace string
		existing  int
		// deleting of the existing objects are being deleted (held by a finalizer)
		deleting int
		newName  string
		want     string // the refusal's message; "" admits
	}{
		{name: "below the limit", gr: secretsGR, namespace: "garden-dev", existing: 1},
		{name: "at the limit", gr: secretsGR, namespace: "garden-dev", existing: 2,
			want: `secrets "new" is forbidden: exceeded quota: gardener, requested: count/secrets=1, used: count/secrets=2, limited: count/secrets=2`},
		{name: "count and legacy name both exceeded, sorted", gr: secretsGR, namespace: "garden-dev", existing: 3,
			want: `secrets "new" is forbidden: exceeded quota: gardener, requested: count/secrets=1,secrets=1, used: count/secrets=3,secrets=3, limited: count/secrets=2,secrets=3`},
		{name: "objects being deleted count", gr: secretsGR, namespace: "garden-dev", existing: 2, deleting: 1,
			want: `secrets "new" is forbidden: exceeded quota: gardener, requested: count/secrets=1, used: count/secrets=2, limited: count/secrets=2`},
		{name: "generated name", gr: secretsGR, namespace: "garden-dev", existing: 2, newName: "-",
			want: `secrets is forbidden: exceeded quota: gardener, requested: count/secrets=1, used: count/secrets=2, limited: count/secrets=2`},
		{name: "legacy core name alone", gr: configMapsGR, namespace: "garden-dev", existing: 1,
			want: `configmaps "new" is forbidden: exceeded quota: gardener, requested: configmaps=1, used: configmaps=1, limited: configmaps=1`},
		{name: "shoots", gr: shootsGR, namespace: "garden-dev", existing: 1,
			want: `shoots.core.gardener.cloud "new" is forbidden: exceeded quota: gardener, requested: count/shoots.core.gardener.cloud=1, used: count/shoots.core.gardener.cloud=1, limited: count/shoots.core.gardener.cloud=1`},
		{name: "secret bindings", gr: bindingsGR, namespace: "garden-dev", existing: 1,
			want: `secretbindings.core.gardener.cloud "new" is forbidden: exceeded quota: gardener, requested: count/secretbindings.core.gardener.cloud=1, used: count/secretbindings.core.gardener.cloud=1, limited: count/secretbindings.core.gardener.cloud=1`},
		{name: "a limit of zero", gr: credBindingsGR, namespace: "garden-dev",
			want: `credentialsbindings.security.gardener.cloud "new" is forbidden: exceeded quota: gardener, requested: count/credentialsbindings.security.gardener.cloud=1, used: count/credentialsbindings.security.gardener.cloud=0, limited: count/credentialsbindings.security.gardener.cloud=0`},
		{name: "the first matching quota applies", gr: secretsGR, namespace: "garden-big", existing: 4},
		{name: "the first matching quota applies: its limit", gr: secretsGR, namespace: "garden-big", existing: 5,
			want: `secrets "new" is forbidden: exceeded quota: gardener, requested: count/secrets=1, used: count/secrets=5, limited: count/secrets=5`},
		{name: "no limit for the resource", gr: shootsGR, namespace: "garden-big", existing: 7},
		{name: "namespace of no project", gr: secretsGR, namespace: "plain", existing: 9},
		{name: "namespace labelled for a project that does not own it", gr: secretsGR, namespace: "spoof", existing: 9},
		{name: "namespace that does not exist", gr: secretsGR, namespace: "nowhere", existing: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			reg, coll := quotaGarden(t)
			q, err := admission.NewProjectQuotas(freeAndAll)
			if err != nil {
				t.Fatal(err)
			}
			gr := tc.gr
			for i := range tc.existing {
				obj := object(gr, tc.namespace, fmt.Sprintf("o%d", i))
				if i < tc.deleting {
					obj.GetMetadata().Finalizers = []string{"example.com/keep"}
				}
				if _, err := coll(gr).Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
				if i < tc.deleting {
					if _, _, err := coll(gr).Delete(ctx, tc.namespace, obj.GetMetadata().GetName(), nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			name := "new"
			if tc.newName == "-" {
				name = ""
			}
			release, err := q.Admit(ctx, reg, gr, object(gr, tc.namespace, name))
			if release == nil {
				t.Fatal("no release function")
			}
			release()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("admitted, want %q", tc.want)
			case tc.want != "":
				if !apierrors.IsForbidden(err) || err.Error() != tc.want {
					t.Fatalf("error %v (forbidden: %t)\nwant %s", err, apierrors.IsForbidden(err), tc.want)
				}
			}
		})
	}
}

// TestProjectQuotasSerializeCreates: creates racing for the last places of a limit do not overshoot it.
func TestProjectQuotasSerializeCreates(t *testing.T) {
	ctx := context.Background()
	reg, coll := quotaGarden(t)
	q, err := admission.NewProjectQuotas([]componentconfig.QuotaConfiguration{{ProjectSelector: &kmetav1.LabelSelector{},
		Config: componentconfig.ResourceQuota{Spec: componentconfig.ResourceQuotaSpec{Hard: map[string]string{"count/secrets": "5"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			obj := &kcorev1.Secret{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: fmt.Sprintf("s%d", i)}}
			release, err := q.Admit(ctx, reg, secretsGR, obj)
			defer release()
			if err != nil {
				return
			}
			if _, err := coll(secretsGR).Create(ctx, obj); err != nil {
				t.Error(err)
				return
			}
			admitted.Add(1)
		})
	}
	wg.Wait()
	res, err := coll(secretsGR).List(ctx, "garden-dev", store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if admitted.Load() != 5 || len(res.Items) != 5 {
		t.Fatalf("%d admitted, %d stored; want 5", admitted.Load(), len(res.Items))
	}
}

func TestNewProjectQuotasRefusesBadConfiguration(t *testing.T) {
	for _, cfg := range []componentconfig.QuotaConfiguration{
		{Config: componentconfig.ResourceQuota{Spec: componentconfig.ResourceQuotaSpec{Hard: map[string]string{"count/secrets": "many"}}}},
		{ProjectSelector: &kmetav1.LabelSelector{MatchExpressions: []kmetav1.LabelSelectorRequirement{{Key: "tier", Operator: "Sometimes"}}},
			Config: componentconfig.ResourceQuota{Spec: componentconfig.ResourceQuotaSpec{Hard: map[string]string{"count/secrets": "1"}}}},
	} {
		if _, err := admission.NewProjectQuotas([]componentconfig.QuotaConfiguration{cfg}); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	q, err := admission.NewProjectQuotas(nil)
	if err != nil {
		t.Fatal(err)
	}
	if release, err := q.Admit(context.Background(), nil, secretsGR, &kcorev1.Secret{Metadata: &metav1.ObjectMeta{Namespace: "x", Name: "y"}}); err != nil {
		t.Fatal(err)
	} else {
		release()
	}
}

// FuzzProjectQuotas feeds the quota configuration (outside input: the operator's file) through NewProjectQuotas and
// Admit: no panic, and a refusal exactly when the configured limit applies to the 3 secrets of garden-dev and is
// below 4.
func FuzzProjectQuotas(f *testing.F) {
	reg, coll := quotaGarden(f)
	ctx := context.Background()
	for i := range 3 {
		if _, err := coll(secretsGR).Create(ctx, object(secretsGR, "garden-dev", fmt.Sprintf("s%d", i))); err != nil {
			f.Fatal(err)
		}
	}
	f.Add("count/secrets", "3", "tier", "free")
	f.Add("secrets", "4", "tier", "free")
	f.Add("count/secrets", "2.5", "", "")
	f.Add("count/secrets", "1Ki", "tier", "paid")
	f.Add("count/secrets", "-1", "tier", "free")
	f.Add("count/shoots.core.gardener.cloud", "0", "tier", "free")
	f.Add("count/secrets", "1e3", "bad key!", "x")
	f.Add("count/secrets", "", "tier", "free")
	f.Fuzz(func(t *testing.T, name, value, key, labelValue string) {
		sel := &kmetav1.LabelSelector{}
		if key != "" {
			sel.MatchLabels = map[string]string{key: labelValue}
		}
		q, err := admission.NewProjectQuotas([]componentconfig.QuotaConfiguration{{ProjectSelector: sel,
			Config: componentconfig.ResourceQuota{Spec: componentconfig.ResourceQuotaSpec{Hard: map[string]string{name: value}}}}})
		if err != nil {
			return
		}
		release, err := q.Admit(ctx, reg, secretsGR, &kcorev1.Secret{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "new"}})
		release()
		s, _ := kmetav1.LabelSelectorAsSelector(sel)
		limit := resource.MustParse(value)
		want := s.Matches(labels.Set{"tier": "free"}) && (name == "count/secrets" || name == "secrets") && limit.Cmp(resource.MustParse("4")) < 0
		if want != (err != nil) {
			t.Fatalf("hard %s=%s, selector %v: refused %v, want refused: %t", name, value, sel, err, want)
		}
		if err != nil && !apierrors.IsForbidden(err) {
			t.Fatalf("refusal %v is no Forbidden", err)
		}
	})
}
