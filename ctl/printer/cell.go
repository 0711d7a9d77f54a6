package printer

import (
	"strings"
	"time"

	"github.com/trellis-dev/trellis/ctl/resource"
	"github.com/trellis-dev/trellis/proto/columns"
	cliv1 "github.com/trellis-dev/trellis/proto/gen/trellis/cli/v1"
)

// Cell renders a column of object v (decoded JSON) at time now (package proto/columns renders it, as the hub's
// Table responses do).
func Cell(c resource.Column, v any, now time.Time) string {
	return columns.Cell(c.Path, cliv1.Format(c.Format), v, now)
}

// Age renders an RFC 3339 time as the time since then, as kubectl does.
func Age(v any, now time.Time) string { return columns.Age(v, now) }

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
