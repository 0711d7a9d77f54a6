package admission_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/hub/admission"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

var quotasGR = schema.GroupResource{Group: "core.gardener.cloud", Resource: "quotas"}

// quotaProfile has a machine type "m" (2 CPUs, 1 GPU, 8Gi) without storage, "m-disk" (1 CPU, 4Gi) with a 50Gi premium
// disk, and the volume types "std" (standard) and "fast" (premium).
func quotaProfile() *corev1beta1.CloudProfile {
	return &corev1beta1.CloudProfile{Metadata: meta("local", ""), Spec: &corev1beta1.CloudProfileSpec{
		Type: "local",
		MachineTypes: []*corev1beta1.MachineType{
			{Name: "m", Cpu: "2", Gpu: "1", Memory: "8Gi"},
			{Name: "m-disk", Cpu: "1", Gpu: "0", Memory: "4Gi", Storage: &corev1beta1.MachineTypeStorage{Class: "premium", Size: ptr("50Gi"), Type: "disk"}},
		},
		VolumeTypes: []*corev1beta1.VolumeType{{Name: "std", Class: "standard"}, {Name: "fast", Class: "premium"}},
	}}
}

// quotaShoot is a shoot of namespace ns using the secret binding "sb" with one worker pool per worker.
func quotaShoot(ns, name string, workers ...*corev1beta1.Worker) *corev1beta1.Shoot {
	return &corev1beta1.Shoot{Metadata: meta(name, ns), Spec: &corev1beta1.ShootSpec{
		CloudProfileName: ptr("local"), SecretBindingName: ptr("sb"), Region: "local",
		Provider: &corev1beta1.Provider{Type: "local", Workers: workers},
	}}
}

func pool(name, machine string, maximum int32, volume *corev1beta1.Volume) *corev1beta1.Worker {
	return &corev1beta1.Worker{Name: name, Machine: &corev1beta1.Machine{Type: machine}, Minimum: ptr(int32(1)), Maximum: ptr(maximum), Volume: volume}
}

// quotaWorld is the quota "garden/q" (scope kind and metrics) referenced by the secret binding "sb" in garden-a and
// garden-b, with the shoots others, and a ControllerRegistration of the provider type local.
func quotaWorld(scope string, metrics map[string]string, lifetimeDays *int32, others ...*corev1beta1.Shoot) exampleReader {
	apiVersion := map[string]string{"Project": "core.gardener.cloud/v1beta1", "Secret": "v1"}[scope]
	q := &corev1beta1.Quota{Metadata: meta("q", "garden"), Spec: &corev1beta1.QuotaSpec{
		Scope: &metav1.ObjectReference{ApiVersion: apiVersion, Kind: scope}, Metrics: metrics, ClusterLifetimeDays: lifetimeDays,
	}}
	ref := []*metav1.ObjectReference{{Namespace: "garden", Name: "q"}}
	r := exampleReader{
		{gr: profilesGR, obj: quotaProfile()},
		{gr: controllerRegistrationsGR, obj: &corev1beta1.ControllerRegistration{Metadata: meta("provider-local", ""), Spec: &corev1beta1.ControllerRegistrationSpec{
			Resources: []*corev1beta1.ControllerResource{{Kind: "ControlPlane", Type: "local"}, {Kind: "Infrastructure", Type: "local"}, {Kind: "Worker", Type: "local"}},
		}}},
		{gr: quotasGR, obj: q},
		{gr: bindingsGR, obj: &corev1beta1.SecretBinding{Metadata: meta("sb", "garden-a"), Quotas: ref}},
		{gr: bindingsGR, obj: &corev1beta1.SecretBinding{Metadata: meta("sb", "garden-b"), Quotas: ref}},
		{gr: credBindingsGR, obj: &securityv1alpha1.CredentialsBinding{Metadata: meta("cb", "garden-a"), Quotas: ref}},
		// A binding without the quota: its shoots do not count.
		{gr: bindingsGR, obj: &corev1beta1.SecretBinding{Metadata: meta("free", "garden-a")}},
	}
	for _, s := range others {
		plugins.For(s).Default(s)
		r = append(r, example{gr: shootsGR, obj: s})
	}
	return r
}

