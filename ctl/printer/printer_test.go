package printer

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/ctl/kinds"
	"github.com/trellis-dev/trellis/ctl/manifest"
	"github.com/trellis-dev/trellis/ctl/resource"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/jsonpath"
	"github.com/trellis-dev/trellis/proto/kjson"
)

var now = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func kindOf(t *testing.T, resourceName string) *resource.Kind {
	k, err := resource.NewRegistry(kinds.All).Lookup(resourceName)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func decodeKind(t *testing.T, k *resource.Kind, j string) proto.Message {
	o := k.New()
	if err := kjson.Unmarshal([]byte(j), o); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestShootTable(t *testing.T) {
	k := kindOf(t, "shoots")
	shoot := decodeKind(t, k, `{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot",
	  "metadata":{"name":"local","namespace":"garden-local","creationTimestamp":"2030-01-02T03:00:00Z","labels":{"shoot.gardener.cloud/status":"healthy"}},
	  "spec":{"cloudProfile":{"kind":"CloudProfile","name":"local"},"provider":{"type":"local"},"region":"local","kubernetes":{"version":"1.35.0"},
	    "hibernation":{"enabled":true},"seedName":"seed-1","purpose":"evaluation"},
	  "status":{"hibernated":false,"lastOperation":{"type":"Reconcile","state":"Processing","progress":42}}}`)
	var b bytes.Buffer
	p, err := New(&b, k, Options{Now: func() time.Time { return now }, AllNamespaces: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Print([]proto.Message{shoot}, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	header, row := strings.Fields(lines[0]), lines[1]
	if strings.Join(header, " ") != "NAMESPACE NAME CLOUDPROFILE PROVIDER REGION K8S VERSION HIBERNATION LAST OPERATION STATUS AGE" {
		t.Fatalf("header %q", lines[0])
	}
	for _, cell := range []string{"garden-local", "local", "1.35.0", "Hibernating", "Reconcile Processing (42%)", "healthy", "4m5s"} {
		if !strings.Contains(row, cell) {
			t.Errorf("row %q lacks %q", row, cell)
		}
	}
	b.Reset()
	p, _ = New(&b, k, Options{Format: "wide", Now: func() time.Time { return now }})
	_ = p.Print([]proto.Message{shoot}, false)
	if !strings.Contains(b.String(), "TECHNICAL ID") || !strings.Contains(b.String(), "seed-1") || strings.Contains(b.String(), "NAMESPACE") {
		t.Fatalf("wide:\n%s", b.String())
	}
}

// TestEventTable: Events print kube-apiserver's columns, without NAME and AGE of their own (the kind is unnamed).
func TestEventTable(t *testing.T) {
	k := kindOf(t, "events")
	ev := decodeKind(t, k, `{"metadata":{"name":"ev1","namespace":"garden-dev","creationTimestamp":"2030-01-01T03:04:05Z"},
	  "involvedObject":{"kind":"Shoot","name":"local","namespace":"garden-dev"},"reason":"Reconciled","message":"  done\n",
	  "type":"Normal","source":{"component":"gardenlet"},"firstTimestamp":"2030-01-01T03:04:05Z","lastTimestamp":"2030-01-02T02:04:05Z"}`)
	series := decodeKind(t, k, `{"metadata":{"name":"ev2","namespace":"garden-dev"},"involvedObject":{"kind":"Seed"},
	  "reason":"Flapping","type":"Warning","eventTime":"2030-01-02T00:04:05.000000Z","reportingComponent":"trellis.dev/care",
	  "reportingInstance":"hub-0","series":{"count":7,"lastObservedTime":"2030-01-02T03:00:05.000000Z"}}`)
	for _, c := range []struct {
		format, header string
		rows           []string
	}{
		{"", "LAST SEEN|TYPE|REASON|OBJECT|MESSAGE", []string{"60m|Normal|Reconciled|shoot/local|done", "4m|Warning|Flapping|seed|"}},
		{"wide", "LAST SEEN|TYPE|REASON|OBJECT|SUBOBJECT|SOURCE|MESSAGE|FIRST SEEN|COUNT|NAME", []string{
			"60m|Normal|Reconciled|shoot/local||gardenlet|done|24h|1|ev1",
			"4m|Warning|Flapping|seed||trellis.dev/care, hub-0||3h|7|ev2"}},
	} {
		var b bytes.Buffer
		p, err := New(&b, k, Options{Format: c.format, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Print([]proto.Message{ev, series}, false); err != nil {
			t.Fatal(err)
		}
		// Cells by the header's column offsets (an empty cell is only spaces).
		lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
		var starts []int
		for _, loc := range regexp.MustCompile(`\S+( \S+)*`).FindAllStringIndex(lines[0], -1) {
			starts = append(starts, loc[0])
		}
		var got []string
		for _, l := range lines {
			var cs []string
			for i, start := range starts {
				end := len(l)
				if i+1 < len(starts) {
					end = min(starts[i+1], len(l))
				}
				cs = append(cs, strings.TrimSpace(l[min(start, len(l)):end]))
			}
			got = append(got, strings.Join(cs, "|"))
		}
		if want := append([]string{c.header}, c.rows...); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("-o %q:\n%s\nwant\n%s", c.format, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func TestFormatsRoundTrip(t *testing.T) {
	k := kindOf(t, "configmaps")
	objs := []proto.Message{
		&kcorev1.ConfigMap{ApiVersion: "v1", Kind: "ConfigMap", Metadata: &metav1.ObjectMeta{Name: "a", Namespace: "x", CreationTimestamp: timestamppb.New(now)}, Data: map[string]string{"k": "v", "l": "w"}},
		&kcorev1.ConfigMap{ApiVersion: "v1", Kind: "ConfigMap", Metadata: &metav1.ObjectMeta{Name: "b", Namespace: "x"}},
	}
	for _, format := range []string{"yaml", "json"} {
		var b bytes.Buffer
		p, err := New(&b, k, Options{Format: format})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Print(objs, false); err != nil {
			t.Fatal(err)
		}
		docs, err := manifest.Parse(format, b.Bytes())
		if err != nil || len(docs) != 2 || docs[1].Name != "b" {
			t.Fatalf("%s does not read back: %v %+v\n%s", format, err, docs, b.String())
		}
		back := decodeKind(t, k, string(docs[0].JSON))
		if !proto.Equal(back, objs[0]) {
			t.Fatalf("%s: %v != %v", format, back, objs[0])
		}
	}
	var b bytes.Buffer
	p, _ := New(&b, k, Options{Format: "name"})
	_ = p.Print(objs, false)
	// kubectl's JSONPath templates: on a single object, or on the List of several.
	p, _ = New(&b, k, Options{Format: "jsonpath={.data.k}"})
	_ = p.Print(objs[:1], true)
	p, _ = New(&b, k, Options{Format: `jsonpath={range .items[*]}{.metadata.name}={.data.k}{"\n"}{end}`})
	_ = p.Print(objs, false)
	p, _ = New(&b, k, Options{Now: func() time.Time { return now.Add(time.Hour) }})
	_ = p.Print(objs[:1], false)
	if got := b.String(); !strings.HasPrefix(got, "configmap/a\nconfigmap/b\nv\na=v\nb=\nNAME   DATA   AGE\na      2      60m\n") {
		t.Fatalf("%q", got)
	}
	if _, err := New(&b, k, Options{Format: "xml"}); err == nil {
		t.Fatal("xml accepted")
	}
	if _, err := New(&b, k, Options{Format: "jsonpath={.data"}); err == nil || !strings.Contains(err.Error(), "jsonpath template") {
		t.Fatalf("an unclosed template: %v", err)
	}
}

func TestCells(t *testing.T) {
	v, _ := DecodeJSON([]byte(`{"h":{"spec":{"hibernation":{"enabled":false}},"status":{"hibernated":true}},"a":"x","n":3,"l":[1,2],"m":{},"c":[{"type":"Ready","status":"False"}],
	  "op":{"type":"Create","state":"Succeeded","progress":100},"t":"2030-01-02T01:04:05Z"}`))
	for c, want := range map[resource.Column]string{
		{Path: ".a"}:       "x",
		{Path: ".n"}:       "3",
		{Path: ".missing"}: "<none>",
		{Path: ".l", Format: resource.FormatCount}:                            "2",
		{Path: ".m", Format: resource.FormatCount}:                            "0",
		{Path: `.c[?(@.type=="Ready")].status`, Format: resource.FormatReady}: "NotReady",
		{Path: `.c[?(@.type=="Other")].status`, Format: resource.FormatReady}: "Unknown",
		{Path: ".op", Format: resource.FormatLastOperation}:                   "Create Succeeded (100%)",
		{Path: ".nop", Format: resource.FormatLastOperation}:                  "<pending>",
		{Path: ".t", Format: resource.FormatAge}:                              "120m",
		{Path: ".", Format: resource.FormatHibernation}:                       "Awake",
		{Path: ".h", Format: resource.FormatHibernation}:                      "Waking Up",
	} {
		if got := Cell(c, v, now); got != want {
			t.Errorf("%s: %q, want %q", c.Path, got, want)
		}
	}
}

// TestGeneratedColumns checks every column of the generated kinds against the kind's message: each field a path
// names exists (by its JSON name), so a renamed field cannot leave a column silently empty.
func TestGeneratedColumns(t *testing.T) {
	shoot := kindOf(t, "shoots").New().ProtoReflect().Descriptor()
	for _, bad := range []string{".spec.regoin", `.status.conditions[?(@.typo=="x")].status`, ".spec.region.x", ".metadata.labels.x.y", ".spec.provider.workers.name"} {
		if checkPath(shoot, jsonpath.MustParse(bad)) == nil {
			t.Errorf("checkPath accepts %s", bad)
		}
	}
	for _, good := range []string{".metadata.labels['a/b']", ".spec.provider.workers[*].name", `.status.conditions[?(@.type=="x")].status`} {
		if err := checkPath(shoot, jsonpath.MustParse(good)); err != nil {
			t.Errorf("checkPath refuses %s: %v", good, err)
		}
	}
	for _, k := range kinds.All {
		for _, c := range append([]resource.Column{ageColumn}, k.Columns...) {
			p, err := jsonpath.Parse(c.Path)
			if err != nil {
				t.Errorf("%s %s: %v", k.Kind, c.Name, err)
				continue
			}
			if err := checkPath(k.New().ProtoReflect().Descriptor(), p); err != nil {
				t.Errorf("%s column %s (%s): %v", k.Kind, c.Name, c.Path, err)
			}
		}
	}
}

// checkPath walks a path through message descriptors.
func checkPath(md protoreflect.MessageDescriptor, p *jsonpath.Path) error {
	cur := at{msg: md}
	for _, s := range p.Steps() {
		var err error
		if cur, err = cur.step(s); err != nil {
			return err
		}
	}
	return nil
}

// at is where a path is: in a message, at a list or map field not yet stepped into, or at a scalar (all unset).
type at struct {
	msg  protoreflect.MessageDescriptor
	coll protoreflect.FieldDescriptor
}

func (a at) step(s jsonpath.Step) (at, error) {
	if a.coll != nil {
		if !s.Elements && !(a.coll.IsMap() && s.Field != "") {
			return a, fmt.Errorf("%s is a list or map", a.coll.Name())
		}
		elem := at{msg: a.coll.Message()}
		if a.coll.IsMap() {
			elem = at{msg: a.coll.MapValue().Message()}
		}
		if s.Filter != nil {
			if elem.msg == nil {
				return a, fmt.Errorf("filter on scalars of %s", a.coll.Name())
			}
			if err := checkPath(elem.msg, s.Filter); err != nil {
				return a, err
			}
		}
		return elem, nil
	}
	if a.msg == nil || s.Field == "" {
		return a, fmt.Errorf("no field to step into")
	}
	fd := a.msg.Fields().ByJSONName(s.Field)
	if fd == nil {
		return a, fmt.Errorf("%s has no field %q", a.msg.FullName(), s.Field)
	}
	if fd.IsList() || fd.IsMap() {
		return at{coll: fd}, nil
	}
	return at{msg: fd.Message()}, nil
}
