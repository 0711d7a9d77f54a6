package admission_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

var (
	projectsGR     = schema.GroupResource{Group: "core.gardener.cloud", Resource: "projects"}
	profilesGR     = schema.GroupResource{Group: "core.gardener.cloud", Resource: "cloudprofiles"}
	managedSeedsGR = schema.GroupResource{Group: "seedmanagement.gardener.cloud", Resource: "managedseeds"}
)

// ruleCase is one row of a rule's table: obj (and old, nil on create) admitted against r must fail with exactly the
// errors of want (field path → a part of Gardener's message), or pass when want is empty.
type ruleCase struct {
	name     string
	r        admission.Reader
	obj, old *corev1beta1.Shoot
	want     map[string]string
}

func runRuleCases(t *testing.T, r admission.Reader, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rd := tc.r
			if rd == nil {
				rd = r
			}
			errs := admitShoot(t, rd, "", tc.obj, tc.old)
			assertErrors(t, errs, tc.want)
		})
	}
}

func assertErrors(t *testing.T, errs field.ErrorList, want map[string]string) {
	t.Helper()
	var wantPaths []string
	for p := range want {
		wantPaths = append(wantPaths, p)
	}
	if got := errorPaths(errs); !slices.Equal(got, sorted(wantPaths)) {
		t.Fatalf("error paths:\n got  %q\n want %q\nerrors: %v", got, sorted(wantPaths), errs)
	}
	for _, e := range errs {
		if msg := want[e.Field]; !strings.Contains(e.Error(), msg) {
			t.Errorf("error at %s: %q does not say %q", e.Field, e.Error(), msg)
		}
	}
}

// replaced returns r with obj in place of the object of gr with obj's namespace and name, or with obj added.
func replaced(r exampleReader, gr schema.GroupResource, obj store.Object) exampleReader {
	out := slices.DeleteFunc(slices.Clone(r), func(e example) bool {
		return e.gr == gr && e.obj.GetMetadata().GetName() == obj.GetMetadata().GetName() && e.obj.GetMetadata().GetNamespace() == obj.GetMetadata().GetNamespace()
	})
	return append(out, example{name: "replaced", gr: gr, obj: obj})
}

// exampleOf returns a copy of the first example of gr in r.
func exampleOf[T store.Object](t *testing.T, r exampleReader, gr schema.GroupResource) T {
	t.Helper()
	i := slices.IndexFunc(r, func(e example) bool { return e.gr == gr })
	if i < 0 {
		t.Fatalf("no example of %s", gr)
	}
	return clone(r[i].obj.(T))
}

func TestShootDNSDomain(t *testing.T) {
	r, base := shootGarden(t)
	domain := func(d string) *corev1beta1.Shoot {
		return with(base, func(s *corev1beta1.Shoot) { s.Spec.Dns = &corev1beta1.DNS{Domain: ptr(d)} })
	}
	runRuleCases(t, r, []ruleCase{
		{name: "subdomain", obj: domain("crazy-botany.core.example.com")},
		{name: "upper case", obj: domain("Crazy.example.com"), want: map[string]string{"spec.dns.domain": "RFC 1123 subdomain"}},
		{name: "underscore", obj: domain("crazy_botany.example.com"), want: map[string]string{"spec.dns.domain": "RFC 1123 subdomain"}},
	})
}

