package kjson

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
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

func BenchmarkMarshal(b *testing.B) {
	m := benchObjectMeta()
	out, _ := Marshal(m)
	b.Run("kjson", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Marshal(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kjson-append", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		b.ReportAllocs()
		buf := make([]byte, 0, 8192)
		for b.Loop() {
			var err error
			if buf, err = AppendMarshal(buf[:0], m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protojson", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := protojson.Marshal(m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkUnmarshal(b *testing.B) {
	m := benchObjectMeta()
	in, _ := Marshal(m)
	pin, _ := protojson.Marshal(m)
	b.Run("kjson", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		b.ReportAllocs()
		for b.Loop() {
			var got metav1.ObjectMeta
			if err := Unmarshal(in, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protojson", func(b *testing.B) {
		b.SetBytes(int64(len(pin)))
		b.ReportAllocs()
		for b.Loop() {
			var got metav1.ObjectMeta
			if err := protojson.Unmarshal(pin, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestBenchMessageSize(t *testing.T) {
	out, err := Marshal(benchObjectMeta())
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 2000 || len(out) > 8000 {
		t.Errorf("benchmark message is %d bytes, want a few KB", len(out))
	}
}
