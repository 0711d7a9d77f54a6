package kjson

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/gardenerexamples"
)

// benchObjectMeta is an ObjectMeta as a Gardener Shoot carries it: many labels and annotations (one a
// last-applied-configuration blob with escapes), owner references, finalizers and timestamps — about 4 KB of JSON.
func benchObjectMeta() *metav1.ObjectMeta {
	m := &metav1.ObjectMeta{
		Name:              "shoot--dev--cluster-a",
		Namespace:         "garden-dev",
		Uid:               "8c7f6b2a-1111-4222-8333-944444444444",
		ResourceVersion:   "123456789",
		Generation:        42,
		CreationTimestamp: &timestamppb.Timestamp{Seconds: 1778936656},
		Labels:            map[string]string{},
		Annotations:       map[string]string{},
		Finalizers:        []string{"gardener", "core.gardener.cloud/shoot"},
	}
	for i := range 20 {
		m.Labels[fmt.Sprintf("shoot.gardener.cloud/label-%02d", i)] = fmt.Sprintf("value-%d", i)
	}
	for i := range 12 {
		m.Annotations[fmt.Sprintf("gardener.cloud/annotation-%02d", i)] = strings.Repeat("v", 40)
	}
	m.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"apiVersion":"core.gardener.cloud/v1beta1",` +
		`"kind":"Shoot","metadata":{"name":"cluster-a","namespace":"garden-dev"},"spec":{"cloudProfileName":"aws",` +
		`"kubernetes":{"version":"1.31.1"},"provider":{"type":"aws","workers":[{"name":"pool-1","minimum":1,"maximum":3,` +
		`"machine":{"type":"m5.large"}}]},"region":"eu-west-1"}}` + "\n"
	for i := range 3 {
		m.OwnerReferences = append(m.OwnerReferences, &metav1.OwnerReference{
			ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Project", Name: fmt.Sprintf("owner-%d", i),
			Uid: "0b2c3d4e-5555-4666-8777-988888888888", Controller: proto.Bool(i == 0), BlockOwnerDeletion: proto.Bool(true),
		})
	}
	return m
}

// shootStatus is a Shoot status as a reconciled Shoot carries it.
const shootStatus = `{"conditions":[` +
	`{"type":"APIServerAvailable","status":"True","lastTransitionTime":"2026-05-16T13:04:16Z","lastUpdateTime":"2026-05-16T13:10:16Z","reason":"HealthzRequestSucceeded","message":"API server /healthz endpoint responded with success status code."},` +
	`{"type":"ControlPlaneHealthy","status":"True","lastTransitionTime":"2026-05-16T13:04:16Z","lastUpdateTime":"2026-05-16T13:10:16Z","reason":"ControlPlaneRunning","message":"All control plane components are healthy."},` +
	`{"type":"ObservabilityComponentsHealthy","status":"True","lastTransitionTime":"2026-05-16T13:04:16Z","lastUpdateTime":"2026-05-16T13:10:16Z","reason":"ObservabilityComponentsRunning","message":"All observability components are healthy."},` +
	`{"type":"EveryNodeReady","status":"True","lastTransitionTime":"2026-05-16T13:04:16Z","lastUpdateTime":"2026-05-16T13:10:16Z","reason":"EveryNodeReady","message":"All nodes are ready."},` +
	`{"type":"SystemComponentsHealthy","status":"True","lastTransitionTime":"2026-05-16T13:04:16Z","lastUpdateTime":"2026-05-16T13:10:16Z","reason":"SystemComponentsRunning","message":"All system components are healthy."}],` +
	`"constraints":[{"type":"HibernationPossible","status":"True","lastTransitionTime":"2026-05-16T13:04:16Z","lastUpdateTime":"2026-05-16T13:10:16Z","reason":"NoProblematicWebhooks","message":"All webhooks are properly configured."}],` +
	`"gardener":{"id":"gardenlet-5d8f7b9c4-x2x4z","name":"gardenlet-5d8f7b9c4-x2x4z","version":"v1.120.0"},"hibernated":false,` +
	`"lastOperation":{"description":"Shoot cluster has been successfully reconciled.","lastUpdateTime":"2026-05-16T13:10:16Z","progress":100,"state":"Succeeded","type":"Reconcile"},` +
	`"observedGeneration":42,"seedName":"aws-eu1","technicalID":"shoot--dev--cluster-a","uid":"8c7f6b2a-1111-4222-8333-944444444444",` +
	`"clusterIdentity":"shoot--dev--cluster-a-8c7f6b2a-1111-4222-8333-944444444444-gardener"}`

// benchShoot is a reconciled Shoot: Gardener's example spec, benchObjectMeta's metadata and a status with
// conditions — about 8 KB of JSON.
func benchShoot(tb testing.TB) proto.Message {
	y, err := os.ReadFile(filepath.Join(gardenerexamples.Dir(tb), "90-shoot.yaml"))
	if err != nil {
		tb.Skip("no Gardener Shoot example")
	}
	j, err := YAMLToJSON(y)
	if err != nil {
		tb.Fatal(err)
	}
	shoot := &corev1beta1.Shoot{}
	if err := (UnmarshalOptions{DiscardUnknown: true}).Unmarshal(j, shoot); err != nil {
		tb.Fatal(err)
	}
	// Four worker pools with zones, labels, surge settings and a provider config.
	w0 := shoot.GetSpec().GetProvider().GetWorkers()[0]
	for i := range 4 {
		w := proto.Clone(w0).(*corev1beta1.Worker)
		w.Name = fmt.Sprintf("pool-%d", i)
		w.Zones = []string{"europe-central-1a", "europe-central-1b", "europe-central-1c"}
		w.Labels = map[string]string{"worker.gardener.cloud/pool": w.Name, "node.kubernetes.io/role": "node", "team": "platform"}
		w.MaxSurge = &metav1.IntOrString{Value: &metav1.IntOrString_IntVal{IntVal: 1}}
		w.MaxUnavailable = &metav1.IntOrString{Value: &metav1.IntOrString_StrVal{StrVal: "25%"}}
		w.ProviderConfig = &metav1.RawExtension{Raw: []byte(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1",` +
			`"kind":"WorkerConfig","volume":{"iops":10000,"throughput":200},"instanceMetadataOptions":{"httpTokens":"required"}}`)}
		if i == 0 {
			shoot.Spec.Provider.Workers = nil
		}
		shoot.Spec.Provider.Workers = append(shoot.Spec.Provider.Workers, w)
	}
	shoot.Metadata = benchObjectMeta()
	shoot.Status = &corev1beta1.ShootStatus{}
	if err := (UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(shootStatus), shoot.Status); err != nil {
		tb.Fatal(err)
	}
	return shoot
}