func TestShootNetworkRules(t *testing.T) {
	r, base := shootGarden(t)
	nets := func(nodes, pods, services string) *corev1beta1.Shoot {
		return with(base, func(s *corev1beta1.Shoot) {
			s.Spec.Networking.Nodes, s.Spec.Networking.Pods, s.Spec.Networking.Services = ptr(nodes), ptr(pods), ptr(services)
		})
	}
	seed := &corev1beta1.Seed{Metadata: meta("netseed", ""), Spec: &corev1beta1.SeedSpec{
		Provider: &corev1beta1.SeedProvider{Type: "local", Region: "local"}, Backup: &corev1beta1.Backup{Provider: "local"},
		Networks: &corev1beta1.SeedNetworks{Nodes: ptr("10.250.0.0/16"), Pods: "100.96.0.0/11", Services: "100.64.0.0/13"},
	}}
	withSeed := replaced(r, seedsGR, seed)
	runRuleCases(t, withSeed, []ruleCase{
		{name: "disjoint", obj: nets("10.250.0.0/16", "100.96.0.0/11", "100.64.0.0/13")},
		{name: "not a CIDR", obj: nets("10.250.0.0/33", "100.96.0.0/11", "100.64.0.0/13"),
			want: map[string]string{"spec.networking.nodes": "invalid CIDR address: 10.250.0.0/33"}},
		{name: "pods overlap services", obj: nets("10.250.0.0/16", "100.64.0.0/11", "100.64.0.0/13"),
			want: map[string]string{"spec.networking.services": "shoot pod network intersects with shoot service network"}},
		{name: "pods overlap nodes", obj: nets("10.250.0.0/16", "10.250.128.0/17", "100.64.0.0/13"),
			want: map[string]string{"spec.networking.pods": "shoot pod network intersects with shoot node network"}},
		{name: "services overlap nodes", obj: nets("10.0.0.0/8", "100.96.0.0/11", "10.1.0.0/16"),
			want: map[string]string{"spec.networking.services": "shoot service network intersects with shoot node network"}},
		{name: "pods immutable", obj: nets("10.250.0.0/16", "100.128.0.0/11", "100.64.0.0/13"), old: nets("10.250.0.0/16", "100.96.0.0/11", "100.64.0.0/13"),
			want: map[string]string{"spec.networking.pods": "field is immutable"}},
		{name: "services immutable", obj: nets("10.250.0.0/16", "100.96.0.0/11", "100.72.0.0/13"), old: nets("10.250.0.0/16", "100.96.0.0/11", "100.64.0.0/13"),
			want: map[string]string{"spec.networking.services": "field is immutable"}},
		{name: "scheduled on a seed with disjoint networks", obj: onSeed(nets("10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16"), "netseed", "")},
		{name: "scheduled on a seed with the same networks", obj: onSeed(base, "netseed", ""), want: map[string]string{
			"spec.networking.nodes": "shoot node network intersects with seed node network",
			"spec.networking.pods":  "shoot pod network intersects with seed pod network",
			// services (100.64.0.0/13) overlaps the seed's pods (100.96.0.0/11)? No: 100.64–100.71 vs 100.96–100.127.
			"spec.networking.services": "shoot service network intersects with seed service network",
		}},
		{name: "overlap with the VPN network", obj: onSeed(nets("192.168.123.0/26", "10.2.0.0/16", "10.3.0.0/16"), "netseed", ""),
			want: map[string]string{"spec.networking.nodes": "shoot node network intersects with default vpn network (192.168.123.0/24)"}},
		// The seed's networks are checked when the shoot is scheduled, not on later updates.
		{name: "update on the same seed", obj: with(onSeed(base, "netseed", "netseed"), func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{Enabled: ptr(true)} }),
			old: onSeed(base, "netseed", "netseed")},
	})
}

