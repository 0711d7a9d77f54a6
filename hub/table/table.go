package table

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/proto/columns"
	cliv1 "github.com/trellis-dev/trellis/proto/gen/trellis/cli/v1"
)

// Wanted returns the Table version an Accept header asks for ("v1" or "v1beta1" of meta.k8s.io), "" when it asks
// for none. Kubernetes' clients list a Table first and plain JSON after it; the first acceptable entry decides.
func Wanted(accept string) string {
	for _, entry := range strings.Split(accept, ",") {
		t, params, err := mime.ParseMediaType(strings.TrimSpace(entry))
		if err != nil || t != "application/json" {
			continue
		}
		if params["as"] == "" {
			return ""
		}
		if params["as"] == "Table" && params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1") {
			return params["v"]
		}
	}
	return ""
}

// Handler serves gets and lists that ask for a Table: it asks next for the JSON and turns the answer into a Table;
// every other request passes to next unchanged. now is the clock of the AGE column.
func Handler(next http.Handler, now func() time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := Wanted(r.Header.Get("Accept"))
		q := r.URL.Query()
		if v == "" || r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		include := q.Get("includeObject")
		switch include {
		case "":
			include = string(kmetav1.IncludeMetadata)
		case string(kmetav1.IncludeNone), string(kmetav1.IncludeMetadata), string(kmetav1.IncludeObject):
		default:
			writeJSON(w, http.StatusBadRequest, kmetav1.Status{TypeMeta: kmetav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: kmetav1.StatusFailure,
				Reason: kmetav1.StatusReasonBadRequest, Code: http.StatusBadRequest,
				Message: fmt.Sprintf("includeObject: %q is not one of None, Metadata, Object", include)})
			return
		}
		q.Del("includeObject")
		r2 := r.Clone(r.Context())
		r2.URL.RawQuery = q.Encode()
		r2.Header.Set("Accept", "application/json")
		r2.Header.Del("Accept-Encoding") // re-encoded here: compressed, if at all, as it leaves (gateway.Compress)
		if q.Get("watch") == "true" || q.Get("watch") == "1" || strings.Contains(r.URL.Path, "/watch/") {
			tw := &watchWriter{w: w, v: v, include: kmetav1.IncludeObjectPolicy(include), now: now}
			next.ServeHTTP(tw, r2)
			tw.Flush()
			return
		}
		rec := httptest.NewRecorder() // the answer to re-encode
		next.ServeHTTP(rec, r2)
		if rec.Code != http.StatusOK {
			copyHeader(w.Header(), rec.Header())
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		t, err := Of(rec.Body.Bytes(), v, kmetav1.IncludeObjectPolicy(include), now())
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, kmetav1.Status{TypeMeta: kmetav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: kmetav1.StatusFailure,
				Reason: kmetav1.StatusReasonInternalError, Code: http.StatusInternalServerError, Message: "table: " + err.Error()})
			return
		}
		for _, h := range []string{"Audit-Id", "Warning"} {
			if vs := rec.Header().Values(h); len(vs) > 0 {
				w.Header()[h] = vs
			}
		}
		writeJSON(w, http.StatusOK, t)
	})
}

// watchWriter turns a watch's JSON event lines into events whose objects are Tables of one row, as kube-apiserver
// answers a watch asking for a Table (kubectl get -w): the first carries the column definitions, later ones only
// their row; a bookmark is a Table without rows whose resourceVersion is the bookmark's; an ERROR event (a Status)
// and an answer that is not a watch stream (an error) pass unchanged.
type watchWriter struct {
	w       http.ResponseWriter
	v       string
	include kmetav1.IncludeObjectPolicy
	now     func() time.Time
	code    int
	buf     []byte // an incomplete line
	headers bool   // the column definitions were sent
}

func (t *watchWriter) Header() http.Header { return t.w.Header() }

func (t *watchWriter) WriteHeader(code int) {
	t.code = code
	t.w.WriteHeader(code)
}

func (t *watchWriter) Write(b []byte) (int, error) {
	if t.code == 0 {
		t.WriteHeader(http.StatusOK)
	}
	if t.code != http.StatusOK {
		return t.w.Write(b)
	}
	t.buf = append(t.buf, b...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := t.event(t.buf[:i])
		if _, err := t.w.Write(append(line, '\n')); err != nil {
			return 0, err
		}
		t.buf = t.buf[i+1:]
	}
}

// Flush writes what is complete and flushes it to the client.
func (t *watchWriter) Flush() {
	if f, ok := t.w.(http.Flusher); ok {
		f.Flush()
	}
}

