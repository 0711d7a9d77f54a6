package shoot

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// ev builds a CloudProfile version: "1.30.2" supported, "1.30.2:deprecated", "1.30.2:preview", "1.30.2:expired"
// (expired yesterday), "1.30.2:expiring" (expires tomorrow).
func ev(spec string) *corev1beta1.ExpirableVersion {
	v, class, _ := strings.Cut(spec, ":")
	out := &corev1beta1.ExpirableVersion{Version: v}
	switch class {
	case "expired":
		out.ExpirationDate = timestamppb.New(testNow.Add(-24 * time.Hour))
	case "expiring":
		out.ExpirationDate = timestamppb.New(testNow.Add(24 * time.Hour))
	case "":
	default:
		out.Classification = ptr(class)
	}
	return out
}

func evs(specs ...string) []*corev1beta1.ExpirableVersion {
	var out []*corev1beta1.ExpirableVersion
	for _, s := range specs {
		out = append(out, ev(s))
	}
	return out
}

func TestClassification(t *testing.T) {
	stage := func(c string, start time.Duration) *corev1beta1.LifecycleStage {
		return &corev1beta1.LifecycleStage{Classification: c, StartTime: timestamppb.New(testNow.Add(start))}
	}
	for _, tc := range []struct {
		name string
		v    *corev1beta1.ExpirableVersion
		want string
	}{
		{"no classification is supported", ev("1.0.0"), classificationSupported},
		{"classification", ev("1.0.0:deprecated"), classificationDeprecated},
		{"expired by date", ev("1.0.0:expired"), classificationExpired},
		{"expiring later", ev("1.0.0:expiring"), classificationSupported},
		{"deprecated and expired", &corev1beta1.ExpirableVersion{Version: "1", Classification: ptr("deprecated"),
			ExpirationDate: timestamppb.New(testNow.Add(-time.Hour))}, classificationExpired},
		{"lifecycle: last started stage", &corev1beta1.ExpirableVersion{Version: "1", Lifecycle: []*corev1beta1.LifecycleStage{
			stage("preview", -48*time.Hour), stage("supported", -24*time.Hour), stage("deprecated", time.Hour)}}, classificationSupported},
		{"lifecycle: not started yet", &corev1beta1.ExpirableVersion{Version: "1", Lifecycle: []*corev1beta1.LifecycleStage{
			stage("supported", time.Hour)}}, classificationUnavailable},
		{"lifecycle wins over the old fields", &corev1beta1.ExpirableVersion{Version: "1", Classification: ptr("supported"),
			Lifecycle: []*corev1beta1.LifecycleStage{{Classification: "supported"}, stage("expired", -time.Hour)}}, classificationExpired},
	} {
		if got := classification(tc.v, testNow); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestMaintainKubernetesVersion: automatic patch updates within the minor (latest, not preview, not expired, not
// deprecated unless nothing else), and forced updates of expired or unknown versions to the next minor, with or
// without autoUpdate.
func TestMaintainKubernetesVersion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		current  string
		auto     bool
		profile  []string
		want     string // "" for no update
		reason   string
		wantFail bool
	}{
		{name: "latest patch", current: "1.30.1", auto: true, profile: []string{"1.30.1", "1.30.2", "1.30.5", "1.31.0"},
			want: "1.30.5", reason: "Automatic update of Kubernetes version configured"},
		{name: "preview and expired patches are skipped", current: "1.30.1", auto: true,
			profile: []string{"1.30.1", "1.30.2", "1.30.4:expired", "1.30.5:preview"}, want: "1.30.2"},
		{name: "non-deprecated preferred over a higher deprecated", current: "1.30.1", auto: true,
			profile: []string{"1.30.1", "1.30.2", "1.30.3:deprecated"}, want: "1.30.2"},
		{name: "deprecated when nothing else", current: "1.30.1", auto: true,
			profile: []string{"1.30.1", "1.30.3:deprecated"}, want: "1.30.3"},
		{name: "never a minor update by auto-update", current: "1.30.5", auto: true, profile: []string{"1.30.5", "1.31.0"}},
		{name: "no auto-update", current: "1.30.1", profile: []string{"1.30.1", "1.30.2"}},
		{name: "expiring later is not expired", current: "1.30.1", profile: []string{"1.30.1:expiring", "1.31.0"}},
		{name: "expired without auto-update: patch first", current: "1.30.1", profile: []string{"1.30.1:expired", "1.30.2", "1.31.0"},
			want: "1.30.2", reason: "Kubernetes version expired - force update required"},
		{name: "expired on the latest patch: next minor's latest", current: "1.30.5",
			profile: []string{"1.30.5:expired", "1.31.0", "1.31.2", "1.31.3:preview", "1.32.0"}, want: "1.31.2"},
		{name: "next minor prefers non-expired", current: "1.30.5",
			profile: []string{"1.30.5:expired", "1.31.0", "1.31.2:expired"}, want: "1.31.0"},
		{name: "next minor all expired: the latest expired", current: "1.30.5",
			profile: []string{"1.30.5:expired", "1.31.0:expired", "1.31.2:expired", "1.32.0"}, want: "1.31.2"},
		{name: "no consecutive minor: failure", current: "1.30.5", profile: []string{"1.30.5:expired", "1.32.0"},
			wantFail: true, reason: "Kubernetes version expired - force update required"},
		{name: "unknown version is forced", current: "1.29.9", profile: []string{"1.30.0", "1.30.1"},
			want: "1.30.1", reason: "Version does not exist in CloudProfile"},
		{name: "unknown version, patch available", current: "1.30.9", profile: []string{"1.30.10", "1.31.0"}, want: "1.30.10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := maintainKubernetesVersion(tc.current, tc.auto, evs(tc.profile...), testNow)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantFail:
				if u == nil || u.err == nil || !errors.Is(u.err, errNoForcedUpdate) {
					t.Fatalf("update %+v, want a failure without a suitable version", u)
				}
			case tc.want == "":
				if u != nil {
					t.Fatalf("update %+v, want none", u)
				}
			default:
				if u == nil || u.err != nil || u.to != tc.want || u.from != tc.current {
					t.Fatalf("update %+v, want %s to %s", u, tc.current, tc.want)
				}
			}
			if tc.reason != "" && u.reason != tc.reason {
				t.Fatalf("reason %q, want %q", u.reason, tc.reason)
			}
		})
	}
	if _, err := maintainKubernetesVersion("1.30.1", true, evs("1.30.1", "v1.x"), testNow); err == nil {
		t.Fatal("an unparsable cloud profile version must fail")
	}
}