func TestShootHibernationSchedules(t *testing.T) {
	r, base := shootGarden(t)
	schedules := func(ss ...*corev1beta1.HibernationSchedule) *corev1beta1.Shoot {
		return with(base, func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{Schedules: ss} })
	}
	sch := func(start, end, loc string) *corev1beta1.HibernationSchedule {
		h := &corev1beta1.HibernationSchedule{}
		if start != "" {
			h.Start = ptr(start)
		}
		if end != "" {
			h.End = ptr(end)
		}
		if loc != "" {
			h.Location = ptr(loc)
		}
		return h
	}
	runRuleCases(t, r, []ruleCase{
		{name: "weekday evenings", obj: schedules(sch("00 20 * * 1-5", "00 07 * * 1-5", "Europe/Berlin"))},
		{name: "start only", obj: schedules(sch("00 20 * * *", "", ""))},
		{name: "neither start nor end", obj: schedules(sch("", "", "")),
			want: map[string]string{"spec.hibernation.schedules[0].start/end": "either start or end has to be provided"}},
		{name: "not a cron spec", obj: schedules(sch("every evening", "00 07 * * *", "")),
			want: map[string]string{"spec.hibernation.schedules[0].start": "not a valid cron spec"}},
		{name: "spec used twice", obj: schedules(sch("00 20 * * *", "00 07 * * *", ""), sch("00 20 * * *", "", "")),
			want: map[string]string{"spec.hibernation.schedules[1].start": "Duplicate value"}},
		{name: "unknown location", obj: schedules(sch("00 20 * * *", "", "Mars/Olympus")),
			want: map[string]string{"spec.hibernation.schedules[0].location": "not a valid location"}},
	})
	t.Run("location defaults to UTC", func(t *testing.T) {
		s := schedules(sch("00 20 * * *", "", ""))
		admitShoot(t, r, "", s, nil)
		if got := s.GetSpec().GetHibernation().GetSchedules()[0].GetLocation(); got != "UTC" {
			t.Errorf("location = %q, want UTC", got)
		}
	})
}

func TestShootMaintenanceTimeWindow(t *testing.T) {
	r, base := shootGarden(t)
	window := func(begin, end string) *corev1beta1.Shoot {
		return with(base, func(s *corev1beta1.Shoot) {
			s.Spec.Maintenance = &corev1beta1.Maintenance{TimeWindow: &corev1beta1.MaintenanceTimeWindow{Begin: begin, End: end}}
		})
	}
	runRuleCases(t, r, []ruleCase{
		{name: "one hour", obj: window("220000+0100", "230000+0100")},
		{name: "across midnight", obj: window("230000+0000", "010000+0000")},
		{name: "six hours", obj: window("220000+0000", "040000+0000")},
		{name: "not a time", obj: window("22:00", "230000+0100"),
			want: map[string]string{"spec.maintenance.timeWindow.begin/end": "could not parse begin time"}},
		{name: "longer than six hours", obj: window("200000+0000", "040000+0000"),
			want: map[string]string{"spec.maintenance.timeWindow": "time window must not be greater than 6h0m0s"}},
		{name: "shorter than 30 minutes", obj: window("220000+0000", "221000+0000"),
			want: map[string]string{"spec.maintenance.timeWindow": "time window must not be smaller than 30m0s"}},
	})
	t.Run("defaults", func(t *testing.T) {
		s := with(base, func(s *corev1beta1.Shoot) { s.Spec.Maintenance = nil })
		if errs := admitShoot(t, r, "", s, nil); len(errs) > 0 {
			t.Fatal(errs)
		}
		m := s.GetSpec().GetMaintenance()
		if !m.GetAutoUpdate().GetKubernetesVersion() || !m.GetAutoUpdate().GetMachineImageVersion() {
			t.Errorf("auto update = %v, want Kubernetes and machine image versions", m.GetAutoUpdate())
		}
		b, err1 := time.Parse("150405-0700", m.GetTimeWindow().GetBegin())
		e, err2 := time.Parse("150405-0700", m.GetTimeWindow().GetEnd())
		if err1 != nil || err2 != nil {
			t.Fatalf("window %v: %v %v", m.GetTimeWindow(), err1, err2)
		}
		if h := b.UTC().Hour(); h > 22 || b.UTC().Minute() != 0 {
			t.Errorf("window begins at %s UTC, want a full hour between 00:00 and 22:00", b.UTC().Format("15:04"))
		}
		if d := (e.Sub(b) + 24*time.Hour) % (24 * time.Hour); d != time.Hour {
			t.Errorf("window lasts %s, want 1h", d)
		}
		again := with(base, func(s *corev1beta1.Shoot) { s.Spec.Maintenance = nil })
		plugins.For(again).Default(again)
		if again.GetSpec().GetMaintenance().GetTimeWindow().GetBegin() != m.GetTimeWindow().GetBegin() {
			t.Errorf("defaulting the same shoot twice gave two windows")
		}
	})
}

