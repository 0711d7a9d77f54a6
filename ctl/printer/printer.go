package printer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/proto"
	k8sjsonpath "k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/ctl/resource"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// Formats lists the -o values.
var Formats = []string{"table", "wide", "yaml", "json", "name", "jsonpath=TEMPLATE"}

// Options say how to print.
type Options struct {
	// Format is one of Formats; "" is table.
	Format string
	// AllNamespaces adds a NAMESPACE column to tables of namespaced kinds.
	AllNamespaces bool
	// NoHeaders leaves out table headers.
	NoHeaders bool
	// Now is the time ages are computed from; nil means time.Now.
	Now func() time.Time
}

// Printer prints objects of one kind to w.
type Printer struct {
	w        io.Writer
	kind     *resource.Kind
	opts     Options
	template *k8sjsonpath.JSONPath // -o jsonpath=: kubectl's JSONPath templates (client-go's implementation)
	headered bool
}

// New returns a printer, or an error for an unknown format.
func New(w io.Writer, k *resource.Kind, opts Options) (*Printer, error) {
	p := &Printer{w: w, kind: k, opts: opts}
	if p.opts.Now == nil {
		p.opts.Now = time.Now
	}
	switch f := opts.Format; {
	case f == "", f == "table", f == "wide", f == "yaml", f == "json", f == "name":
	case strings.HasPrefix(f, "jsonpath="):
		// As kubectl's jsonpath printer: missing keys print nothing rather than fail.
		p.template = k8sjsonpath.New("jsonpath").AllowMissingKeys(true)
		if err := p.template.Parse(strings.TrimPrefix(f, "jsonpath=")); err != nil {
			return nil, fmt.Errorf("jsonpath template %q: %w", strings.TrimPrefix(f, "jsonpath="), err)
		}
	default:
		return nil, fmt.Errorf("unknown output format %q (want %s)", f, strings.Join(Formats, ", "))
	}
	return p, nil
}

// Print prints objects: one object (single) as itself, otherwise as a List in YAML and JSON.
func (p *Printer) Print(objs []proto.Message, single bool) error {
	switch p.opts.Format {
	case "yaml", "json":
		var doc []byte
		var err error
		if single && len(objs) == 1 {
			doc, err = kjson.Marshal(objs[0])
		} else {
			doc, err = listJSON(objs)
		}
		if err != nil {
			return err
		}
		return p.writeDoc(doc, false)
	}
	if p.template != nil && !(single && len(objs) == 1) {
		// As kubectl: a template applies to the whole List ({.items[*].metadata.name}, {range .items[*]}...).
		doc, err := listJSON(objs)
		if err != nil {
			return err
		}
		v, err := DecodeJSON(doc)
		if err != nil {
			return err
		}
		return p.execute(v)
	}
	if p.table() {
		t := p.newTable()
		for _, o := range objs {
			if err := t.row(o, ""); err != nil {
				return err
			}
		}
		return t.flush()
	}
	for _, o := range objs {
		if err := p.line(o); err != nil {
			return err
		}
	}
	return nil
}

// Event prints one watch event: a table row with an EVENT column (the header before the first), a JSON line
// {"type":...,"object":...}, a YAML document, "EVENT name" or the JSONPath's values.
func (p *Printer) Event(typ string, obj proto.Message) error {
	switch {
	case p.opts.Format == "json":
		o, err := kjson.Marshal(obj)
		if err != nil {
			return err
		}
		t, _ := json.Marshal(typ)
		_, err = fmt.Fprintf(p.w, "{\"type\":%s,\"object\":%s}\n", t, o)
		return err
	case p.opts.Format == "yaml":
		o, err := kjson.Marshal(obj)
		if err != nil {
			return err
		}
		return p.writeDoc(o, true)
	case p.table():
		t := p.newTable()
		if err := t.row(obj, typ); err != nil {
			return err
		}
		return t.flush()
	case p.opts.Format == "name":
		_, err := fmt.Fprintf(p.w, "%s %s\n", typ, Name(p.kind, obj))
		return err
	}
	return p.line(obj)
}

func (p *Printer) table() bool {
	return p.opts.Format == "" || p.opts.Format == "table" || p.opts.Format == "wide"
}

// line prints an object's name or what the JSONPath template makes of it.
func (p *Printer) line(o proto.Message) error {
	if p.template == nil {
		_, err := fmt.Fprintln(p.w, Name(p.kind, o))
		return err
	}
	v, err := Value(o)
	if err != nil {
		return err
	}
	return p.execute(v)
}

