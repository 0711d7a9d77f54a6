package columns

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"k8s.io/apimachinery/pkg/util/duration"

	cliv1 "github.com/trellis-dev/trellis/proto/gen/trellis/cli/v1"
	"github.com/trellis-dev/trellis/proto/jsonpath"
)

// Of returns the columns of kind message m: its own (trellis.cli.v1.columns) followed by those of its fields
// (trellis.cli.v1.column), depth first in declaration order, each field's at its JSON path.
func Of(m protoreflect.MessageDescriptor) ([]*cliv1.Column, error) {
	var out []*cliv1.Column
	if cs, ok := proto.GetExtension(m.Options(), cliv1.E_Columns).([]*cliv1.Column); ok {
		for _, c := range cs {
			if c.GetJsonPath() == "" || c.GetName() == "" {
				return nil, fmt.Errorf("%s: a message's columns need a name and a json_path", m.FullName())
			}
			out = append(out, c)
		}
	}
	return fieldColumns(m, "", map[protoreflect.FullName]bool{}, out)
}

// fieldColumns appends the columns of m's fields, m found at JSON path prefix; on marks the messages on the current
// path, so that recursive messages end.
func fieldColumns(m protoreflect.MessageDescriptor, prefix string, on map[protoreflect.FullName]bool, out []*cliv1.Column) ([]*cliv1.Column, error) {
	if on[m.FullName()] {
		return out, nil
	}
	on[m.FullName()] = true
	defer delete(on, m.FullName())
	fields := m.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		p := prefix + "." + f.JSONName()
		if c, ok := proto.GetExtension(f.Options(), cliv1.E_Column).(*cliv1.Column); ok && c != nil {
			if c.GetJsonPath() != "" {
				return nil, fmt.Errorf("%s: a field's column takes the field's own path; leave json_path empty", f.FullName())
			}
			c = proto.Clone(c).(*cliv1.Column)
			c.JsonPath = p
			if c.Name == "" {
				c.Name = strings.ToUpper(f.JSONName())
			}
			out = append(out, c)
		}
		if f.Message() == nil || f.IsMap() || strings.HasPrefix(string(f.Message().FullName()), "google.protobuf.") {
			continue
		}
		if f.IsList() {
			p += "[*]"
		}
		var err error
		if out, err = fieldColumns(f.Message(), p, on, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// paths caches parsed column paths; they come from the kinds' options and are parsed once.
var paths sync.Map // string → *jsonpath.Path or error

func parsed(s string) (*jsonpath.Path, error) {
	if v, ok := paths.Load(s); ok {
		if p, ok := v.(*jsonpath.Path); ok {
			return p, nil
		}
		return nil, v.(error)
	}
	p, err := jsonpath.Parse(s)
	if err != nil {
		paths.Store(s, err)
		return nil, err
	}
	paths.Store(s, p)
	return p, nil
}

// Cell renders the column of path and format of object v (decoded JSON, numbers as json.Number) at time now.
func Cell(path string, format cliv1.Format, v any, now time.Time) string {
	vals, err := Values(path, v)
	if err != nil {
		return "<bad path>"
	}
	return Render(format, vals, now)
}

// Values are what path finds in object v (decoded JSON): the first step of Cell, which does not depend on the time.
func Values(path string, v any) ([]any, error) {
	p, err := parsed(path)
	if err != nil {
		return nil, err
	}
	return p.Eval(v), nil
}

// Timed reports whether a column of format renders differently as time passes (an age), so that a rendering kept
// for later must keep the column's Values instead.
func Timed(format cliv1.Format) bool {
	switch format {
	case cliv1.Format_FORMAT_AGE, cliv1.Format_FORMAT_EVENT_LAST_SEEN, cliv1.Format_FORMAT_EVENT_FIRST_SEEN:
		return true
	}
	return false
}

// Render is the cell of a column of format whose path found vals (Values), at time now: the second step of Cell.
func Render(format cliv1.Format, vals []any, now time.Time) string {
	var first any
	if len(vals) > 0 {
		first = vals[0]
	}
	switch format {
	case cliv1.Format_FORMAT_AGE:
		return Age(first, now)
	case cliv1.Format_FORMAT_LAST_OPERATION:
		return lastOperation(first)
	case cliv1.Format_FORMAT_HIBERNATION:
		return hibernation(first)
	case cliv1.Format_FORMAT_READY:
		switch s, _ := first.(string); s {
		case "True":
			return "Ready"
		case "False":
			return "NotReady"
		case "":
			return "Unknown"
		default:
			return s
		}
	case cliv1.Format_FORMAT_COUNT:
		switch x := first.(type) {
		case []any:
			return fmt.Sprint(len(x))
		case map[string]any:
			return fmt.Sprint(len(x))
		}
		return "0"
	case cliv1.Format_FORMAT_TRIMMED:
		if len(vals) == 0 {
			return ""
		}
		return strings.TrimSpace(jsonpath.Format(vals))
	case cliv1.Format_FORMAT_EVENT_LAST_SEEN:
		return eventLastSeen(first, now)
	case cliv1.Format_FORMAT_EVENT_FIRST_SEEN:
		return eventFirstSeen(first, now)
	case cliv1.Format_FORMAT_EVENT_OBJECT:
		ref, _ := first.(map[string]any)
		kind, _ := ref["kind"].(string)
		if name, _ := ref["name"].(string); name != "" {
			return strings.ToLower(kind) + "/" + name
		}
		return strings.ToLower(kind)
	case cliv1.Format_FORMAT_EVENT_SOURCE:
		ev, _ := first.(map[string]any)
		source, _ := ev["source"].(map[string]any)
		component := firstString(source["component"], ev["reportingComponent"])
		if instance := firstString(source["host"], ev["reportingInstance"]); instance != "" {
			return component + ", " + instance
		}
		return component
	case cliv1.Format_FORMAT_EVENT_COUNT:
		ev, _ := first.(map[string]any)
		if series, ok := ev["series"].(map[string]any); ok {
			return numberOr(series["count"], "0")
		}
		return numberOr(ev["count"], "1")
	}
	if len(vals) == 0 {
		return "<none>"
	}
	return jsonpath.Format(vals)
}

// Age renders an RFC 3339 time as the time since then, as kubectl does.
func Age(v any, now time.Time) string {
	s, _ := v.(string)
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// eventLastSeen is kube-apiserver's LAST SEEN of an Event: since its series' last observation, its lastTimestamp, or
// as FIRST SEEN.
func eventLastSeen(v any, now time.Time) string {
	ev, _ := v.(map[string]any)
	if series, ok := ev["series"].(map[string]any); ok {
		return Age(series["lastObservedTime"], now)
	}
	if ev["lastTimestamp"] != nil {
		return Age(ev["lastTimestamp"], now)
	}
	return eventFirstSeen(v, now)
}

// eventFirstSeen is kube-apiserver's FIRST SEEN of an Event: since its firstTimestamp, else its eventTime.
func eventFirstSeen(v any, now time.Time) string {
	ev, _ := v.(map[string]any)
	if ev["firstTimestamp"] != nil {
		return Age(ev["firstTimestamp"], now)
	}
	return Age(ev["eventTime"], now)
}

// firstString returns the first of vs that is a non-empty string.
func firstString(vs ...any) string {
	for _, v := range vs {
		if s, _ := v.(string); s != "" {
			return s
		}
	}
	return ""
}

// numberOr renders a JSON number, or def when v is none or zero (a count of 0 is unset in kube-apiserver's table).
func numberOr(v any, def string) string {
	if n, ok := v.(json.Number); ok && n.String() != "0" {
		return n.String()
	}
	return def
}

// lastOperation renders a LastOperation as Gardener's tables do.
func lastOperation(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return "<pending>"
	}
	typ, _ := m["type"].(string)
	state, _ := m["state"].(string)
	progress := "0"
	if n, ok := m["progress"].(json.Number); ok {
		progress = n.String()
	}
	return fmt.Sprintf("%s %s (%s%%)", typ, state, progress)
}

// hibernation renders a Shoot's hibernation as Gardener's table does.
func hibernation(v any) string {
	m, _ := v.(map[string]any)
	spec, _ := m["spec"].(map[string]any)
	h, _ := spec["hibernation"].(map[string]any)
	want, _ := h["enabled"].(bool)
	status, _ := m["status"].(map[string]any)
	is, _ := status["hibernated"].(bool)
	switch {
	case want && !is:
		return "Hibernating"
	case !want && is:
		return "Waking Up"
	case is:
		return "Hibernated"
	}
	return "Awake"
}
