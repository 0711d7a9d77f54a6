package controllerregistration

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/sets"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func TestWantedRegistrations(t *testing.T) {
	withPolicy := func(cr *corev1beta1.ControllerRegistration, policy string) *corev1beta1.ControllerRegistration {
		cr.Spec.Deployment = &corev1beta1.ControllerRegistrationDeployment{Policy: proto.String(policy)}
		return cr
	}
	deleting := func(cr *corev1beta1.ControllerRegistration) *corev1beta1.ControllerRegistration {
		cr.Metadata.DeletionTimestamp = timestamppb.Now()
		return cr
	}
	installation := func(reg, required string) *corev1beta1.ControllerInstallation {
		ci := &corev1beta1.ControllerInstallation{Metadata: &metav1.ObjectMeta{Name: reg + "-abcde"},
			Spec: &corev1beta1.ControllerInstallationSpec{RegistrationRef: &metav1.ObjectReference{Name: reg}}}
		if required != "" {
			ci.Status = &corev1beta1.ControllerInstallationStatus{Conditions: []*metav1.Condition{{Type: ConditionRequired, Status: required}}}
		}
		return ci
	}
	res := func(kind, typ string) *corev1beta1.ControllerResource {
		return &corev1beta1.ControllerResource{Kind: kind, Type: typ}
	}
	for _, tc := range []struct {
		name          string
		seed          *corev1beta1.Seed
		regs          []*corev1beta1.ControllerRegistration
		installations []*corev1beta1.ControllerInstallation
		pairs         []string
		shoots        int
		want, missing []string
	}{
		{name: "on demand: by kind/type, primary and secondary alike",
			regs:  []*corev1beta1.ControllerRegistration{registration("aws", res("Infrastructure", "aws")), registration("aws-extra", res("Infrastructure", "aws")), registration("gcp", res("Infrastructure", "gcp"))},
			pairs: []string{"Infrastructure/aws"}, want: []string{"aws", "aws-extra"}},
		{name: "a needed kind/type nobody provides is reported",
			regs:  []*corev1beta1.ControllerRegistration{registration("aws", res("Infrastructure", "aws"))},
			pairs: []string{"Infrastructure/aws", "Network/cilium"}, want: []string{"aws"}, missing: []string{"Network/cilium"}},
		{name: "Always, also without shoots",
			regs: []*corev1beta1.ControllerRegistration{withPolicy(registration("a", res("Extension", "a")), PolicyAlways)}, want: []string{"a"}},
		{name: "Always, but not on a seed being deleted",
			seed: testSeed(func(s *corev1beta1.Seed) { s.Metadata.DeletionTimestamp = timestamppb.Now() }),
			regs: []*corev1beta1.ControllerRegistration{withPolicy(registration("a", res("Extension", "a")), PolicyAlways)}},
		{name: "AlwaysExceptNoShoots without shoots",
			regs: []*corev1beta1.ControllerRegistration{withPolicy(registration("a", res("Extension", "a")), PolicyAlwaysExceptNoShoots)}},
		{name: "AlwaysExceptNoShoots with a shoot", shoots: 1,
			regs: []*corev1beta1.ControllerRegistration{withPolicy(registration("a", res("Extension", "a")), PolicyAlwaysExceptNoShoots)}, want: []string{"a"}},
		{name: "a registration being deleted is not wanted by its policy",
			regs: []*corev1beta1.ControllerRegistration{deleting(withPolicy(registration("a", res("Extension", "a")), PolicyAlways))}},
		{name: "installed and Required stays wanted",
			regs:          []*corev1beta1.ControllerRegistration{registration("a", res("Extension", "a")), registration("b", res("Extension", "b"))},
			installations: []*corev1beta1.ControllerInstallation{installation("a", "True"), installation("b", "False")}, want: []string{"a"}},
		{name: "seed selector filters everything",
			regs: []*corev1beta1.ControllerRegistration{func() *corev1beta1.ControllerRegistration {
				cr := withPolicy(registration("a", res("Extension", "a")), PolicyAlways)
				cr.Spec.Deployment.SeedSelector = &metav1.LabelSelector{MatchExpressions: []*metav1.LabelSelectorRequirement{{Key: "env", Operator: "In", Values: []string{"prod"}}}}
				return cr
			}()},
			installations: []*corev1beta1.ControllerInstallation{installation("a", "True")}, pairs: []string{"Extension/a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &seedInput{seed: tc.seed, registrations: map[string]*corev1beta1.ControllerRegistration{},
				installations: map[string]*corev1beta1.ControllerInstallation{}, pairs: sets.New(tc.pairs...), shoots: tc.shoots}
			if in.seed == nil {
				in.seed = testSeed()
			}
			for _, cr := range tc.regs {
				in.registrations[cr.GetMetadata().GetName()] = cr
			}
			for _, ci := range tc.installations {
				in.installations[ci.GetSpec().GetRegistrationRef().GetName()] = ci
			}
			wanted, missing := in.wantedRegistrations()
			if got := sets.List(wanted); !slices.Equal(got, tc.want) {
				t.Errorf("wanted %v, want %v", got, tc.want)
			}
			if !slices.Equal(missing, tc.missing) {
				t.Errorf("missing %v, want %v", missing, tc.missing)
			}
		})
	}
}
