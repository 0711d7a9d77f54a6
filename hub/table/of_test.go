package table

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/proto"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/proto/columns"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/gardenerexamples"
)

// referenceOf is the Table of a get's or list's JSON decoded whole with encoding/json: each item into an any, its
// metadata into an ObjectMeta encoded again for the row (names case-sensitive, as Kubernetes' decoders read them:
// k8s.io/apimachinery/pkg/util/json). Of must give the same Table, reading only what the columns need.
func referenceOf(doc []byte, v string, include kmetav1.IncludeObjectPolicy, now time.Time) (*kmetav1.Table, error) {
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   kmetav1.ListMeta  `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := utiljson.Unmarshal(doc, &head); err != nil {
		return nil, err
	}
	items := head.Items
	kind, list := strings.CutSuffix(head.Kind, "List")
	if !list || head.Items == nil && !bytes.Contains(doc, []byte(`"items"`)) {
		kind, list, items = head.Kind, false, []json.RawMessage{doc}
	}
	k, ok := api.KindFor(head.APIVersion, kind)
	if !ok {
		return nil, fmt.Errorf("no kind %s %s", head.APIVersion, kind)
	}
	t, b, err := newTable(k, v, include, now)
	if err != nil {
		return nil, err
	}
	if list {
		t.ListMeta = head.Metadata
	}
	for _, raw := range items {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var obj any
		if err := d.Decode(&obj); err != nil {
			return nil, err
		}
		var meta struct {
			Metadata kmetav1.ObjectMeta `json:"metadata"`
		}
		if err := utiljson.Unmarshal(raw, &meta); err != nil {
			return nil, err
		}
		row := kmetav1.TableRow{Cells: []any{}}
		if b.named {
			row.Cells = append(row.Cells, meta.Metadata.Name)
		}
		for _, c := range b.cols {
			row.Cells = append(row.Cells, columns.Cell(c.GetJsonPath(), c.GetFormat(), obj, now))
		}
		switch include {
		case kmetav1.IncludeObject:
			row.Object = runtime.RawExtension{Raw: raw}
		case kmetav1.IncludeMetadata:
			pom := kmetav1.PartialObjectMetadata{TypeMeta: kmetav1.TypeMeta{APIVersion: "meta.k8s.io/" + v, Kind: "PartialObjectMetadata"}, ObjectMeta: meta.Metadata}
			if row.Object.Raw, err = json.Marshal(pom); err != nil {
				return nil, err
			}
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

// exampleObjects are Gardener's example manifests of the kinds the hub serves, as the gateway writes them (kjson),
// with managedFields, labels and a creation time as stored objects have; three of each with distinct names.
func exampleObjects(t *testing.T) map[string][][]byte {
	t.Helper()
	dir := gardenerexamples.Dir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for doc := range strings.SplitSeq(string(data), "\n---") {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil || m == nil {
				continue
			}
			apiVersion, _ := m["apiVersion"].(string)
			kind, _ := m["kind"].(string)
			if _, ok := api.KindFor(apiVersion, kind); !ok {
				continue
			}
			msg := gardenerexamples.KindMessage(apiVersion, kind)
			j, err := json.Marshal(gardenerexamples.Fill(m))
			if err != nil {
				t.Fatal(err)
			}
			if err := (kjson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(j, msg); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for i := range 3 {
				x := proto.Clone(msg)
				var o map[string]any
				b, err := kjson.Marshal(x)
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(b, &o); err != nil {
					t.Fatal(err)
				}
				md, _ := o["metadata"].(map[string]any)
				if md == nil {
					md = map[string]any{}
					o["metadata"] = md
				}
				md["name"] = fmt.Sprintf("%v-%d", md["name"], i)
				md["creationTimestamp"] = "2026-11-30T10:00:00Z"
				md["labels"] = map[string]any{"shoot.gardener.cloud/status": "healthy", "x&<y>": "z"}
				md["managedFields"] = []any{map[string]any{"manager": "kubectl", "operation": "Update", "apiVersion": apiVersion,
					"time": "2026-11-30T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}}}}}}
				if kind == "Shoot" && i == 1 {
					o["status"] = map[string]any{"hibernated": true, "technicalID": "shoot--dev--x",
						"lastOperation": map[string]any{"type": "Reconcile", "state": "Succeeded", "progress": 100},
						"conditions":    []any{map[string]any{"type": "APIServerAvailable", "status": "True"}}}
				}
				b, err = json.Marshal(o)
				if err != nil {
					t.Fatal(err)
				}
				out[apiVersion+"/"+kind] = append(out[apiVersion+"/"+kind], b)
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("%d kinds among Gardener's examples", len(out))
	}
	return out
}

// TestOfAsReference: Of's Tables of Gardener's example objects, listed and each alone, equal those of referenceOf
// (after decoding: the rows' PartialObjectMetadata are the items' own metadata bytes, not re-encoded), for every
// includeObject policy and both Table versions; the metadata keeps what json.Marshal would escape.
func TestOfAsReference(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for key, items := range exampleObjects(t) {
		apiVersion, kind := key[:strings.LastIndex(key, "/")], key[strings.LastIndex(key, "/")+1:]
		list := []byte(fmt.Sprintf(`{"apiVersion":%q,"kind":"%sList","metadata":{"resourceVersion":"42","continue":"c"},"items":[%s]}`,
			apiVersion, kind, bytes.Join(items, []byte(","))))
		// The items before the kind, as the gateway never writes them.
		late := []byte(fmt.Sprintf(`{"items":[%s],"metadata":{"resourceVersion":"42"},"kind":"%sList","apiVersion":%q}`,
			bytes.Join(items, []byte(",")), kind, apiVersion))
		var indented bytes.Buffer // whitespace between the tokens
		if err := json.Indent(&indented, list, "", "  "); err != nil {
			t.Fatal(err)
		}
		for _, doc := range [][]byte{list, late, indented.Bytes(), items[0], items[1],
			[]byte(fmt.Sprintf(`{"apiVersion":%q,"kind":"%sList","items":[]}`, apiVersion, kind)),
			[]byte(fmt.Sprintf(`{"apiVersion":%q,"kind":"%sList","items":null}`, apiVersion, kind))} {
			for _, include := range []kmetav1.IncludeObjectPolicy{kmetav1.IncludeNone, kmetav1.IncludeMetadata, kmetav1.IncludeObject} {
				for _, v := range []string{"v1", "v1beta1"} {
					want, err := referenceOf(doc, v, include, now)
					if err != nil {
						t.Fatal(err)
					}
					got, err := Of(doc, v, include, now)
					if err != nil {
						t.Fatalf("%s, %s, %s: %v", key, include, v, err)
					}
					if g, w := normalized(t, got), normalized(t, want); !reflect.DeepEqual(g, w) {
						t.Fatalf("%s %.60s…, include %s, %s:\n got  %v\n want %v", key, doc, include, v, g, w)
					}
				}
			}
		}
	}
}

// OfList, given a list as the gateway hands it to a ListWriter (its head and each item's JSON), makes the Table Of
// makes of the list's document, for every kind of Gardener's examples, include policy and Table version; a head that
// is not a list's, or not a kind served, is an error.
func TestOfListAsOf(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	memo := NewMemo()
	for key, items := range exampleObjects(t) {
		apiVersion, kind := key[:strings.LastIndex(key, "/")], key[strings.LastIndex(key, "/")+1:]
		head := fmt.Appendf(nil, `{"apiVersion":%q,"kind":"%sList","metadata":{"resourceVersion":"42","continue":"c","remainingItemCount":3}}`, apiVersion, kind)
		for _, its := range [][][]byte{items, nil} {
			doc := append(append(bytes.TrimSuffix(bytes.Clone(head), []byte("}")), `,"items":[`...), bytes.Join(its, []byte(","))...)
			doc = append(doc, "]}"...)
			for _, include := range []kmetav1.IncludeObjectPolicy{kmetav1.IncludeNone, kmetav1.IncludeMetadata, kmetav1.IncludeObject} {
				for _, v := range []string{"v1", "v1beta1"} {
					want, err := Of(doc, v, include, now)
					if err != nil {
						t.Fatal(err)
					}
					// Without a memo, then with the shared one twice: the first fills it, the second reads every row
					// from it.
					for i, m := range []*Memo{nil, memo, memo} {
						got, err := OfList(head, its, v, include, now, m)
						if err != nil {
							t.Fatalf("%s, %s, %s: %v", key, include, v, err)
						}
						if g, w := normalized(t, got), normalized(t, want); !reflect.DeepEqual(g, w) {
							t.Fatalf("%s, %d items, include %s, %s, pass %d:\n got  %v\n want %v", key, len(its), include, v, i, g, w)
						}
					}
				}
			}
		}
	}
	for _, head := range []string{`{"apiVersion":"v1","kind":"ConfigMap"}`, `{"apiVersion":"v1","kind":"NoSuchList"}`, `{"apiVersion":"v1","kind":"ConfigMapList","metadata":[]}`, `[`} {
		if _, err := OfList([]byte(head), nil, "v1", kmetav1.IncludeMetadata, now, nil); err == nil {
			t.Errorf("OfList of the head %s: no error", head)
		}
	}
}

func normalized(t *testing.T, tb *kmetav1.Table) any {
	t.Helper()
	b, err := json.Marshal(tb)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// BenchmarkOf makes the Table of a list of 2,000 of Gardener's example shoots (with managedFields), as kubectl get
// asks for it (metadata included), with Of, with referenceOf and from the list's parts (OfList) without and with a
// memo (after the first round, every item from it), and encodes it.
func BenchmarkOf(b *testing.B) {
	t := &testing.T{}
	shoots := exampleObjects(t)["core.gardener.cloud/v1beta1/Shoot"]
	if len(shoots) == 0 {
		b.Fatal("no example shoot")
	}
	var items [][]byte
	for i := range 2000 {
		items = append(items, bytes.Replace(shoots[i%3], []byte(`"name":"`), fmt.Appendf(nil, `"name":"s%04d-`, i), 1))
	}
	list := fmt.Appendf(nil, `{"apiVersion":"core.gardener.cloud/v1beta1","kind":"ShootList","metadata":{"resourceVersion":"42"},"items":[%s]}`,
		bytes.Join(items, []byte(",")))
	now := time.Now()
	b.Logf("list of %d bytes", len(list))
	for _, c := range []struct {
		name string
		of   func([]byte, string, kmetav1.IncludeObjectPolicy, time.Time) (*kmetav1.Table, error)
	}{{"of", Of}, {"reference", referenceOf}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(list)))
			for b.Loop() {
				if _, err := c.of(list, "v1", kmetav1.IncludeMetadata, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	head := []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"ShootList","metadata":{"resourceVersion":"42"}}`)
	for _, c := range []struct {
		name string
		memo *Memo
	}{{"list-parts", nil}, {"list-parts-memo", NewMemo()}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(list)))
			for b.Loop() {
				if _, err := OfList(head, items, "v1", kmetav1.IncludeMetadata, now, c.memo); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	tb, err := Of(list, "v1", kmetav1.IncludeMetadata, now)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			if err := json.NewEncoder(io.Discard).Encode(tb); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEncodeAsJSON: encode writes what encoding/json writes of a Table (after decoding: encoding/json compacts and
// HTML-escapes the rows' objects, which encode writes as they are), for every includeObject policy.
func TestEncodeAsJSON(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	shoots := exampleObjects(t)["core.gardener.cloud/v1beta1/Shoot"]
	list := fmt.Appendf(nil, `{"apiVersion":"core.gardener.cloud/v1beta1","kind":"ShootList","metadata":{"resourceVersion":"42"},"items":[%s]}`,
		bytes.Join(shoots, []byte(",")))
	for _, include := range []kmetav1.IncludeObjectPolicy{kmetav1.IncludeNone, kmetav1.IncludeMetadata, kmetav1.IncludeObject} {
		tb, err := Of(list, "v1", include, now)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encode(tb)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(tb); err != nil {
			t.Fatal(err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil || !bytes.HasSuffix(got, []byte("}\n")) {
			t.Fatalf("include %s: %v; %q", include, err, got[max(0, len(got)-10):])
		}
		if err := json.Unmarshal(want.Bytes(), &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("include %s:\n got  %s\n want %s", include, got, want.Bytes())
		}
		if include == kmetav1.IncludeNone && !bytes.Equal(got, want.Bytes()) {
			t.Errorf("no objects, so the same bytes:\n got  %s\n want %s", got, want.Bytes())
		}
	}
}

// FuzzOf: for any document that encoding/json reads into a Table (referenceOf) and that repeats no name (where
// encoding/json merges a repeated metadata), Of makes an equal Table.
func FuzzOf(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"ShootList","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a","labels":{"shoot.gardener.cloud/status":"healthy"},"creationTimestamp":"2026-11-30T10:00:00Z"},"spec":{"region":"r","hibernation":{"enabled":true}},"status":{"conditions":[{"type":"APIServerAvailable","status":"True"}],"lastOperation":{"type":"Create","state":"Processing","progress":5}}}]}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"e"},"involvedObject":{"kind":"Shoot","name":"x"},"count":3,"series":{"count":2}}`))
	f.Add([]byte(`{"items":[{"metadata":{"name":"b"}}],"kind":"ProjectList","apiVersion":"core.gardener.cloud/v1beta1"}`))
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !jsontext.Value(doc).IsValid() {
			return
		}
		for _, include := range []kmetav1.IncludeObjectPolicy{kmetav1.IncludeNone, kmetav1.IncludeMetadata, kmetav1.IncludeObject} {
			want, err := referenceOf(doc, "v1", include, now)
			if err != nil {
				return
			}
			got, err := Of(doc, "v1", include, now)
			if err != nil {
				t.Fatalf("include %s: %v; encoding/json read it", include, err)
			}
			if include == kmetav1.IncludeMetadata {
				// A row's metadata is the item's own; encoding/json's drops what ObjectMeta does not know, which the
				// gateway never writes.
				typedMetadata(t, got)
			}
			if g, w := normalized(t, got), normalized(t, want); !reflect.DeepEqual(g, w) {
				t.Fatalf("include %s:\n got  %v\n want %v", include, g, w)
			}
			if _, err := encode(got); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// typedMetadata decodes and encodes the rows' PartialObjectMetadata again, keeping what ObjectMeta knows.
func typedMetadata(t *testing.T, tb *kmetav1.Table) {
	t.Helper()
	for i, r := range tb.Rows {
		var pom kmetav1.PartialObjectMetadata
		if err := utiljson.Unmarshal(r.Object.Raw, &pom); err != nil {
			return // encoding/json refused it too
		}
		b, err := json.Marshal(pom)
		if err != nil {
			t.Fatal(err)
		}
		tb.Rows[i].Object.Raw = b
	}
}
