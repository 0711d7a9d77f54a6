package controllerregistration

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/store"
	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// BenchmarkSeedReconcile measures one reconciliation of a seed that has its installation already (the steady
// state: a shoot changed, nothing to write), for seeds holding 10, 100 and 1,000 of the garden's shoots, on the
// hub's real store and collections (embedded etcd, watch cache).
//
//	go test -run '^$' -bench SeedReconcile ./hub/controller/controllerregistration/
func BenchmarkSeedReconcile(b *testing.B) {
	for _, perSeed := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("shoots=%d", perSeed), func(b *testing.B) {
			ctx := context.Background()
			c, err := openCollections(controllertest.NewRegistry(b))
			if err != nil {
				b.Fatal(err)
			}
			create := func(col *store.Collection, obj store.Object) { controllertest.Create(b, col, obj) }
			create(c.deployments, &corev1.ControllerDeployment{Metadata: &metav1.ObjectMeta{Name: "provider-aws"},
				Helm: &corev1.HelmControllerDeployment{RawChart: []byte("chart")}})
			create(c.registrations, &corev1beta1.ControllerRegistration{Metadata: &metav1.ObjectMeta{Name: "provider-aws"},
				Spec: &corev1beta1.ControllerRegistrationSpec{
					Resources: []*corev1beta1.ControllerResource{{Kind: KindInfrastructure, Type: "aws"}, {Kind: KindWorker, Type: "aws"},
						{Kind: KindControlPlane, Type: "aws"}, {Kind: KindOperatingSystemConfig, Type: "gardenlinux"}},
					Deployment: &corev1beta1.ControllerRegistrationDeployment{DeploymentRefs: []*corev1beta1.DeploymentRef{{Name: "provider-aws"}}}}})
			// Ten seeds share the garden's shoots; the one measured holds perSeed of them.
			for s := range 10 {
				create(c.seeds, &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: fmt.Sprintf("seed-%d", s)},
					Spec: &corev1beta1.SeedSpec{Provider: &corev1beta1.SeedProvider{Type: "aws", Region: "eu"}}})
				for i := range perSeed {
					create(c.shoots, &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: fmt.Sprintf("s%d-%d", s, i)},
						Spec: &corev1beta1.ShootSpec{SeedName: proto.String(fmt.Sprintf("seed-%d", s)), Region: "eu",
							Provider: &corev1beta1.Provider{Type: "aws", Workers: []*corev1beta1.Worker{{Name: "pool",
								Machine: &corev1beta1.Machine{Type: "m5", Image: &corev1beta1.ShootMachineImage{Name: "gardenlinux"}}}}},
							Extensions: []*corev1beta1.Extension{{Type: "shoot-dns-service", Disabled: proto.Bool(true)}}}})
				}
			}
			r := &seedReconciler{c: c, log: slog.New(slog.DiscardHandler), missing: map[string]string{}}
			key := controller.Key{Name: "seed-0"}
			if _, err := r.Reconcile(ctx, key); err != nil { // creates the installation
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := r.Reconcile(ctx, key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