func TestShootProjectRules(t *testing.T) {
	r, base := shootGarden(t)
	project := exampleOf[*corev1beta1.Project](t, r, projectsGR)
	deleting := with(project, func(p *corev1beta1.Project) { p.Metadata.DeletionTimestamp = timestamppb.New(time.Now()) })
	tolerating := with(project, func(p *corev1beta1.Project) {
		p.Spec.Tolerations = &corev1beta1.ProjectTolerations{
			Defaults:  []*metav1.Toleration{{Key: "default-key"}},
			Whitelist: []*metav1.Toleration{{Key: "any-value"}, {Key: "one-value", Value: ptr("a")}},
		}
	})
	tolerations := func(ids ...string) *corev1beta1.Shoot {
		return with(base, func(s *corev1beta1.Shoot) {
			s.Spec.Tolerations = nil
			for _, id := range ids {
				k, v, ok := strings.Cut(id, "=")
				t := &metav1.Toleration{Key: k}
				if ok {
					t.Value = ptr(v)
				}
				s.Spec.Tolerations = append(s.Spec.Tolerations, t)
			}
		})
	}
	named := func(name string) *corev1beta1.Shoot {
		return with(base, func(s *corev1beta1.Shoot) { s.Metadata.Name = name })
	}
	withTolerations := replaced(r, projectsGR, tolerating)
	runRuleCases(t, r, []ruleCase{
		{name: "21 characters", obj: named("crazy-botany-12345")}, // dev + 18
		{name: "22 characters", obj: named("crazy-botany-123456"),
			want: map[string]string{"metadata.name": "the length of the shoot name and the project name must not exceed 21 characters (project: dev; shoot: crazy-botany-123456)"}},
		{name: "long name of an existing shoot", obj: with(named("crazy-botany-123456"), func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{} }),
			old: named("crazy-botany-123456")},
		{name: "create in a project being deleted", r: replaced(r, projectsGR, deleting), obj: base,
			want: map[string]string{"metadata.namespace": "cannot create shoot 'crazy-botany' in project 'dev' that is already marked for deletion"}},
		{name: "whitelisted key", r: withTolerations, obj: tolerations("any-value=x")},
		{name: "whitelisted key and value", r: withTolerations, obj: tolerations("one-value=a")},
		{name: "project default", r: withTolerations, obj: tolerations("default-key")},
		{name: "another value", r: withTolerations, obj: tolerations("one-value=b"),
			want: map[string]string{"spec.tolerations[0]": "only the following tolerations are allowed: [any-value one-value=a default-key]"}},
		{name: "no whitelist", obj: tolerations("any-value"), want: map[string]string{"spec.tolerations[0]": "only the following tolerations are allowed: []"}},
		{name: "kept on update although no longer whitelisted", obj: tolerations("legacy", "any-value"), old: tolerations("legacy"), r: withTolerations},
		{name: "added on update", obj: tolerations("legacy", "new"), old: tolerations("legacy"), r: withTolerations,
			want: map[string]string{"spec.tolerations[1]": "only the following tolerations are allowed"}},
	})
	t.Run("project defaults are added on create", func(t *testing.T) {
		s := tolerations("any-value")
		if errs := admitShoot(t, withTolerations, "", s, nil); len(errs) > 0 {
			t.Fatal(errs)
		}
		var keys []string
		for _, t := range s.GetSpec().GetTolerations() {
			keys = append(keys, t.GetKey())
		}
		if !slices.Equal(keys, []string{"any-value", "default-key"}) {
			t.Errorf("tolerations = %q, want any-value and the default default-key", keys)
		}
	})
}