// admitQuota runs the shoot plugin's Admit (Gardener's ShootQuotaValidator) on obj, defaulted as the server does.
func admitQuota(t *testing.T, r admission.Reader, obj, old *corev1beta1.Shoot) error {
	t.Helper()
	p := plugins.For(obj)
	if p.Admit == nil {
		t.Fatal("the Shoot plugin has no Admit")
	}
	p.Default(obj)
	if old == nil {
		return p.Admit(context.Background(), r, obj, nil)
	}
	p.Default(old)
	return p.Admit(context.Background(), r, obj, old)
}

// quotaCase is one row: obj (old nil on create) admitted in r must be refused with 403 naming every string of want,
// or pass when want is empty.
type quotaCase struct {
	name     string
	r        exampleReader
	obj, old *corev1beta1.Shoot
	want     []string
}

func runQuotaCases(t *testing.T, cases []quotaCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := admitQuota(t, c.r, c.obj, c.old)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) {
				t.Fatalf("want 403 Forbidden, got %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err.Error(), w)
				}
			}
		})
	}
}

// TestShootQuotaMetrics: per metric, the shoot's usage (maximum × the machine type's resources or volume size) plus
// the other shoots of the quota must stay within the limit; the refusal names the metric, the quota, its limit and
// the usage.
func TestShootQuotaMetrics(t *testing.T) {
	// The other shoot of the quota in garden-a: one pool of 2 × m (4 CPUs, 2 GPUs, 16Gi) with 10Gi standard volumes.
	other := quotaShoot("garden-a", "other", pool("w", "m", 2, &corev1beta1.Volume{Type: ptr("std"), Size: "10Gi"}))
	// The new shoot: 3 × m (6 CPUs, 3 GPUs, 24Gi) with 20Gi standard volumes and 2 × m-disk (2 CPUs, 8Gi, 100Gi premium).
	shoot := func() *corev1beta1.Shoot {
		return quotaShoot("garden-a", "new", pool("a", "m", 3, &corev1beta1.Volume{Type: ptr("std"), Size: "20Gi"}), pool("b", "m-disk", 2, nil))
	}
	world := func(metric, limit string) exampleReader {
		return quotaWorld("Project", map[string]string{metric: limit}, nil, clone(other))
	}
	var cases []quotaCase
	for _, m := range []struct{ metric, fits, over, used, needs string }{
		{"cpu", "12", "11", "4", "8"},
		{"gpu", "5", "4900m", "2", "3"},
		{"memory", "48Gi", "47Gi", "16Gi", "32Gi"},
		{"storage.standard", "80Gi", "79Gi", "20Gi", "60Gi"},
		{"storage.premium", "100Gi", "99Gi", "0", "100Gi"},
		{"loadbalancer", "2", "1", "1", "1"},
	} {
		cases = append(cases,
			quotaCase{name: m.metric + " within", r: world(m.metric, m.fits), obj: shoot()},
			quotaCase{name: m.metric + " exceeded", r: world(m.metric, m.over), obj: shoot(), want: []string{
				"quota limits exceeded. Unable to allocate further " + m.metric + " (quota garden/q limits it to " + m.over + ": " + m.used + " in use, the shoot needs " + m.needs + ")"}})
	}
	withIngress := shoot()
	withIngress.Spec.Addons = &corev1beta1.Addons{NginxIngress: &corev1beta1.NginxIngress{Enabled: ptr(true)}}
	cases = append(cases,
		quotaCase{name: "loadbalancer with nginx-ingress", r: world("loadbalancer", "2"), obj: withIngress, want: []string{"loadbalancer (quota garden/q limits it to 2: 1 in use, the shoot needs 2)"}},
		quotaCase{name: "premium volume type", r: world("storage.premium", "10Gi"),
			obj:  quotaShoot("garden-a", "new", pool("a", "m", 1, &corev1beta1.Volume{Type: ptr("fast"), Size: "11Gi"})),
			want: []string{"storage.premium (quota garden/q limits it to 10Gi: 0 in use, the shoot needs 11Gi)"}},
		quotaCase{name: "several metrics", r: quotaWorld("Project", map[string]string{"cpu": "1", "memory": "1Ti", "gpu": "1"}, nil, clone(other)), obj: shoot(),
			want: []string{"further cpu (quota garden/q", ", gpu (quota garden/q"}},
	)
	runQuotaCases(t, cases)
}