// TestMaintainImageVersion: the update strategies and the forced updates of expired machine image versions.
func TestMaintainImageVersion(t *testing.T) {
	for _, tc := range []struct {
		name, current, strategy string
		auto                    bool
		profile                 []string
		want                    string
		wantFail                bool
	}{
		{name: "patch strategy: latest patch", current: "1.1.0", strategy: "patch", auto: true,
			profile: []string{"1.1.0", "1.1.3", "1.2.0", "2.0.0"}, want: "1.1.3"},
		{name: "minor strategy: latest of the major", current: "1.1.3", strategy: "minor", auto: true,
			profile: []string{"1.1.3", "1.2.0", "1.4.1", "2.0.0"}, want: "1.4.1"},
		{name: "minor strategy: patch first", current: "1.1.0", strategy: "minor", auto: true,
			profile: []string{"1.1.0", "1.1.2", "1.4.1"}, want: "1.1.2"},
		{name: "major strategy: latest overall", current: "1.1.3", strategy: "major", auto: true,
			profile: []string{"1.1.3", "1.4.1", "2.0.0", "3.0.0:preview"}, want: "2.0.0"},
		{name: "no auto-update", current: "1.1.0", strategy: "major", profile: []string{"1.1.0", "2.0.0"}},
		{name: "patch strategy expired: next higher minor", current: "1.1.3", strategy: "patch",
			profile: []string{"1.1.3:expired", "1.3.0", "1.3.2", "1.5.0", "2.0.0"}, want: "1.3.2"},
		{name: "patch strategy expired: an expired next minor rather than skipping it", current: "1.1.3", strategy: "patch",
			profile: []string{"1.1.3:expired", "1.2.0:expired", "1.4.1"}, want: "1.2.0"},
		{name: "patch strategy expired: not into another major", current: "1.1.3", strategy: "patch",
			profile: []string{"1.1.3:expired", "2.0.0"}, wantFail: true},
		{name: "minor strategy expired: next major", current: "1.4.1", strategy: "minor",
			profile: []string{"1.4.1:expired", "2.0.0", "2.1.0", "3.0.0"}, want: "2.1.0"},
		{name: "major strategy expired on the latest: failure", current: "2.0.0", strategy: "major",
			profile: []string{"1.0.0", "2.0.0:expired"}, wantFail: true},
		{name: "version not in the fitting versions is forced", current: "1.0.0", strategy: "patch",
			profile: []string{"1.1.0", "1.1.1"}, want: "1.1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := maintainImageVersion("gardenlinux", tc.current, tc.strategy, evs(tc.profile...), tc.auto, testNow)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantFail:
				if u == nil || u.err == nil {
					t.Fatalf("update %+v, want a failure", u)
				}
			case tc.want == "":
				if u != nil {
					t.Fatalf("update %+v, want none", u)
				}
			default:
				if u == nil || u.err != nil || u.to != tc.want {
					t.Fatalf("update %+v, want %s", u, tc.want)
				}
			}
		})
	}
}

