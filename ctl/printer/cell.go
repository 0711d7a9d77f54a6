package printer

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/trellis-dev/trellis/ctl/jsonpath"
	"github.com/trellis-dev/trellis/ctl/resource"
)

// paths caches parsed column paths; they come from the generated kinds and are parsed once.
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

// Cell renders a column of object v (decoded JSON) at time now.
func Cell(c resource.Column, v any, now time.Time) string {
	p, err := parsed(c.Path)
	if err != nil {
		return "<bad path>"
	}
	vals := p.Eval(v)
	var first any
	if len(vals) > 0 {
		first = vals[0]
	}
	switch c.Format {
	case resource.FormatAge:
		return Age(first, now)
	case resource.FormatLastOperation:
		return lastOperation(first)
	case resource.FormatHibernation:
		return hibernation(first)
	case resource.FormatReady:
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
	case resource.FormatCount:
		switch x := first.(type) {
		case []any:
			return fmt.Sprint(len(x))
		case map[string]any:
			return fmt.Sprint(len(x))
		}
		return "0"
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

// join renders a map of strings as k=v pairs, sorted; "<none>" when empty.
func join(m map[string]string, sep string) string {
	if len(m) == 0 {
		return "<none>"
	}
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, sep)
}
