package managedseedset

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func TestOrdinalOf(t *testing.T) {
	for name, want := range map[string]int32{
		"infra-0": 0, "infra-12": 12, "my-set-3": 3, "infra": -1, "infra-": -1, "infra-x": -1, "infra-99999999999": -1,
	} {
		if got := ordinalOf(name); got != want {
			t.Errorf("ordinalOf(%q) = %d, want %d", name, got, want)
		}
	}
}

// TestReplaceIngressDomain: only seedConfig.spec.ingress.domain gets the replica's name; everything else of the
// configuration is kept as it was (numbers exactly), and a configuration without the placeholder is not re-encoded.
func TestReplaceIngressDomain(t *testing.T) {
	for _, tc := range []struct{ name, in, want, err string }{
		{name: "replaced", in: `{"kind":"GardenletConfiguration","resources":{"capacity":{"shoots":250}},"seedConfig":{"spec":{"ingress":{"domain":"in.replica-name.example.com"}}}}`,
			want: `{"kind":"GardenletConfiguration","resources":{"capacity":{"shoots":250}},"seedConfig":{"spec":{"ingress":{"domain":"in.infra-4.example.com"}}}}`},
		{name: "no placeholder", in: `{ "kind": "GardenletConfiguration" }`, want: `{ "kind": "GardenletConfiguration" }`},
		{name: "placeholder elsewhere only", in: `{"seedConfig":{"metadata":{"labels":{"a":"replica-name"}}}}`, want: `{"seedConfig":{"metadata":{"labels":{"a":"replica-name"}}}}`},
		{name: "not JSON", in: `replica-name`, err: "not a GardenletConfiguration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := replaceIngressDomain([]byte(tc.in), "infra-4")
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case string(got) != tc.want:
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestSeedReadyBackup: a seed's BackupBucketsReady holds a replica back only when the seed has a backup; a seed
// without one (its condition Unknown, BackupBucketsGone) is ready with the other conditions True.
func TestSeedReadyBackup(t *testing.T) {
	seed := func(backup bool, bucketStatus string) *corev1beta1.Seed {
		s := &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: "s", Generation: 1}, Spec: &corev1beta1.SeedSpec{},
			Status: &corev1beta1.SeedStatus{ObservedGeneration: proto.Int64(1), Conditions: []*metav1.Condition{
				{Type: ConditionGardenletReady, Status: "True"}, {Type: ConditionSeedSystemComponentsHealthy, Status: "True"}}}}
		if backup {
			s.Spec.Backup = &corev1beta1.Backup{Provider: "local"}
		}
		if bucketStatus != "" {
			s.Status.Conditions = append(s.Status.Conditions, &metav1.Condition{Type: ConditionBackupBucketsReady, Status: bucketStatus})
		}
		return s
	}
	for _, tc := range []struct {
		backup bool
		bucket string
		want   bool
	}{{false, "", true}, {false, "Unknown", true}, {true, "", true}, {true, "True", true}, {true, "Unknown", false}, {true, "False", false}} {
		if got := seedReady(seed(tc.backup, tc.bucket)); got != tc.want {
			t.Errorf("backup %t, BackupBucketsReady %q: ready %t, want %t", tc.backup, tc.bucket, got, tc.want)
		}
	}
}
