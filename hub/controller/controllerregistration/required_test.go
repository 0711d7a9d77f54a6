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

func testSeed(mutate ...func(*corev1beta1.Seed)) *corev1beta1.Seed {
	s := &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: "seed-1"},
		Spec: &corev1beta1.SeedSpec{Provider: &corev1beta1.SeedProvider{Type: "seedprov", Region: "r"}}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func testShoot(mutate ...func(*corev1beta1.Shoot)) *corev1beta1.Shoot {
	s := &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "s"},
		Spec: &corev1beta1.ShootSpec{Provider: &corev1beta1.Provider{Type: "aws", Workers: []*corev1beta1.Worker{{Name: "pool"}}}}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func registration(name string, resources ...*corev1beta1.ControllerResource) *corev1beta1.ControllerRegistration {
	return &corev1beta1.ControllerRegistration{Metadata: &metav1.ObjectMeta{Name: name},
		Spec: &corev1beta1.ControllerRegistrationSpec{Resources: resources}}
}

func extensionResource(typ string, autoEnable []string, workerless bool) *corev1beta1.ControllerResource {
	return &corev1beta1.ControllerResource{Kind: KindExtension, Type: typ, AutoEnable: autoEnable, WorkerlessSupported: proto.Bool(workerless)}
}

// shootBase is what every shoot with workers on testSeed needs: its provider's ControlPlane, Infrastructure and
// Worker and the seed provider's ControlPlane.
var shootBase = []string{"ControlPlane/aws", "ControlPlane/seedprov", "Infrastructure/aws", "Worker/aws"}

func TestForShoot(t *testing.T) {
	autoShoot := registration("auto", extensionResource("shoot-auto", []string{"shoot"}, false))
	autoWorkerless := registration("auto-wl", extensionResource("shoot-auto-wl", []string{"shoot"}, true))
	autoSeedOnly := registration("auto-seed", extensionResource("seed-auto", []string{"seed"}, false))
	regs := []*corev1beta1.ControllerRegistration{autoShoot, autoWorkerless, autoSeedOnly}
	for _, tc := range []struct {
		name  string
		shoot *corev1beta1.Shoot
		seed  *corev1beta1.Seed
		want  []string // besides shootBase unless workerless
		base  bool
	}{
		{name: "provider of shoot and seed", shoot: testShoot(), seed: testSeed(), base: true,
			want: []string{"Extension/shoot-auto", "Extension/shoot-auto-wl"}},
		{name: "seed backup: bucket and entry", shoot: testShoot(), seed: testSeed(func(s *corev1beta1.Seed) {
			s.Spec.Backup = &corev1beta1.Backup{Provider: "gcs"}
		}), base: true, want: []string{"BackupBucket/gcs", "BackupEntry/gcs", "Extension/shoot-auto", "Extension/shoot-auto-wl"}},
		{name: "networking", shoot: testShoot(func(s *corev1beta1.Shoot) {
			s.Spec.Networking = &corev1beta1.Networking{Type: proto.String("calico")}
		}), seed: testSeed(), base: true, want: []string{"Extension/shoot-auto", "Extension/shoot-auto-wl", "Network/calico"}},
		{name: "listed, disabled and auto-enabled extensions", shoot: testShoot(func(s *corev1beta1.Shoot) {
			s.Spec.Extensions = []*corev1beta1.Extension{{Type: "shoot-cert"}, {Type: "shoot-auto", Disabled: proto.Bool(true)}, {Type: "off", Disabled: proto.Bool(true)}}
		}), seed: testSeed(), base: true, want: []string{"Extension/shoot-auto-wl", "Extension/shoot-cert"}},
		{name: "machine images and container runtimes", shoot: testShoot(func(s *corev1beta1.Shoot) {
			s.Spec.Provider.Workers = []*corev1beta1.Worker{
				{Name: "a", Machine: &corev1beta1.Machine{Image: &corev1beta1.ShootMachineImage{Name: "gardenlinux"}},
					Cri: &corev1beta1.CRI{Name: "containerd", ContainerRuntimes: []*corev1beta1.ContainerRuntime{{Type: "gvisor"}}}},
				{Name: "b", Machine: &corev1beta1.Machine{Image: &corev1beta1.ShootMachineImage{Name: "suse-chost"}}},
			}
		}), seed: testSeed(), base: true,
			want: []string{"ContainerRuntime/gvisor", "Extension/shoot-auto", "Extension/shoot-auto-wl", "OperatingSystemConfig/gardenlinux", "OperatingSystemConfig/suse-chost"}},
		{name: "primary DNS providers, unmanaged skipped", shoot: testShoot(func(s *corev1beta1.Shoot) {
			s.Spec.Dns = &corev1beta1.DNS{Providers: []*corev1beta1.DNSProvider{
				{Type: proto.String("aws-route53"), Primary: proto.Bool(true)},
				{Type: proto.String("azure-dns")}, // not primary
				{Type: proto.String("unmanaged"), Primary: proto.Bool(true)},
			}}
		}), seed: testSeed(), base: true, want: []string{"DNSRecord/aws-route53", "Extension/shoot-auto", "Extension/shoot-auto-wl"}},
		{name: "internal domain of the seed", shoot: testShoot(), seed: testSeed(func(s *corev1beta1.Seed) {
			s.Spec.Dns = &corev1beta1.SeedDNS{Internal: &corev1beta1.SeedDNSProviderConfig{Type: "cloudflare", Domain: "internal.example.com"}}
		}), base: true, want: []string{"DNSRecord/cloudflare", "Extension/shoot-auto", "Extension/shoot-auto-wl"}},
		{name: "external domain from a seed default domain", shoot: testShoot(func(s *corev1beta1.Shoot) {
			s.Spec.Dns = &corev1beta1.DNS{Domain: proto.String("s.dev.example.org")}
		}), seed: testSeed(func(s *corev1beta1.Seed) {
			s.Spec.Dns = &corev1beta1.SeedDNS{Defaults: []*corev1beta1.SeedDNSProviderConfig{
				{Type: "other", Domain: "example.com"}, {Type: "google-clouddns", Domain: "example.org"}}}
		}), base: true, want: []string{"DNSRecord/google-clouddns", "Extension/shoot-auto", "Extension/shoot-auto-wl"}},
		{name: "external domain with an unmanaged primary provider", shoot: testShoot(func(s *corev1beta1.Shoot) {
			s.Spec.Dns = &corev1beta1.DNS{Domain: proto.String("s.example.org"), Providers: []*corev1beta1.DNSProvider{{Type: proto.String("unmanaged"), Primary: proto.Bool(true)}}}
		}), seed: testSeed(), base: true, want: []string{"Extension/shoot-auto", "Extension/shoot-auto-wl"}},
		{name: "workerless: no provider kinds, only workerless extensions", shoot: testShoot(func(s *corev1beta1.Shoot) {
			s.Spec.Provider.Workers = nil
			s.Spec.Networking = &corev1beta1.Networking{Type: proto.String("calico")}
		}), seed: testSeed(), want: []string{"ControlPlane/seedprov", "Extension/shoot-auto-wl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := sets.New(tc.want...)
			if tc.base {
				want.Insert(shootBase...)
			}
			got := ForShoot(tc.shoot, tc.seed, regs)
			if !got.Equal(want) {
				t.Errorf("ForShoot = %v\nwant       %v", sets.List(got), sets.List(want))
			}
		})
	}
}