// TestShootQuotaScope: a Project quota counts the shoots of the shoot's namespace, a credentials quota those of all
// namespaces; shoots of a binding without the quota never count, and shoots using a credentials binding with it do.
func TestShootQuotaScope(t *testing.T) {
	inB := quotaShoot("garden-b", "b", pool("w", "m", 4, nil))
	free := quotaShoot("garden-a", "free", pool("w", "m", 4, nil))
	free.Spec.SecretBindingName = ptr("free")
	viaCredentials := quotaShoot("garden-a", "cred", pool("w", "m", 4, nil))
	viaCredentials.Spec.SecretBindingName = nil
	viaCredentials.Spec.CredentialsBindingName = ptr("cb")
	newShoot := func() *corev1beta1.Shoot { return quotaShoot("garden-a", "new", pool("w", "m", 2, nil)) }
	limit := map[string]string{"cpu": "8"} // the new shoot needs 4
	runQuotaCases(t, []quotaCase{
		{name: "project scope ignores other namespaces", r: quotaWorld("Project", limit, nil, clone(inB)), obj: newShoot()},
		{name: "credentials scope counts all namespaces", r: quotaWorld("Secret", limit, nil, clone(inB)), obj: newShoot(), want: []string{"cpu (quota garden/q limits it to 8: 8 in use, the shoot needs 4)"}},
		{name: "binding without the quota", r: quotaWorld("Project", limit, nil, clone(free)), obj: newShoot()},
		{name: "shoot of a credentials binding with the quota", r: quotaWorld("Project", limit, nil, clone(viaCredentials)), obj: newShoot(), want: []string{"cpu (quota garden/q limits it to 8: 8 in use"}},
		{name: "the shoot's own stored version does not count", r: quotaWorld("Project", limit, nil, quotaShoot("garden-a", "new", pool("w", "m", 4, nil))), obj: newShoot()},
	})
	// A shoot through its credentials binding is limited by the binding's quotas.
	cred := newShoot()
	cred.Spec.SecretBindingName = nil
	cred.Spec.CredentialsBindingName = ptr("cb")
	runQuotaCases(t, []quotaCase{{name: "credentials binding's quotas", r: quotaWorld("Project", map[string]string{"cpu": "3"}, nil), obj: cred, want: []string{"cpu (quota garden/q limits it to 3"}}})
}