// benchCases are the messages the benchmarks encode and decode, each with kjson and, for comparison, protojson.
func benchCases(b *testing.B) []struct {
	name string
	msg  proto.Message
} {
	return []struct {
		name string
		msg  proto.Message
	}{
		{"ObjectMeta", benchObjectMeta()},
		{"Shoot", benchShoot(b)},
	}
}

func BenchmarkMarshal(b *testing.B) {
	for _, bc := range benchCases(b) {
		m := bc.msg
		out, err := Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name+"/kjson", func(b *testing.B) {
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Marshal(m); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/kjson-append", func(b *testing.B) {
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			buf := make([]byte, 0, 16<<10)
			for b.Loop() {
				var err error
				if buf, err = AppendMarshal(buf[:0], m); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/protojson", func(b *testing.B) {
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := protojson.Marshal(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	for _, bc := range benchCases(b) {
		m := bc.msg
		in, err := Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		pin, err := protojson.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name+"/kjson", func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				got := m.ProtoReflect().New().Interface()
				if err := Unmarshal(in, got); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/protojson", func(b *testing.B) {
			b.SetBytes(int64(len(pin)))
			b.ReportAllocs()
			for b.Loop() {
				got := m.ProtoReflect().New().Interface()
				if err := protojson.Unmarshal(pin, got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestBenchMessages(t *testing.T) {
	for name, m := range map[string]proto.Message{"ObjectMeta": benchObjectMeta(), "Shoot": benchShoot(t)} {
		out, err := Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) < 2000 || len(out) > 16000 {
			t.Errorf("%s benchmark message is %d bytes, want a few KB", name, len(out))
		}
		back := m.ProtoReflect().New().Interface()
		if err := Unmarshal(out, back); err != nil || !proto.Equal(m, back) {
			t.Errorf("%s does not round-trip: %v", name, err)
		}
		t.Logf("%s: %d bytes of JSON", name, len(out))
	}
}