// TestFittingImageVersions: architecture, CRI and container runtimes, kubelet constraint and in-place updates, with
// Gardener's defaults (amd64, containerd) for empty fields.
func TestFittingImageVersions(t *testing.T) {
	versions := []*corev1beta1.MachineImageVersion{
		{Version: "1.0.0"}, // amd64, containerd
		{Version: "1.1.0", Architectures: []string{"arm64"}},
		{Version: "1.2.0", Architectures: []string{"amd64", "arm64"}, Cri: []*corev1beta1.CRI{{Name: "containerd",
			ContainerRuntimes: []*corev1beta1.ContainerRuntime{{Type: "gvisor"}}}}},
		{Version: "1.3.0", KubeletVersionConstraint: ptr(">= 1.31")},
		{Version: "1.4.0", InPlaceUpdates: &corev1beta1.InPlaceUpdates{Supported: ptr(true), MinVersionForUpdate: ptr("1.0.0")}},
		{Version: "1.5.0", KubeletVersionConstraint: ptr("not a constraint")},
	}
	names := func(vs []*corev1beta1.MachineImageVersion) string {
		var out []string
		for _, v := range vs {
			out = append(out, v.GetVersion())
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name    string
		worker  *corev1beta1.Worker
		kubelet string
		want    string
	}{
		{"defaults", &corev1beta1.Worker{Machine: &corev1beta1.Machine{}}, "1.30.0", "1.0.0,1.2.0,1.4.0"},
		{"arm64", &corev1beta1.Worker{Machine: &corev1beta1.Machine{Architecture: ptr("arm64")}}, "1.30.0", "1.1.0,1.2.0"},
		{"gvisor", &corev1beta1.Worker{Machine: &corev1beta1.Machine{}, Cri: &corev1beta1.CRI{Name: "containerd",
			ContainerRuntimes: []*corev1beta1.ContainerRuntime{{Type: "gvisor"}}}}, "1.30.0", "1.2.0"},
		{"kubelet 1.31", &corev1beta1.Worker{Machine: &corev1beta1.Machine{}}, "1.31.0", "1.0.0,1.2.0,1.3.0,1.4.0"},
		{"in place from 1.0.0", &corev1beta1.Worker{UpdateStrategy: ptr("AutoInPlaceUpdate"),
			Machine: &corev1beta1.Machine{Image: &corev1beta1.ShootMachineImage{Name: "x", Version: ptr("1.0.0")}}}, "1.30.0", "1.4.0"},
	} {
		got := names(fittingImageVersions(versions, tc.worker, mustSemver(t, tc.kubelet)))
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestCapVersion(t *testing.T) {
	for _, tc := range [][3]string{
		{"1.31.2", "1.30.5", "1.30.5"},
		{"1.30.2", "1.30.5", "1.30.2"},
		{"1.30", "1.31.0", "1.30.0"},
		{"junk", "1.30.0", "junk"},
	} {
		if got := capVersion(tc[0], tc[1]); got != tc[2] {
			t.Errorf("capVersion(%s, %s) = %s, want %s", tc[0], tc[1], got, tc[2])
		}
	}
}

func mustSemver(t *testing.T, s string) *semver.Version {
	t.Helper()
	v, err := semver.NewVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
