package table

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/proto/columns"
	cliv1 "github.com/trellis-dev/trellis/proto/gen/trellis/cli/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
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
// every other request passes to next unchanged. now is the clock of the AGE column. What the Tables of lists read of
// their items is memoized (Memo) for as long as the items' JSON lives.
func Handler(next http.Handler, now func() time.Time) http.Handler {
	memo := NewMemo()
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
		rec := &listRecorder{ResponseRecorder: httptest.NewRecorder()} // the answer to re-encode
		next.ServeHTTP(rec, r2)
		if rec.Code != http.StatusOK {
			copyHeader(w.Header(), rec.Header())
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		var t *kmetav1.Table
		var err error
		if rec.listed {
			t, err = OfList(rec.head, rec.items, v, kmetav1.IncludeObjectPolicy(include), now(), memo)
		} else {
			t, err = Of(rec.Body.Bytes(), v, kmetav1.IncludeObjectPolicy(include), now())
		}
		if err != nil {
			writeInternalError(w, err)
			return
		}
		for _, h := range []string{"Audit-Id", "Warning"} {
			if vs := rec.Header().Values(h); len(vs) > 0 {
				w.Header()[h] = vs
			}
		}
		b, err := encode(t)
		if err != nil {
			writeInternalError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b) //nolint:gosec // G705: a Table served as application/json, not HTML
	})
}

// listRecorder records an answer; a list the gateway hands it as its parts (gateway.ListWriter) is kept as they are,
// its items the cache's memoized JSON, not joined into one document to be read again.
type listRecorder struct {
	*httptest.ResponseRecorder
	listed bool
	head   []byte
	items  [][]byte
}

var _ gateway.ListWriter = (*listRecorder)(nil)

func (r *listRecorder) WriteListJSON(head []byte, items [][]byte) {
	r.listed, r.head, r.items = true, head, items
}