func TestShootMachineImage(t *testing.T) {
	r, base := shootGarden(t)
	image := func(name, version string) *corev1beta1.Shoot {
		return with(base, func(s *corev1beta1.Shoot) {
			m := s.Spec.Provider.Workers[0].Machine
			m.Image = nil
			if name != "" || version != "" {
				m.Image = &corev1beta1.ShootMachineImage{Name: name}
				if version != "" {
					m.Image.Version = ptr(version)
				}
			}
		})
	}
	profile := exampleOf[*corev1beta1.CloudProfile](t, r, profilesGR)
	profile.Spec.MachineImages[0].Versions = append(profile.Spec.MachineImages[0].Versions,
		&corev1beta1.MachineImageVersion{Version: "15.5.1", Classification: ptr("preview")},
		&corev1beta1.MachineImageVersion{Version: "15.4.20230101", Architectures: []string{"arm64"}})
	withVersions := replaced(r, profilesGR, profile)
	const imagePath = "spec.provider.workers[0].machine.image"
	runRuleCases(t, withVersions, []ruleCase{
		{name: "offered", obj: image("gardenlinux", "15.4.20220818")},
		{name: "unknown image", obj: image("windows", "1.0.0"), want: map[string]string{imagePath + ".name": `Unsupported value: "windows"`}},
		{name: "unknown version", obj: image("gardenlinux", "15.4.1"), want: map[string]string{imagePath + ".version": `Unsupported value: "15.4.1"`}},
		{name: "expired version", obj: image("gardenlinux", "15.4.20220620"), want: map[string]string{imagePath + ".version": `supported values: "15.4.20220818", "15.5.1"`}},
		{name: "expired version the shoot already runs", obj: with(image("gardenlinux", "15.4.20220620"), func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{} }),
			old: image("gardenlinux", "15.4.20220620")},
		{name: "version of another architecture", obj: image("gardenlinux", "15.4.20230101"), want: map[string]string{imagePath + ".version": "Unsupported value"}},
		{name: "preview version chosen explicitly", obj: image("gardenlinux", "15.5.1")},
	})
	for _, tc := range []struct {
		name, image, version, arch string
		wantName, wantVersion      string
	}{
		{name: "no image", wantName: "gardenlinux", wantVersion: "15.4.20220818"},
		{name: "no version: the highest supported, not preview", image: "gardenlinux", wantName: "gardenlinux", wantVersion: "15.4.20220818"},
		{name: "partial version", image: "ubuntu", version: "18", wantName: "ubuntu", wantVersion: "18.04.201906170"},
		{name: "no version for arm64", image: "gardenlinux", arch: "arm64", wantName: "gardenlinux", wantVersion: "15.4.20230101"},
	} {
		t.Run("default/"+tc.name, func(t *testing.T) {
			s := image(tc.image, tc.version)
			if tc.arch != "" {
				s.Spec.Provider.Workers[0].Machine.Architecture = ptr(tc.arch)
			}
			if errs := admitShoot(t, withVersions, "", s, nil); len(errs) > 0 {
				t.Fatal(errs)
			}
			img := s.GetSpec().GetProvider().GetWorkers()[0].GetMachine().GetImage()
			if img.GetName() != tc.wantName || img.GetVersion() != tc.wantVersion {
				t.Errorf("image = %s %s, want %s %s", img.GetName(), img.GetVersion(), tc.wantName, tc.wantVersion)
			}
		})
	}
	t.Run("default/no version matching", func(t *testing.T) {
		errs := admitShoot(t, withVersions, "", image("gardenlinux", "16"), nil)
		assertErrors(t, errs, map[string]string{imagePath + ".version": `machine image gardenlinux has no version matching "16"`})
	})
}

func TestShootKubernetesVersionExpired(t *testing.T) {
	r, base := shootGarden(t)
	k8s := func(v string) *corev1beta1.Shoot {
		return with(base, func(s *corev1beta1.Shoot) { s.Spec.Kubernetes = &corev1beta1.Kubernetes{Version: v} })
	}
	runRuleCases(t, r, []ruleCase{
		{name: "supported", obj: k8s("1.33.11")},
		{name: "expired", obj: k8s("1.32.13"), want: map[string]string{"spec.kubernetes.version": `supported values: "1.35.4", "1.34.7", "1.33.11"`}},
		{name: "expired but already running", obj: with(k8s("1.32.13"), func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{} }), old: k8s("1.32.13")},
		{name: "minor defaults to the highest not expired", obj: k8s("1.32"), want: map[string]string{"spec.kubernetes.version": `Unsupported value: "1.32"`}},
	})
}

