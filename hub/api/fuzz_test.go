package api

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// kindMessages returns an empty message of every kind the hub serves (every trellis message with apiVersion, kind
// and metadata that is not a list or watch event).
func kindMessages(t testing.TB) []proto.Message {
	var out []proto.Message
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		d := mt.Descriptor()
		name := string(d.FullName())
		if !strings.HasPrefix(name, "trellis.") || strings.HasSuffix(name, "List") || strings.HasSuffix(name, "WatchEvent") {
			return true
		}
		if d.Fields().ByName("metadata") != nil && d.Fields().ByName("api_version") != nil {
			out = append(out, mt.New().Interface())
		}
		return true
	})
	if len(out) < len(Kinds) {
		t.Fatalf("found %d kind messages, the hub serves %d kinds", len(out), len(Kinds))
	}
	return out
}

// FuzzDecodeKinds feeds JSON and YAML documents to the decoder of every kind: it must never panic, and whatever it
// accepts must encode and decode back to the same object.
func FuzzDecodeKinds(f *testing.F) {
	msgs := kindMessages(f)
	f.Add(uint8(0), []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"provider":{"workers":[{"name":"w","minimum":0,"maxSurge":"25%"}]}}}`))
	f.Add(uint8(1), []byte("metadata:\n  name: a\nspec:\n  kubernetes:\n    version: 1.35.4\n"))
	f.Add(uint8(2), []byte(`{"metadata":{"creationTimestamp":"2026-01-01T00:00:00Z","generation":3},"data":{"k":"dg=="}}`))
	f.Add(uint8(3), []byte(`{"spec":{"providerConfig":{"a":[1,2,{"b":null}]}},"status":{"conditions":[{"type":"T","status":"True"}]}}`))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		m := msgs[int(which)%len(msgs)].ProtoReflect().Type().New().Interface()
		doc := data
		if which&0x80 != 0 {
			j, err := kjson.YAMLToJSON(data)
			if err != nil {
				return
			}
			doc = j
		}
		if err := kjson.Unmarshal(doc, m); err != nil {
			return
		}
		out, err := kjson.Marshal(m)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", doc, err)
		}
		back := m.ProtoReflect().Type().New().Interface()
		if err := kjson.Unmarshal(out, back); err != nil {
			t.Fatalf("cannot decode own output %q: %v", out, err)
		}
		if !proto.Equal(m, back) {
			t.Fatalf("round trip changed the object:\n in: %s\nout: %s", doc, out)
		}
	})
}

// FuzzSelectors parses label and field selectors as List and Watch do and evaluates them against a Shoot: parsing
// either fails with BadRequest or yields selectors that evaluate without panicking.
func FuzzSelectors(f *testing.F) {
	getters, err := fieldGetters(&corev1beta1.Shoot{}, []string{"spec.seedName", "status.seedName", "spec.cloudProfile.name"})
	if err != nil {
		f.Fatal(err)
	}
	seed := "s1"
	obj := &corev1beta1.Shoot{
		Metadata: &metav1.ObjectMeta{Name: "a", Namespace: "garden-dev", Labels: map[string]string{"env": "prod", "tier": "a"}},
		Spec:     &corev1beta1.ShootSpec{SeedName: &seed},
	}
	f.Add("env=prod,tier in (a,b)", "spec.seedName=s1")
	f.Add("!x,env!=dev", "metadata.name!=b,status.seedName=")
	f.Add("a in (", "spec.seedName==s1,,")
	f.Fuzz(func(t *testing.T, ls, fs string) {
		l, fsel, err := parseSelectors(ls, fs)
		if err != nil {
			return
		}
		_ = l.Matches(labels.Set(obj.GetMetadata().GetLabels()))
		set := fields.Set{"metadata.name": "a", "metadata.namespace": "garden-dev"}
		for p, g := range getters {
			set[p] = g(store.Object(obj))
		}
		_ = fsel.Matches(set)
	})
}