// TestShootQuotaUpdates: an update is checked only when it may raise usage (a new pool, a larger maximum, another
// machine type or volume, nginx-ingress enabled); one that does not passes even beyond the quota.
func TestShootQuotaUpdates(t *testing.T) {
	r := quotaWorld("Project", map[string]string{"cpu": "4", "loadbalancer": "1"}, nil)
	old := quotaShoot("garden-a", "s", pool("w", "m", 3, nil)) // 6 CPUs: beyond the quota already
	raise := func(f func(s *corev1beta1.Shoot)) *corev1beta1.Shoot { return with(old, f) }
	runQuotaCases(t, []quotaCase{
		{name: "labels only", r: r, old: clone(old), obj: raise(func(s *corev1beta1.Shoot) { s.Metadata.Labels = map[string]string{"a": "b"} })},
		{name: "smaller maximum", r: r, old: clone(old), obj: raise(func(s *corev1beta1.Shoot) { s.Spec.Provider.Workers[0].Maximum = ptr(int32(2)) })},
		{name: "larger maximum", r: r, old: clone(old), obj: raise(func(s *corev1beta1.Shoot) { s.Spec.Provider.Workers[0].Maximum = ptr(int32(4)) }), want: []string{"cpu"}},
		{name: "new pool", r: r, old: clone(old), obj: raise(func(s *corev1beta1.Shoot) {
			s.Spec.Provider.Workers = append(s.Spec.Provider.Workers, pool("x", "m", 1, nil))
		}), want: []string{"cpu"}},
		{name: "other machine type", r: r, old: clone(old), obj: raise(func(s *corev1beta1.Shoot) { s.Spec.Provider.Workers[0].Machine.Type = "m-disk" })},
		{name: "volume added", r: r, old: clone(old), obj: raise(func(s *corev1beta1.Shoot) {
			s.Spec.Provider.Workers[0].Volume = &corev1beta1.Volume{Type: ptr("std"), Size: "1Gi"}
		}), want: []string{"cpu"}},
		{name: "nginx-ingress enabled", r: r, old: clone(old), obj: raise(func(s *corev1beta1.Shoot) {
			s.Spec.Addons = &corev1beta1.Addons{NginxIngress: &corev1beta1.NginxIngress{Enabled: ptr(true)}}
		}), want: []string{"loadbalancer (quota garden/q limits it to 1: 0 in use, the shoot needs 2)"}},
		{name: "being deleted", r: r, obj: raise(func(s *corev1beta1.Shoot) { s.Metadata.DeletionTimestamp = timestamppb.Now() })},
	})
	// A write through a subresource (binding) is not checked.
	bigger := raise(func(s *corev1beta1.Shoot) { s.Spec.Provider.Workers[0].Maximum = ptr(int32(4)) })
	if err := plugins.For(bigger).Admit(admission.WithSubresource(context.Background(), "binding"), r, bigger, clone(old)); err != nil {
		t.Errorf("through the binding subresource: %v", err)
	}
	// Without quotas nothing is checked, and a machine type the cloud profile lacks is a server error, not a pass.
	none := quotaShoot("garden-a", "s", pool("w", "m", 100, nil))
	none.Spec.SecretBindingName = ptr("free")
	if err := admitQuota(t, r, none, nil); err != nil {
		t.Errorf("binding without quotas: %v", err)
	}
	if err := admitQuota(t, r, quotaShoot("garden-a", "s", pool("w", "nope", 1, nil)), nil); !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), `machine type "nope" not found`) {
		t.Errorf("unknown machine type: %v", err)
	}
}

// TestShootQuotaLifetime: a changed expiration annotation may lie at most the smallest clusterLifetimeDays from now.
func TestShootQuotaLifetime(t *testing.T) {
	r := quotaWorld("Project", nil, ptr(int32(7)))
	old := quotaShoot("garden-a", "s", pool("w", "m", 1, nil))
	now := time.Now()
	expiring := func(d time.Duration) *corev1beta1.Shoot {
		return with(old, func(s *corev1beta1.Shoot) {
			s.Metadata.Annotations = map[string]string{admission.AnnotationShootExpirationTimestamp: now.Add(d).UTC().Format(time.RFC3339)}
		})
	}
	runQuotaCases(t, []quotaCase{
		{name: "within the lifetime", r: r, old: clone(old), obj: expiring(6 * 24 * time.Hour)},
		{name: "beyond the lifetime", r: r, old: clone(old), obj: expiring(8 * 24 * time.Hour), want: []string{"requested shoot expiration time is too long. Can only be extended by 7 day(s)"}},
		{name: "unchanged annotation", r: r, old: expiring(30 * 24 * time.Hour), obj: expiring(30 * 24 * time.Hour)},
	})
	bad := with(old, func(s *corev1beta1.Shoot) {
		s.Metadata.Annotations = map[string]string{admission.AnnotationShootExpirationTimestamp: "tomorrow"}
	})
	if err := admitQuota(t, r, bad, clone(old)); !apierrors.IsBadRequest(err) {
		t.Errorf("unparsable expiration: want 400, got %v", err)
	}
}