// event re-encodes one watch event line with a Table for its object.
func (t *watchWriter) event(line []byte) []byte {
	var ev struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if json.Unmarshal(line, &ev) != nil || ev.Type == "ERROR" {
		return line
	}
	var tb *kmetav1.Table
	if ev.Type == "BOOKMARK" {
		var meta struct {
			Metadata kmetav1.ObjectMeta `json:"metadata"`
		}
		if json.Unmarshal(ev.Object, &meta) != nil {
			return line
		}
		tb = &kmetav1.Table{TypeMeta: kmetav1.TypeMeta{APIVersion: "meta.k8s.io/" + t.v, Kind: "Table"}, Rows: []kmetav1.TableRow{},
			ListMeta: kmetav1.ListMeta{ResourceVersion: meta.Metadata.ResourceVersion}}
	} else {
		var err error
		if tb, err = Of(ev.Object, t.v, t.include, t.now()); err != nil {
			return line
		}
		if t.headers {
			tb.ColumnDefinitions = nil
		}
		t.headers = true
	}
	out, err := json.Marshal(struct {
		Type   string         `json:"type"`
		Object *kmetav1.Table `json:"object"`
	}{ev.Type, tb})
	if err != nil {
		return line
	}
	return out
}

// Of turns a get's object or a list's JSON into a Table of version v with the kind's columns: NAME, the columns of
// priority 0, AGE, then those of higher priority (shown by -o wide), as Gardener's and Kubernetes' tables order them.
func Of(doc []byte, v string, include kmetav1.IncludeObjectPolicy, now time.Time) (*kmetav1.Table, error) {
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   kmetav1.ListMeta  `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
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
	cols, named, err := kindColumns(k)
	if err != nil {
		return nil, err
	}
	t := &kmetav1.Table{TypeMeta: kmetav1.TypeMeta{APIVersion: "meta.k8s.io/" + v, Kind: "Table"}, Rows: []kmetav1.TableRow{}}
	if list {
		t.ListMeta = head.Metadata
	}
	if named {
		t.ColumnDefinitions = append(t.ColumnDefinitions, kmetav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name",
			Description: "Name must be unique within a namespace."})
	}
	for _, c := range cols {
		t.ColumnDefinitions = append(t.ColumnDefinitions, kmetav1.TableColumnDefinition{Name: c.GetName(), Type: "string", Priority: c.GetPriority(),
			Description: "JSONPath " + c.GetJsonPath()})
	}
	for _, raw := range items {
		obj, err := decode(raw)
		if err != nil {
			return nil, err
		}
		var meta struct {
			APIVersion string             `json:"apiVersion"`
			Kind       string             `json:"kind"`
			Metadata   kmetav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, err
		}
		row := kmetav1.TableRow{Cells: []any{}}
		if named {
			row.Cells = append(row.Cells, meta.Metadata.Name)
		}
		for _, c := range cols {
			row.Cells = append(row.Cells, columns.Cell(c.GetJsonPath(), c.GetFormat(), obj, now))
		}
		switch include {
		case kmetav1.IncludeObject:
			row.Object = runtime.RawExtension{Raw: raw}
		case kmetav1.IncludeMetadata:
			if meta.APIVersion == "" {
				meta.APIVersion = head.APIVersion
			}
			pom := kmetav1.PartialObjectMetadata{TypeMeta: kmetav1.TypeMeta{APIVersion: "meta.k8s.io/" + v, Kind: "PartialObjectMetadata"}, ObjectMeta: meta.Metadata}
			j, err := json.Marshal(pom)
			if err != nil {
				return nil, err
			}
			row.Object = runtime.RawExtension{Raw: j}
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

// age is every table's AGE column, after the columns of priority 0.
var age = &cliv1.Column{Name: "Age", JsonPath: ".metadata.creationTimestamp", Format: cliv1.Format_FORMAT_AGE}

// kindColumns are the columns of kind k after NAME: its priority-0 columns, AGE, its wide columns; named is false
// for a kind whose tables have no NAME and AGE (trellis.cli.v1.Resource's unnamed).
func kindColumns(k api.Kind) (cols []*cliv1.Column, named bool, err error) {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(k.Message)
	if err != nil {
		return nil, false, err
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, false, fmt.Errorf("%s is not a message", k.Message)
	}
	all, err := columns.Of(md)
	if err != nil {
		return nil, false, err
	}
	r, _ := proto.GetExtension(md.Options(), cliv1.E_Resource).(*cliv1.Resource)
	if r.GetUnnamed() {
		return all, false, nil
	}
	var out, wide []*cliv1.Column
	for _, c := range all {
		if c.GetPriority() > 0 {
			wide = append(wide, c)
		} else {
			out = append(out, c)
		}
	}
	return append(append(out, age), wide...), true, nil
}

// decode decodes JSON with numbers as json.Number, as the columns' JSONPaths read it.
func decode(j []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var v any
	return v, d.Decode(&v)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = vs
	}
}
