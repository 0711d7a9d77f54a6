package printer

import (
	"encoding/base64"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/ctl/resource"
	"github.com/trellis-dev/trellis/proto/jsonpath"
)

// Describe writes the human view of an object, as kubectl describe does: its metadata, then every other top-level
// field (spec, status, data, ...) as indented YAML, then the events about it. The values of a Secret's data are
// replaced by their sizes.
func Describe(w io.Writer, k *resource.Kind, o proto.Message, events []proto.Message, now time.Time) error {
	v, err := Value(o)
	if err != nil {
		return err
	}
	obj, _ := v.(map[string]any)
	md := resource.Meta(o)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "%s:\t%s\n", name, value) }
	field("Name", md.GetName())
	if k.Namespaced {
		field("Namespace", md.GetNamespace())
	}
	field("Kind", k.Kind+" ("+k.APIVersion()+")")
	field("Labels", join(md.GetLabels(), "\n\t"))
	field("Annotations", join(md.GetAnnotations(), "\n\t"))
	if ts := md.GetCreationTimestamp(); ts != nil {
		t := ts.AsTime()
		field("Created", fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), Age(t.Format(time.RFC3339), now)))
	}
	if ts := md.GetDeletionTimestamp(); ts != nil {
		field("Deleting since", ts.AsTime().UTC().Format(time.RFC3339))
	}
	field("UID", md.GetUid())
	field("Resource Version", md.GetResourceVersion())
	if md.GetGeneration() != 0 {
		field("Generation", fmt.Sprint(md.GetGeneration()))
	}
	if f := md.GetFinalizers(); len(f) > 0 {
		field("Finalizers", strings.Join(f, ", "))
	}
	for _, or := range md.GetOwnerReferences() {
		field("Owned by", or.GetKind()+"/"+or.GetName())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	keys := sortedKeys(obj)
	sort.SliceStable(keys, func(i, j int) bool { return order(keys[i]) < order(keys[j]) })
	for _, key := range keys {
		switch key {
		case "apiVersion", "kind", "metadata":
			continue
		}
		val := obj[key]
		if (k.Kind == "Secret" || k.Kind == "InternalSecret") && key == "data" {
			val = sizes(val)
		}
		if err := section(w, strings.ToUpper(key[:1])+key[1:], val); err != nil {
			return err
		}
	}
	return describeEvents(w, events, now)
}

// order puts spec before status and both after other fields (data, type, ...).
func order(key string) int {
	switch key {
	case "spec":
		return 1
	case "status":
		return 2
	}
	return 0
}

func sizes(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for k, x := range m {
		s, _ := x.(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			out[k] = "<not base64>"
			continue
		}
		out[k] = fmt.Sprintf("%d bytes", len(b))
	}
	return out
}

// section writes "Name:" and the value as YAML indented by two spaces; scalars stay on the line.
func section(w io.Writer, name string, v any) error {
	switch v.(type) {
	case map[string]any, []any:
	default:
		_, err := fmt.Fprintf(w, "%s:  %s\n", name, jsonpath.Format([]any{v}))
		return err
	}
	y, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%s:\n", name); err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimRight(string(y), "\n"), "\n") {
		if _, err := fmt.Fprintf(w, "  %s\n", line); err != nil {
			return err
		}
	}
	return nil
}

// describeEvents writes the events' table, oldest first, or "<none>".
func describeEvents(w io.Writer, events []proto.Message, now time.Time) error {
	if len(events) == 0 {
		_, err := fmt.Fprintln(w, "Events:  <none>")
		return err
	}
	type row struct {
		at                            string
		typ, reason, from, msg, count string
	}
	var rows []row
	for _, e := range events {
		v, err := Value(e)
		if err != nil {
			return err
		}
		get := func(path string) string {
			p, err := jsonpath.Parse(path)
			if err != nil {
				return ""
			}
			vals := p.Eval(v)
			if len(vals) == 0 {
				return ""
			}
			return jsonpath.Format(vals[:1])
		}
		r := row{typ: get(".type"), reason: get(".reason"), msg: get(".message"), count: get(".count")}
		for _, f := range []string{".lastTimestamp", ".eventTime", ".firstTimestamp", ".metadata.creationTimestamp"} {
			if r.at = get(f); r.at != "" {
				break
			}
		}
		for _, f := range []string{".source.component", ".reportingComponent", ".reportingController"} {
			if r.from = get(f); r.from != "" {
				break
			}
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].at < rows[j].at })
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "Events:")
	fmt.Fprintln(tw, "  TYPE\tREASON\tAGE\tFROM\tMESSAGE")
	for _, r := range rows {
		age := Age(r.at, now)
		if r.count != "" && r.count != "1" {
			age += " (x" + r.count + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", r.typ, r.reason, age, r.from, strings.ReplaceAll(r.msg, "\n", " "))
	}
	return tw.Flush()
}
