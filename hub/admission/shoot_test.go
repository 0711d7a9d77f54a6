package admission_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trellis-dev/trellis/hub/admission"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

var seedsGR = schema.GroupResource{Group: "core.gardener.cloud", Resource: "seeds"}

// shootGarden is Gardener's examples (project, cloud profile, bindings, the shoot crazy-botany) and seeds: a and b
// with backup, plain without, leaving being deleted.
func shootGarden(t testing.TB) (exampleReader, *corev1beta1.Shoot) {
	t.Helper()
	all := examples(t)
	seed := func(name string, backup bool, deleting bool) example {
		s := &corev1beta1.Seed{Metadata: meta(name, ""), Spec: &corev1beta1.SeedSpec{Provider: &corev1beta1.SeedProvider{Type: "local", Region: "local"}}}
		if backup {
			s.Spec.Backup = &corev1beta1.Backup{Provider: "local"}
		}
		if deleting {
			s.Metadata.DeletionTimestamp = timestamppb.New(time.Now())
		}
		return example{name: "seed " + name, gr: seedsGR, obj: s}
	}
	all = append(all, seed("a", true, false), seed("b", true, false), seed("plain", false, false), seed("leaving", true, true))
	shoot := examplesOf(t, &corev1beta1.Shoot{})[0].(*corev1beta1.Shoot)
	shoot.Spec.SeedName = nil
	return exampleReader(all), shoot
}

// admitShoot defaults obj (and old) and validates it as a write through sub ("" or "binding") would.
func admitShoot(t *testing.T, r admission.Reader, sub string, obj, old *corev1beta1.Shoot) field.ErrorList {
	t.Helper()
	p := plugins.For(obj)
	p.Default(obj)
	ctx := context.Background()
	if sub != "" {
		ctx = admission.WithSubresource(ctx, sub)
	}
	if old == nil {
		return p.Validate(ctx, r, obj, nil)
	}
	p.Default(old)
	return p.Validate(ctx, r, obj, old)
}

func onSeed(s *corev1beta1.Shoot, spec, status string) *corev1beta1.Shoot {
	s = clone(s)
	s.Spec.SeedName = nil
	if spec != "" {
		s.Spec.SeedName = ptr(spec)
	}
	if status != "" {
		s.Status = &corev1beta1.ShootStatus{SeedName: ptr(status)}
	}
	return s
}

func withOp(s *corev1beta1.Shoot, typ, state string) *corev1beta1.Shoot {
	s = clone(s)
	if s.Status == nil {
		s.Status = &corev1beta1.ShootStatus{}
	}
	s.Status.LastOperation = &metav1.LastOperation{Type: typ, State: state}
	return s
}

func TestShootSeedName(t *testing.T) {
	r, base := shootGarden(t)
	workers := func(s *corev1beta1.Shoot) *corev1beta1.Shoot {
		return with(s, func(s *corev1beta1.Shoot) {
			s.Spec.Provider.Workers[0].Maximum = ptr(*s.Spec.Provider.Workers[0].Maximum + 1)
		})
	}
	labelled := func(s *corev1beta1.Shoot) *corev1beta1.Shoot {
		return with(s, func(s *corev1beta1.Shoot) { s.Metadata.Labels = map[string]string{"x": "y"} })
	}
	for _, tc := range []struct {
		name     string
		sub      string
		obj, old *corev1beta1.Shoot
		paths    []string
	}{
		{name: "create unscheduled", obj: onSeed(base, "", "")},
		{name: "create on a seed", obj: onSeed(base, "a", "")},
		{name: "create on a seed that does not exist", obj: onSeed(base, "nope", ""), paths: []string{"spec.seedName"}},
		{name: "create on a seed being deleted", obj: onSeed(base, "leaving", ""), paths: []string{"spec.seedName"}},
		{name: "schedule by update", obj: onSeed(base, "a", ""), old: onSeed(base, "", "")},
		{name: "schedule by binding", sub: "binding", obj: onSeed(base, "plain", ""), old: onSeed(base, "", "")},
		{name: "schedule on a seed that does not exist", obj: onSeed(base, "nope", ""), old: onSeed(base, "", ""), paths: []string{"spec.seedName"}},
		{name: "schedule on a seed being deleted", sub: "binding", obj: onSeed(base, "leaving", ""), old: onSeed(base, "", ""), paths: []string{"spec.seedName"}},
		{name: "move by update", obj: onSeed(base, "b", "a"), old: onSeed(base, "a", "a"), paths: []string{"spec.seedName"}},
		{name: "move by patch along with other changes", obj: workers(onSeed(base, "b", "a")), old: onSeed(base, "a", "a"), paths: []string{"spec.seedName"}},
		{name: "migrate by binding", sub: "binding", obj: onSeed(base, "b", "a"), old: onSeed(base, "a", "a")},
		{name: "migrate off a seed that no longer exists", sub: "binding", obj: onSeed(base, "b", "gone"), old: onSeed(base, "gone", "gone")},
		{name: "migrate to a seed that does not exist", sub: "binding", obj: onSeed(base, "nope", "a"), old: onSeed(base, "a", "a"), paths: []string{"spec.seedName"}},
		{name: "migrate to a seed without backup", sub: "binding", obj: onSeed(base, "plain", "a"), old: onSeed(base, "a", "a"), paths: []string{"spec.seedName"}},
		{name: "migrate off a seed without backup", sub: "binding", obj: onSeed(base, "a", "plain"), old: onSeed(base, "plain", "plain"), paths: []string{"spec.seedName"}},
		{name: "binding to the same seed", sub: "binding", obj: onSeed(base, "a", "a"), old: onSeed(base, "a", "a"), paths: []string{"spec.seedName"}},
		{name: "unset by update", obj: onSeed(base, "", "a"), old: onSeed(base, "a", "a"), paths: []string{"spec.seedName"}},
		{name: "unset by binding", sub: "binding", obj: onSeed(base, "", "a"), old: onSeed(base, "a", "a"), paths: []string{"spec.seedName"}},
		// During a migration the spec is frozen, metadata is not (the agents' finalizers), and bindings pass.
		{name: "spec change of a shoot bound elsewhere", obj: workers(withOp(onSeed(base, "b", "a"), "Reconcile", "Succeeded")),
			old: withOp(onSeed(base, "b", "a"), "Reconcile", "Succeeded"), paths: []string{"spec"}},
		{name: "spec change while migrating", obj: workers(withOp(onSeed(base, "b", ""), "Migrate", "Succeeded")),
			old: withOp(onSeed(base, "b", ""), "Migrate", "Succeeded"), paths: []string{"spec"}},
		{name: "spec change while restoring", obj: workers(withOp(onSeed(base, "b", "b"), "Restore", "Processing")),
			old: withOp(onSeed(base, "b", "b"), "Restore", "Processing"), paths: []string{"spec"}},
		{name: "spec change once restored", obj: workers(withOp(onSeed(base, "b", "b"), "Restore", "Succeeded")),
			old: withOp(onSeed(base, "b", "b"), "Restore", "Succeeded")},
		{name: "metadata change while migrating", obj: labelled(withOp(onSeed(base, "b", "a"), "Migrate", "Processing")),
			old: withOp(onSeed(base, "b", "a"), "Migrate", "Processing")},
		{name: "first scheduling is no migration", obj: workers(withOp(onSeed(base, "a", ""), "Create", "Processing")),
			old: withOp(onSeed(base, "a", ""), "Create", "Processing")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := admitShoot(t, r, tc.sub, tc.obj, tc.old)
			if got := errorPaths(errs); !slices.Equal(got, sorted(tc.paths)) {
				t.Errorf("error paths:\n got  %q\n want %q\nerrors: %v", got, sorted(tc.paths), errs)
			}
		})
	}
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	slices.Sort(out)
	return out
}