// encode is json.Marshal of t, with a newline as json.Encoder ends it, but for the rows' objects: those are JSON that
// Of made (an item's bytes, or its metadata's in a PartialObjectMetadata), written as they are, where encoding/json
// would check and compact them again (a fifth of a large list's Table, measured).
func encode(t *kmetav1.Table) ([]byte, error) {
	head := *t
	head.Rows = nil
	hb, err := json.Marshal(&head)
	if err != nil {
		return nil, err
	}
	open, ok := bytes.CutSuffix(hb, []byte(`"rows":null}`))
	if !ok {
		return nil, fmt.Errorf("encode: a Table ends in %q", hb[max(0, len(hb)-20):])
	}
	size := len(open) + 3
	for _, r := range t.Rows {
		size += len(r.Object.Raw) + 64
	}
	out := make([]byte, 0, size)
	out = append(append(out, open...), `"rows":[`...)
	for i, r := range t.Rows {
		obj := r.Object.Raw
		r.Object.Raw = nil
		rb, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, ',')
		}
		if obj == nil {
			out = append(out, rb...)
			continue
		}
		rest, ok := bytes.CutSuffix(rb, []byte(`"object":null}`))
		if !ok {
			return nil, fmt.Errorf("encode: a row ends in %q", rb[max(0, len(rb)-20):])
		}
		out = append(append(append(out, rest...), `"object":`...), obj...)
		out = append(out, '}')
	}
	return append(out, "]}\n"...), nil
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
		if _, err := t.w.Write(append(line, '\n')); err != nil { //nolint:gosec // G705: JSON watch events served as application/json, not HTML
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
//
// A list of thousands of shoots is tens of megabytes of JSON, so Of reads it once with jsontext's decoder: of each
// item it decodes only the members its columns read (need), and takes the metadata of a PartialObjectMetadata row
// as the bytes the item has (compact JSON from the gateway), not decoded and encoded again.
func Of(doc []byte, v string, include kmetav1.IncludeObjectPolicy, now time.Time) (*kmetav1.Table, error) {
	dec := newDecoder(doc)
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("decode: %w", orNotObject(err))
	}
	var (
		apiVersion, kind string
		listMeta         []byte
		items            jsontext.Value // the items when they come before apiVersion and kind (the gateway's come after)
		t                *kmetav1.Table
		tb               *tableBuilder
	)
	start := func() error {
		kindName, list := strings.CutSuffix(kind, "List")
		if !list {
			return nil // an object: decided at the end, when all of it has been seen
		}
		k, ok := api.KindFor(apiVersion, kindName)
		if !ok {
			return fmt.Errorf("no kind %s %s", apiVersion, kindName)
		}
		var err error
		t, tb, err = newTable(k, v, include, now)
		return err
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, fmt.Errorf("decode: %w", err)
		}
		switch key := name.String(); key { // a token is valid until the decoder's next call
		case "apiVersion", "kind":
			val, err := dec.ReadToken()
			if err != nil {
				return nil, fmt.Errorf("decode: %w", err)
			}
			if key == "kind" {
				kind = val.String()
			} else {
				apiVersion = val.String()
			}
		case "metadata":
			val, err := dec.ReadValue()
			if err != nil {
				return nil, fmt.Errorf("decode: %w", err)
			}
			listMeta = bytes.Clone(val)
		case "items":
			if t == nil && apiVersion != "" && kind != "" {
				if err := start(); err != nil {
					return nil, err
				}
			}
			if tb == nil {
				val, err := dec.ReadValue()
				if err != nil {
					return nil, fmt.Errorf("decode: %w", err)
				}
				items = bytes.Clone(val)
				continue
			}
			if err := tb.rows(dec, doc, t); err != nil {
				return nil, err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return nil, fmt.Errorf("decode: %w", err)
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if t == nil {
		if _, list := strings.CutSuffix(kind, "List"); list && (items != nil || bytes.Contains(doc, []byte(`"items"`))) {
			if err := start(); err != nil {
				return nil, err
			}
		}
	}
	if t == nil { // a single object: one row
		k, ok := api.KindFor(apiVersion, kind)
		if !ok {
			return nil, fmt.Errorf("no kind %s %s", apiVersion, kind)
		}
		var err error
		if t, tb, err = newTable(k, v, include, now); err != nil {
			return nil, err
		}
		if err := tb.row(newDecoder(doc), doc, t); err != nil {
			return nil, err
		}
		return t, nil
	}
	if len(listMeta) > 0 {
		if err := utiljson.Unmarshal(listMeta, &t.ListMeta); err != nil { // case-sensitive, as Kubernetes reads it
			return nil, fmt.Errorf("decode list metadata: %w", err)
		}
	}
	if items != nil {
		if err := tb.rows(newDecoder(items), items, t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// OfList is Of for a list given as its parts (gateway.ListWriter): head, the JSON object of its members but items,
// and each item's JSON. The items are read where they are, one at a time; with a memo, only those it does not hold
// yet, which it then keeps (Memo: the items must not change for as long as they live).
func OfList(head []byte, items [][]byte, v string, include kmetav1.IncludeObjectPolicy, now time.Time, memo *Memo) (*kmetav1.Table, error) {
	var h struct {
		APIVersion string           `json:"apiVersion"`
		Kind       string           `json:"kind"`
		Metadata   kmetav1.ListMeta `json:"metadata"`
	}
	if err := utiljson.Unmarshal(head, &h); err != nil { // case-sensitive, as Kubernetes reads it
		return nil, fmt.Errorf("decode list: %w", err)
	}
	kindName, list := strings.CutSuffix(h.Kind, "List")
	if !list {
		return nil, fmt.Errorf("decode list: kind %q is not a list", h.Kind)
	}
	k, ok := api.KindFor(h.APIVersion, kindName)
	if !ok {
		return nil, fmt.Errorf("no kind %s %s", h.APIVersion, kindName)
	}
	t, tb, err := newTable(k, v, include, now)
	if err != nil {
		return nil, err
	}
	t.ListMeta = h.Metadata
	for _, item := range items {
		if memo == nil {
			if err := tb.row(newDecoder(item), item, t); err != nil {
				return nil, err
			}
			continue
		}
		im, err := tb.memoized(memo, item)
		if err != nil {
			return nil, fmt.Errorf("decode: %w", err)
		}
		tb.add(t, im, item, bytes.TrimSpace(item))
	}
	return t, nil
}

func orNotObject(err error) error {
	if err != nil {
		return err
	}
	return errors.New("the document is not a JSON object")
}

// tableBuilder makes the rows of a kind's Table.
type tableBuilder struct {
	cols    []*cliv1.Column
	named   bool
	need    *need
	v       string
	include kmetav1.IncludeObjectPolicy
	now     time.Time
}

// newTable is an empty Table of kind k's columns, and what adds its rows.
func newTable(k api.Kind, v string, include kmetav1.IncludeObjectPolicy, now time.Time) (*kmetav1.Table, *tableBuilder, error) {
	cols, named, err := kindColumns(k)
	if err != nil {
		return nil, nil, err
	}
	t := &kmetav1.Table{TypeMeta: kmetav1.TypeMeta{APIVersion: "meta.k8s.io/" + v, Kind: "Table"}, Rows: []kmetav1.TableRow{}}
	if named {
		t.ColumnDefinitions = append(t.ColumnDefinitions, kmetav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name",
			Description: "Name must be unique within a namespace."})
	}
	for _, c := range cols {
		t.ColumnDefinitions = append(t.ColumnDefinitions, kmetav1.TableColumnDefinition{Name: c.GetName(), Type: "string", Priority: c.GetPriority(),
			Description: "JSONPath " + c.GetJsonPath()})
	}
	n := &need{members: map[string]*need{}}
	n.add("metadata", "name")
	for _, c := range cols {
		n.addColumn(c)
	}
	return t, &tableBuilder{cols: cols, named: named, need: n, v: v, include: include, now: now}, nil
}

// newDecoder reads src as encoding/json does: the last of repeated names wins, invalid UTF-8 reads as U+FFFD.
func newDecoder(src []byte) *jsontext.Decoder {
	return jsontext.NewDecoder(bytes.NewReader(src), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

// rows adds a row for every item of the array dec reads next from src.
func (b *tableBuilder) rows(dec *jsontext.Decoder, src []byte, t *kmetav1.Table) error {
	if dec.PeekKind() == 'n' { // "items":null
		_, err := dec.ReadToken()
		return err
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		if err == nil {
			return errors.New("decode: items is not an array")
		}
		return fmt.Errorf("decode: %w", err)
	}
	for dec.PeekKind() != ']' {
		if err := b.row(dec, src, t); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// row adds the row of the object dec reads next from src.
func (b *tableBuilder) row(dec *jsontext.Decoder, src []byte, t *kmetav1.Table) error {
	var raw jsontext.Value
	if b.include == kmetav1.IncludeObject {
		var err error
		if raw, err = dec.ReadValue(); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		raw = bytes.Clone(raw)
		src, dec = raw, newDecoder(raw)
	}
	im, err := b.decodeItem(dec, src)
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	b.add(t, im, src, raw)
	return nil
}

var errNotAnObject = errors.New("an item is not an object")

// decodeItem reads what the table takes of the object dec reads next from src: its cells (the timed ones as their
// values) and where its metadata is in src.
func (b *tableBuilder) decodeItem(dec *jsontext.Decoder, src []byte) (*itemMemo, error) {
	obj, meta, err := decodeNeeded(dec, src, b.need, true)
	if err != nil {
		return nil, err
	}
	m, ok := obj.(map[string]any)
	if !ok {
		return nil, errNotAnObject
	}
	im := &itemMemo{cells: make([]any, 0, len(b.cols)+1), metaStart: -1}
	if meta != nil {
		// meta is a part of src: its offset is how much shorter its capacity is.
		im.metaStart = cap(src) - cap(meta)
		im.metaEnd = im.metaStart + len(meta)
	}
	if b.named {
		md, _ := m["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		im.cells = append(im.cells, name)
	}
	for _, c := range b.cols {
		vals, err := columns.Values(c.GetJsonPath(), obj)
		switch {
		case err != nil:
			im.cells = append(im.cells, "<bad path>")
		case columns.Timed(c.GetFormat()):
			im.cells = append(im.cells, timedValues{format: c.GetFormat(), vals: vals})
		default:
			im.cells = append(im.cells, columns.Render(c.GetFormat(), vals, time.Time{}))
		}
	}
	return im, nil
}

// add adds the row of an item of src (raw: the item, when the rows include the objects) whose cells and metadata im
// holds; the timed cells are rendered at the table's time.
func (b *tableBuilder) add(t *kmetav1.Table, im *itemMemo, src, raw []byte) {
	row := kmetav1.TableRow{Cells: make([]any, len(im.cells))}
	for i, c := range im.cells {
		if tv, ok := c.(timedValues); ok {
			c = columns.Render(tv.format, tv.vals, b.now)
		}
		row.Cells[i] = c
	}
	switch {
	case b.include == kmetav1.IncludeObject:
		row.Object = runtime.RawExtension{Raw: raw}
	case b.include == kmetav1.IncludeMetadata || b.include == "":
		meta := []byte("{}")
		if im.metaStart >= 0 && im.metaEnd > im.metaStart && im.metaEnd <= len(src) {
			meta = src[im.metaStart:im.metaEnd]
		}
		j := make([]byte, 0, len(meta)+96)
		j = append(j, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/`...)
		j = append(j, b.v...)
		j = append(j, `","metadata":`...)
		j = append(append(j, meta...), '}')
		row.Object = runtime.RawExtension{Raw: j}
	}
	t.Rows = append(t.Rows, row)
}

// need is what a table reads of a JSON value: all of it, or the members named (each with what it reads of them).
type need struct {
	all     bool
	members map[string]*need
}

// add marks the value at the path of member names as needed whole.
func (n *need) add(path ...string) {
	for _, name := range path {
		if n.all {
			return
		}
		if n.members == nil {
			n.members = map[string]*need{}
		}
		child := n.members[name]
		if child == nil {
			child = &need{}
			n.members[name] = child
		}
		n = child
	}
	n.all, n.members = true, nil
}

// addColumn marks what column c reads: the members its JSONPath names up to its first bracket, wildcard or filter
// (from there the whole value), all of the object for a path of "." (but what the formats that take it read).
func (n *need) addColumn(c *cliv1.Column) {
	if c.GetFormat() == cliv1.Format_FORMAT_HIBERNATION {
		n.add("spec", "hibernation")
		n.add("status", "hibernated")
		return
	}
	p := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(c.GetJsonPath()), "{"), "}")
	if !strings.HasPrefix(p, ".") {
		n.add()
		return
	}
	var path []string
	for p != "" {
		if p[0] != '.' {
			break // a bracket: what follows reads the value at path
		}
		p = p[1:]
		i := strings.IndexAny(p, ".[")
		if i < 0 {
			i = len(p)
		}
		name := p[:i]
		if name == "" || strings.ContainsAny(name, `*@$()?{}'"\`) {
			break // recursive descent, a wildcard or anything else: the whole value at path
		}
		path = append(path, name)
		p = p[i:]
	}
	n.add(path...)
}

// decodeNeeded decodes what n needs of the value dec reads next from src (json.Number for numbers, as the columns
// read them) and skips the rest; with meta, it also returns the bytes of the top level's metadata member (in src).
func decodeNeeded(dec *jsontext.Decoder, src []byte, n *need, meta bool) (any, []byte, error) {
	if dec.PeekKind() != '{' || !meta && (n == nil || n.all) {
		v, err := decodeValue(dec)
		return v, nil, err
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, nil, err
	}
	m := map[string]any{}
	var metaRaw []byte
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, nil, err
		}
		key := name.String()
		child := n.members[key]
		if n.all {
			child = whole
		}
		switch {
		case meta && key == "metadata":
			// The value's bytes are src's from the end of the name (the offset of the last token read) to its own end,
			// but the colon and whitespace before it.
			start := dec.InputOffset()
			if child != nil {
				m[key], _, err = decodeNeeded(dec, src, child, false)
			} else {
				err = dec.SkipValue()
			}
			if err != nil {
				return nil, nil, err
			}
			metaRaw = bytes.TrimLeft(src[start:dec.InputOffset()], ": \t\r\n")
		case child != nil:
			if m[key], _, err = decodeNeeded(dec, src, child, false); err != nil {
				return nil, nil, err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return nil, nil, err
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, nil, err
	}
	return m, metaRaw, nil
}

// whole is the need of all of a value.
var whole = &need{all: true}

// decodeValue decodes the value dec reads next as encoding/json decodes into an any with UseNumber.
func decodeValue(dec *jsontext.Decoder) (any, error) {
	return kjson.DecodeAny(dec, func(lit string) (any, error) { return json.Number(lit), nil })
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

// writeInternalError answers a Table that could not be made from the answer of next.
func writeInternalError(w http.ResponseWriter, err error) {
	writeJSON(w, http.StatusInternalServerError, kmetav1.Status{TypeMeta: kmetav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: kmetav1.StatusFailure,
		Reason: kmetav1.StatusReasonInternalError, Code: http.StatusInternalServerError, Message: "table: " + err.Error()})
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
