package gateway

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/proto"

	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

func TestListJSON(t *testing.T) {
	empty := &kcorev1.ConfigMapList{ApiVersion: "v1", Kind: "ConfigMapList", Metadata: &metav1.ListMeta{ResourceVersion: "7"}}
	m := &Marshaler{}
	b, err := m.Marshal(empty)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != `{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[]}` {
		t.Errorf("empty list: %s", got)
	}
	items := []*kcorev1.ConfigMap{
		{Metadata: &metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "v"}},
		{Metadata: &metav1.ObjectMeta{Name: "b"}},
	}
	list := proto.Clone(empty).(*kcorev1.ConfigMapList)
	list.Items = items
	want, err := kjson.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	memo := map[proto.Message][]byte{}
	for _, it := range items {
		memo[it], _ = kjson.Marshal(it)
	}
	hits := 0
	m = &Marshaler{ObjectJSON: func(x proto.Message) ([]byte, bool) {
		b, ok := memo[x]
		if ok {
			hits++
		}
		return b, ok
	}}
	got, err := m.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) || hits != 2 {
		t.Errorf("list from memoized items (%d hits):\n got %s\nwant %s", hits, got, want)
	}
	if !json.Valid(got) {
		t.Error("invalid JSON")
	}
}