// execute prints the template's output for v, ended by a newline (kubectl leaves it out; a line per object or
// event reads better in a shell, and $(...) drops it anyway).
func (p *Printer) execute(v any) error {
	var b bytes.Buffer
	if err := p.template.Execute(&b, v); err != nil {
		return fmt.Errorf("jsonpath: %w", err)
	}
	if b.Len() == 0 || b.Bytes()[b.Len()-1] != '\n' {
		b.WriteByte('\n')
	}
	_, err := p.w.Write(b.Bytes())
	return err
}

// writeDoc writes a JSON document as indented JSON or YAML; sep starts YAML documents with "---" after the first.
func (p *Printer) writeDoc(doc []byte, sep bool) error {
	if p.opts.Format == "json" {
		b, err := IndentJSON(doc)
		if err != nil {
			return err
		}
		_, err = p.w.Write(b)
		return err
	}
	y, err := yaml.JSONToYAML(doc)
	if err != nil {
		return err
	}
	if sep && p.headered {
		if _, err := io.WriteString(p.w, "---\n"); err != nil {
			return err
		}
	}
	p.headered = true
	_, err = p.w.Write(y)
	return err
}

// IndentJSON indents a JSON document as -o json prints it, with a final newline.
func IndentJSON(doc []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Indent(&b, doc, "", "    "); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// listJSON is a kubectl List of objects.
func listJSON(objs []proto.Message) ([]byte, error) {
	b := []byte(`{"apiVersion":"v1","kind":"List","items":[`)
	for i, o := range objs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = kjson.AppendMarshal(b, o); err != nil {
			return nil, err
		}
	}
	return append(b, `],"metadata":{"resourceVersion":""}}`...), nil
}

// Name is an object's name as kubectl prints it: kind.group/name ("shoot.core.gardener.cloud/local",
// "secret/x").
func Name(k *resource.Kind, o proto.Message) string {
	return KindName(k) + "/" + resource.Meta(o).GetName()
}

// KindName is the lower-case kind with its group ("shoot.core.gardener.cloud", "secret").
func KindName(k *resource.Kind) string {
	if k.Group == "" {
		return strings.ToLower(k.Kind)
	}
	return strings.ToLower(k.Kind) + "." + k.Group
}

// Value returns an object as a value decoded from its JSON (maps, slices, json.Number, ...), for JSONPath.
func Value(o proto.Message) (any, error) {
	j, err := kjson.Marshal(o)
	if err != nil {
		return nil, err
	}
	return DecodeJSON(j)
}

// DecodeJSON decodes JSON with numbers as json.Number.
func DecodeJSON(j []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// table writes rows aligned by a tabwriter.
type table struct {
	p    *Printer
	tw   *tabwriter.Writer
	cols []resource.Column
}

func (p *Printer) newTable() *table {
	t := &table{p: p, tw: tabwriter.NewWriter(p.w, 0, 8, 3, ' ', 0)}
	for _, c := range p.kind.Columns {
		if c.Priority == 0 || p.opts.Format == "wide" {
			t.cols = append(t.cols, c)
		}
	}
	return t
}

func (t *table) row(o proto.Message, event string) error {
	p := t.p
	nsCol := p.opts.AllNamespaces && p.kind.Namespaced
	if !p.headered && !p.opts.NoHeaders {
		var h []string
		if event != "" {
			h = append(h, "EVENT")
		}
		if nsCol {
			h = append(h, "NAMESPACE")
		}
		if !p.kind.Unnamed {
			h = append(h, "NAME")
		}
		for _, c := range t.cols {
			h = append(h, c.Name)
		}
		if !p.kind.Unnamed {
			h = append(h, "AGE")
		}
		fmt.Fprintln(t.tw, strings.Join(h, "\t"))
	}
	p.headered = true
	v, err := Value(o)
	if err != nil {
		return err
	}
	var cells []string
	if event != "" {
		cells = append(cells, event)
	}
	md := resource.Meta(o)
	if nsCol {
		cells = append(cells, md.GetNamespace())
	}
	if !p.kind.Unnamed {
		cells = append(cells, md.GetName())
	}
	for _, c := range t.cols {
		cells = append(cells, Cell(c, v, p.opts.Now()))
	}
	if !p.kind.Unnamed {
		cells = append(cells, Cell(ageColumn, v, p.opts.Now()))
	}
	_, err = fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
	return err
}

func (t *table) flush() error { return t.tw.Flush() }

var ageColumn = resource.Column{Name: "AGE", Path: ".metadata.creationTimestamp", Format: resource.FormatAge}