func TestShootZonesAndVolumeTypes(t *testing.T) {
	r, base := shootGarden(t)
	worker := func(f func(w *corev1beta1.Worker)) *corev1beta1.Shoot {
		return with(base, func(s *corev1beta1.Shoot) { f(s.Spec.Provider.Workers[0]) })
	}
	zones := func(zs ...string) *corev1beta1.Shoot { return worker(func(w *corev1beta1.Worker) { w.Zones = zs }) }
	volume := func(typ string, zs ...string) *corev1beta1.Shoot {
		return worker(func(w *corev1beta1.Worker) { w.Volume.Type, w.Zones = ptr(typ), zs })
	}
	profile := exampleOf[*corev1beta1.CloudProfile](t, r, profilesGR)
	profile.Spec.Regions[0].Zones[1].UnavailableVolumeTypes = []string{"io1"}
	profile.Spec.Regions[0].Zones[2].UnavailableMachineTypes = []string{"m5.large"}
	profile.Spec.VolumeTypes = append(profile.Spec.VolumeTypes, &corev1beta1.VolumeType{Name: "old", Class: "standard", Usable: ptr(false)})
	restricted := replaced(r, profilesGR, profile)
	const w0 = "spec.provider.workers[0]"
	runRuleCases(t, restricted, []ruleCase{
		{name: "offered zones", obj: zones("europe-central-1a", "europe-central-1b")},
		{name: "unknown zone", obj: zones("europe-central-1a", "mars-1"),
			want: map[string]string{w0 + ".zones[1]": `supported values: "europe-central-1a", "europe-central-1b", "europe-central-1c"`}},
		{name: "zone the shoot already had", obj: with(zones("mars-1"), func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{} }), old: zones("mars-1")},
		{name: "machine type unavailable in a zone", obj: zones("europe-central-1c"), want: map[string]string{w0 + ".machine.type": `Unsupported value: "m5.large"`}},
		{name: "offered volume type", obj: volume("io1", "europe-central-1a")},
		{name: "unknown volume type", obj: volume("gp9"), want: map[string]string{w0 + ".volume.type": `supported values: "gp3", "io1"`}},
		{name: "volume type not usable", obj: volume("old"), want: map[string]string{w0 + ".volume.type": `Unsupported value: "old"`}},
		{name: "volume type unavailable in a zone", obj: volume("io1", "europe-central-1b"), want: map[string]string{w0 + ".volume.type": `supported values: "gp3"`}},
		{name: "data volume type", obj: worker(func(w *corev1beta1.Worker) {
			w.DataVolumes = []*corev1beta1.DataVolume{{Name: "d", Type: ptr("gp3"), Size: "10Gi"}, {Name: "e", Type: ptr("gp9"), Size: "10Gi"}}
		}), want: map[string]string{w0 + ".dataVolumes[1].type": `Unsupported value: "gp9"`}},
	})
}

func TestShootFailureTolerance(t *testing.T) {
	r, base := shootGarden(t)
	ha := func(typ string) *corev1beta1.Shoot {
		return with(base, func(s *corev1beta1.Shoot) {
			s.Spec.ControlPlane = &corev1beta1.ControlPlane{HighAvailability: &corev1beta1.HighAvailability{FailureTolerance: &corev1beta1.FailureTolerance{Type: typ}}}
		})
	}
	const p = "spec.controlPlane.highAvailability.failureTolerance.type"
	runRuleCases(t, r, []ruleCase{
		{name: "node", obj: ha("node")},
		{name: "zone", obj: ha("zone")},
		{name: "region", obj: ha("region"), want: map[string]string{p: `supported values: "node", "zone"`}},
		{name: "made highly available", obj: ha("zone"), old: base},
		{name: "type changed", obj: ha("node"), old: ha("zone"), want: map[string]string{p: "different failure tolerance type"}},
	})
}