func TestForSeed(t *testing.T) {
	regs := []*corev1beta1.ControllerRegistration{
		registration("auto-seed", extensionResource("seed-auto", []string{"seed"}, false)),
		registration("auto-shoot", extensionResource("shoot-auto", []string{"shoot"}, false)),
		registration("auto-seed-2", extensionResource("seed-auto-disabled", []string{"seed", "shoot"}, false)),
	}
	seed := testSeed(func(s *corev1beta1.Seed) {
		s.Spec.Dns = &corev1beta1.SeedDNS{Provider: &corev1beta1.SeedDNSProvider{Type: "aws-route53"}}
		s.Spec.Extensions = []*corev1beta1.Extension{{Type: "seed-listed"}, {Type: "seed-auto-disabled", Disabled: proto.Bool(true)}}
	})
	want := []string{"ControlPlane/seedprov", "DNSRecord/aws-route53", "Extension/seed-auto", "Extension/seed-listed", "Infrastructure/seedprov", "Worker/seedprov"}
	if got := sets.List(ForSeed(seed, regs)); !slices.Equal(got, want) {
		t.Errorf("ForSeed = %v\nwant      %v", got, want)
	}
	seed.Metadata.DeletionTimestamp = timestamppb.Now()
	if got := ForSeed(seed, regs); got.Len() != 0 {
		t.Errorf("a seed being deleted needs %v for itself, want nothing", sets.List(got))
	}
}

func TestForBackups(t *testing.T) {
	bucket := func(name, seed, typ string) *corev1beta1.BackupBucket {
		return &corev1beta1.BackupBucket{Metadata: &metav1.ObjectMeta{Name: name},
			Spec: &corev1beta1.BackupBucketSpec{SeedName: proto.String(seed), Provider: &corev1beta1.BackupBucketProvider{Type: typ}}}
	}
	buckets := []*corev1beta1.BackupBucket{bucket("b1", "seed-1", "s3"), bucket("b2", "seed-2", "gcs"), bucket("b3", "seed-2", "azure")}
	if got := sets.List(ForBackupBuckets("seed-1", buckets)); !slices.Equal(got, []string{"BackupBucket/s3"}) {
		t.Errorf("ForBackupBuckets(seed-1) = %v, want only its own bucket's type", got)
	}
	byName := map[string]*corev1beta1.BackupBucket{}
	for _, b := range buckets {
		byName[b.GetMetadata().GetName()] = b
	}
	entry := func(name, bucket string) *corev1beta1.BackupEntry {
		return &corev1beta1.BackupEntry{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name}, Spec: &corev1beta1.BackupEntrySpec{BucketName: bucket}}
	}
	// An entry needs the type of its bucket, wherever that bucket is placed.
	got, missing := ForBackupEntries([]*corev1beta1.BackupEntry{entry("e1", "b2"), entry("e2", "gone")}, byName)
	if !slices.Equal(sets.List(got), []string{"BackupEntry/gcs"}) || !slices.Equal(missing, []string{"garden-dev/e2"}) {
		t.Errorf("ForBackupEntries = %v, missing %v; want BackupEntry/gcs and e2 missing", sets.List(got), missing)
	}
}