func TestShootUpdateRules(t *testing.T) {
	r, base := shootGarden(t)
	base = onSeed(base, "a", "a")
	deleting := with(base, func(s *corev1beta1.Shoot) { s.Metadata.DeletionTimestamp = timestamppb.New(time.Now()) })
	secretBound := with(base, func(s *corev1beta1.Shoot) {
		s.Spec.CredentialsBindingName, s.Spec.SecretBindingName = nil, ptr("my-provider-account")
	})
	// Without the credentials binding, which was deleted after the shoot was created.
	bindingGone := exampleReader(slices.DeleteFunc(slices.Clone(r), func(e example) bool {
		return e.gr.Resource == "credentialsbindings"
	}))
	for _, tc := range []struct {
		name     string
		r        admission.Reader
		obj, old *corev1beta1.Shoot
		paths    []string
	}{
		{name: "metadata of a deleting shoot", obj: with(deleting, func(s *corev1beta1.Shoot) { s.Metadata.Finalizers = nil }), old: deleting},
		{name: "spec of a deleting shoot", obj: with(deleting, func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{Enabled: ptr(true)} }),
			old: deleting, paths: []string{"spec"}},
		{name: "metadata while a reference is gone", r: bindingGone, obj: with(base, func(s *corev1beta1.Shoot) { s.Metadata.Finalizers = []string{"gardener"} }), old: base},
		{name: "spec while a reference is gone", r: bindingGone, obj: with(base, func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{Enabled: ptr(true)} }),
			old: base, paths: []string{"spec.credentialsBindingName"}},
		{name: "another credentials binding", obj: with(base, func(s *corev1beta1.Shoot) { s.Spec.CredentialsBindingName = ptr("nope") }), old: base,
			paths: []string{"spec.credentialsBindingName"}}, // may change, but must exist
		{name: "credentials binding unset", obj: with(base, func(s *corev1beta1.Shoot) {
			s.Spec.CredentialsBindingName, s.Spec.SecretBindingName = nil, ptr("my-provider-account")
		}), old: base, paths: []string{"spec.credentialsBindingName", "spec.secretBindingName"}},
		{name: "secret binding changed", obj: with(secretBound, func(s *corev1beta1.Shoot) { s.Spec.SecretBindingName = ptr("other") }), old: secretBound,
			paths: []string{"spec.secretBindingName"}},
		{name: "secret binding replaced by a credentials binding", obj: base, old: secretBound},
		{name: "secret binding removed without a credentials binding", obj: with(secretBound, func(s *corev1beta1.Shoot) { s.Spec.SecretBindingName = nil }),
			old: secretBound, paths: []string{"spec.secretBindingName"}},
		{name: "exposure class changed", obj: with(base, func(s *corev1beta1.Shoot) { s.Spec.ExposureClassName = ptr("x") }), old: base,
			paths: []string{"spec.exposureClassName"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := tc.r
			if rd == nil {
				rd = r
			}
			errs := admitShoot(t, rd, "", tc.obj, tc.old)
			if got := errorPaths(errs); !slices.Equal(got, sorted(tc.paths)) {
				t.Errorf("error paths:\n got  %q\n want %q\nerrors: %v", got, sorted(tc.paths), errs)
			}
		})
	}
}