func TestShootManagedSeedDeletionProtection(t *testing.T) {
	examplesReader, base := shootGarden(t)
	// Gardener's example ManagedSeed registers crazy-botany in garden; the rows below bring their own.
	r := slices.DeleteFunc(slices.Clone(examplesReader), func(e example) bool { return e.gr == managedSeedsGR })
	shoot := with(base, func(s *corev1beta1.Shoot) {
		s.Metadata.Namespace = "garden"
		s.Metadata.Annotations = map[string]string{admission.AnnotationConfirmDeletion: "true"}
	})
	ms := func(ns, shootName string) *seedmanagementv1alpha1.ManagedSeed {
		return &seedmanagementv1alpha1.ManagedSeed{Metadata: meta("ms", ns), Spec: &seedmanagementv1alpha1.ManagedSeedSpec{Shoot: &seedmanagementv1alpha1.Shoot{Name: shootName}}}
	}
	del := plugins.For(shoot).ValidateDelete
	for _, tc := range []struct {
		name      string
		r         exampleReader
		obj       *corev1beta1.Shoot
		forbidden string
	}{
		{name: "no managed seed", r: r, obj: shoot},
		{name: "managed seed of another shoot", r: replaced(r, managedSeedsGR, ms("garden", "other")), obj: shoot},
		{name: "managed seed of a same-named shoot elsewhere", r: replaced(r, managedSeedsGR, ms("garden-dev", "crazy-botany")), obj: shoot},
		{name: "registered as a managed seed", r: replaced(r, managedSeedsGR, ms("garden", "crazy-botany")), obj: shoot,
			forbidden: "cannot delete shoot garden/crazy-botany since it is still referenced by a managed seed"},
		{name: "Gardener's example managed seed", r: examplesReader, obj: shoot,
			forbidden: "cannot delete shoot garden/crazy-botany since it is still referenced by a managed seed"},
		{name: "without deletion confirmation", r: r, obj: with(shoot, func(s *corev1beta1.Shoot) { s.Metadata.Annotations = nil }),
			forbidden: "confirmation.gardener.cloud/deletion=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := del(context.Background(), tc.r, tc.obj)
			switch {
			case tc.forbidden == "" && err != nil:
				t.Fatalf("delete refused: %v", err)
			case tc.forbidden != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.forbidden)):
				t.Fatalf("error = %v, want forbidden saying %q", err, tc.forbidden)
			}
		})
	}
}

// FuzzShootWindowsAndSchedules feeds arbitrary maintenance windows, cron specs, locations and CIDRs, which come from
// users, through the shoot's admission: it never panics, every error names a field, and an admitted window parses.
func FuzzShootWindowsAndSchedules(f *testing.F) {
	f.Add("220000+0100", "230000+0100", "00 20 * * 1-5", "Europe/Berlin", "10.250.0.0/16")
	f.Add("2200", "-1", "@every 1h", "Local", "::/0")
	f.Add("235959+1400", "000000-1200", "* * * * * *", "../../etc/passwd", "300.1.1.1/8")
	r, base := shootGarden(f)
	f.Fuzz(func(t *testing.T, begin, end, cronSpec, location, nodes string) {
		s := with(base, func(s *corev1beta1.Shoot) {
			s.Spec.Maintenance = &corev1beta1.Maintenance{TimeWindow: &corev1beta1.MaintenanceTimeWindow{Begin: begin, End: end}}
			s.Spec.Hibernation = &corev1beta1.Hibernation{Schedules: []*corev1beta1.HibernationSchedule{{Start: ptr(cronSpec), Location: ptr(location)}}}
			s.Spec.Networking.Nodes = ptr(nodes)
		})
		errs := admitShoot(t, r, "", s, nil)
		windowRefused := false
		for _, e := range errs {
			if e.Field == "" {
				t.Fatalf("error without a field: %v", e)
			}
			windowRefused = windowRefused || strings.HasPrefix(e.Field, "spec.maintenance.timeWindow")
		}
		if !windowRefused {
			if _, err := time.Parse("150405-0700", begin); err != nil {
				t.Fatalf("window begin %q admitted but does not parse: %v", begin, err)
			}
		}
	})
}

// TestShootRulesOnMetadataWrites: a shoot stored before a spec rule existed (here a window of 8 hours) still takes
// metadata writes such as an agent's finalizer; a change of its spec is held to the rule.
func TestShootRulesOnMetadataWrites(t *testing.T) {
	r, base := shootGarden(t)
	stored := with(base, func(s *corev1beta1.Shoot) {
		s.Spec.Maintenance = &corev1beta1.Maintenance{TimeWindow: &corev1beta1.MaintenanceTimeWindow{Begin: "200000+0000", End: "040000+0000"}}
	})
	runRuleCases(t, r, []ruleCase{
		{name: "finalizer added", obj: with(stored, func(s *corev1beta1.Shoot) { s.Metadata.Finalizers = []string{"gardener"} }), old: stored},
		{name: "spec changed", obj: with(stored, func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{} }), old: stored,
			want: map[string]string{"spec.maintenance.timeWindow": "time window must not be greater than 6h0m0s"}},
	})
}

func TestShootKubelet(t *testing.T) {
	r, base := shootGarden(t)
	kubelet := func(f func(k *corev1beta1.KubeletConfig)) *corev1beta1.Shoot {
		return with(base, func(s *corev1beta1.Shoot) {
			k := &corev1beta1.KubeletConfig{}
			f(k)
			s.Spec.Kubernetes = &corev1beta1.Kubernetes{Kubelet: k}
		})
	}
	const p = "spec.kubernetes.kubelet"
	runRuleCases(t, r, []ruleCase{
		{name: "valid", obj: kubelet(func(k *corev1beta1.KubeletConfig) {
			k.MaxPods, k.PodPidsLimit, k.ImageGcHighThresholdPercent, k.ImageGcLowThresholdPercent = ptr(int32(110)), ptr(int64(100)), ptr(int32(80)), ptr(int32(70))
			k.EvictionPressureTransitionPeriod = ptr("4m0s")
		})},
		{name: "negative max pods", obj: kubelet(func(k *corev1beta1.KubeletConfig) { k.MaxPods = ptr(int32(-1)) }),
			want: map[string]string{p + ".maxPods": "must be greater than or equal to 0"}},
		{name: "PID limit below 100", obj: kubelet(func(k *corev1beta1.KubeletConfig) { k.PodPidsLimit = ptr(int64(99)) }),
			want: map[string]string{p + ".podPIDsLimit": "podPIDsLimit value must be at least 100"}},
		{name: "not a duration", obj: kubelet(func(k *corev1beta1.KubeletConfig) { k.EvictionPressureTransitionPeriod = ptr("soon") }),
			want: map[string]string{p + ".evictionPressureTransitionPeriod": "must be a duration"}},
		{name: "threshold over 100", obj: kubelet(func(k *corev1beta1.KubeletConfig) { k.ImageGcHighThresholdPercent = ptr(int32(101)) }),
			want: map[string]string{p + ".imageGCHighThresholdPercent": "must be in the range [0, 100]"}},
		{name: "low not below high", obj: kubelet(func(k *corev1beta1.KubeletConfig) {
			k.ImageGcHighThresholdPercent, k.ImageGcLowThresholdPercent = ptr(int32(70)), ptr(int32(70))
		}), want: map[string]string{p + ".imageGCLowThresholdPercent": "imageGCLowThresholdPercent must be less than imageGCHighThresholdPercent"}},
		{name: "worker pool", obj: with(base, func(s *corev1beta1.Shoot) {
			s.Spec.Provider.Workers[0].Kubernetes = &corev1beta1.WorkerKubernetes{Kubelet: &corev1beta1.KubeletConfig{PodPidsLimit: ptr(int64(10))}}
		}), want: map[string]string{"spec.provider.workers[0].kubernetes.kubelet.podPIDsLimit": "at least 100"}},
	})
}
