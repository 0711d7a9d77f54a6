package progress

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// State is what the view shows of an object.
type State struct {
	// Type, State and Description of status.lastOperation; Progress its percent.
	Type, State, Description string
	Progress                 int
	// Updated is lastOperation.lastUpdateTime.
	Updated time.Time
	// Errors are status.lastErrors.
	Errors []Error
	// Generation and ObservedGeneration are metadata.generation and status.observedGeneration.
	Generation, ObservedGeneration int64
	// Operation is the gardener.cloud/operation annotation, which the agent removes when it takes the operation up.
	Operation string
	// Rotations are the phases of the two-phase credentials rotations in status.credentials.rotation, by name
	// (certificateAuthorities, serviceAccountKey, etcdEncryptionKey); absent ones are left out.
	Rotations map[string]string
	// Deleted is set when the object is gone.
	Deleted bool
}

// Error is one of status.lastErrors.
type Error struct {
	Description, TaskID string
	Codes               []string
}

// Of reads a State from an object decoded from JSON (json.Number numbers, as printer.Value returns).
func Of(obj any) State {
	m, _ := obj.(map[string]any)
	md, _ := m["metadata"].(map[string]any)
	status, _ := m["status"].(map[string]any)
	op, _ := status["lastOperation"].(map[string]any)
	s := State{
		Type: str(op["type"]), State: str(op["state"]), Description: str(op["description"]),
		Progress: int(num(op["progress"])), Generation: num(md["generation"]), ObservedGeneration: num(status["observedGeneration"]),
	}
	s.Updated, _ = time.Parse(time.RFC3339, str(op["lastUpdateTime"]))
	if ann, ok := md["annotations"].(map[string]any); ok {
		s.Operation = str(ann["gardener.cloud/operation"])
	}
	creds, _ := status["credentials"].(map[string]any)
	rotation, _ := creds["rotation"].(map[string]any)
	for _, name := range []string{"certificateAuthorities", "serviceAccountKey", "etcdEncryptionKey"} {
		r, _ := rotation[name].(map[string]any)
		if phase := str(r["phase"]); phase != "" {
			if s.Rotations == nil {
				s.Rotations = map[string]string{}
			}
			s.Rotations[name] = phase
		}
	}
	errs, _ := status["lastErrors"].([]any)
	for _, e := range errs {
		em, _ := e.(map[string]any)
		le := Error{Description: str(em["description"]), TaskID: str(em["taskID"])}
		codes, _ := em["codes"].([]any)
		for _, c := range codes {
			le.Codes = append(le.Codes, str(c))
		}
		s.Errors = append(s.Errors, le)
	}
	return s
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) int64 {
	switch n := v.(type) {
	case json.Number:
		i, _ := strconv.ParseInt(n.String(), 10, 64)
		return i
	case float64:
		return int64(n)
	}
	return 0
}

// Final reports whether the operation has ended, and whether it succeeded. Gardener's states: Processing and Error
// (retried) go on; Pending waits; Succeeded, Failed and Aborted end it.
func (s State) Final() (ended, succeeded bool) {
	if s.Deleted {
		return true, true
	}
	switch s.State {
	case "Succeeded":
		return true, true
	case "Failed", "Aborted":
		return true, false
	}
	return false, false
}

// Since is the start of an operation the user asked for: the view ends only with an outcome of that operation.
type Since struct {
	// Time is when it was asked for; Generation the object's generation after the request.
	Time       time.Time
	Generation int64
	// Annotation is the gardener.cloud/operation value the request set, "" if none.
	Annotation string
	// Phase, if set, is the phase the credentials rotations reach when the operation succeeds (Prepared after
	// rotate-credentials-start, Completed after rotate-credentials-complete): a success counts only with every
	// rotation in it.
	Phase string
}

// pending are the operation annotations that are still to be taken up while they are set: the agent removes
// reconcile and retry when its flow starts; the hub replaces maintain with reconcile.
var pending = map[string]bool{"reconcile": true, "retry": true, "maintain": true}

// Of reports whether state is about the operation asked for (or a later one): no operation annotation waits to be
// taken up (the one set, or one that leads to a reconcile), the agent observed the generation, and the last
// operation was written at or after the request (its times have whole seconds) or is still running.
func (since Since) Of(s State) bool {
	if s.Deleted {
		return true
	}
	if s.Operation != "" && (s.Operation == since.Annotation || pending[s.Operation]) || s.ObservedGeneration < since.Generation {
		return false
	}
	ended, succeeded := s.Final()
	if !ended {
		return true
	}
	if succeeded && !s.Deleted && since.Phase != "" && !s.rotationsIn(since.Phase) {
		return false
	}
	return !s.Updated.Before(since.Time.Truncate(time.Second))
}

// rotationsIn reports whether there are rotations and all are in phase.
func (s State) rotationsIn(phase string) bool {
	for _, p := range s.Rotations {
		if p != phase {
			return false
		}
	}
	return len(s.Rotations) > 0
}

// View renders states to a writer.
type View struct {
	w     io.Writer
	width int    // of the terminal; 0 when w is none
	lines int    // lines of the last render on a terminal
	last  string // last render elsewhere
	now   func() time.Time
}

// NewView returns a view. On a terminal (width > 0: its columns) it redraws in place with ANSI escapes, cutting lines
// to the width so that none wraps (a wrapped line would stay behind when the block is redrawn).
func NewView(w io.Writer, width int, now func() time.Time) *View {
	return &View{w: w, width: width, now: now}
}

// Show renders a state.
func (v *View) Show(name string, s State) {
	text := Render(name, s, v.width > 0)
	if v.width > 0 {
		if v.lines > 0 {
			fmt.Fprintf(v.w, "\x1b[%dA\x1b[J", v.lines)
		}
		lines := strings.SplitAfter(text, "\n")
		for _, l := range lines {
			if r := []rune(strings.TrimSuffix(l, "\n")); len(r) >= v.width {
				l = string(r[:v.width-1]) + "\n"
			}
			fmt.Fprint(v.w, l)
		}
		v.lines = strings.Count(text, "\n")
		return
	}
	if text == v.last {
		return
	}
	v.last = text
	fmt.Fprintf(v.w, "%s %s", v.now().Format("15:04:05"), text)
}

// Render returns the text of a state: a line with the operation, its state, percent (a bar with bar) and the current
// step, and a line per last error.
func Render(name string, s State, bar bool) string {
	var b strings.Builder
	switch {
	case s.Deleted:
		fmt.Fprintf(&b, "%s: deleted\n", name)
		return b.String()
	case s.Type == "" && s.State == "":
		fmt.Fprintf(&b, "%s: no operation yet\n", name)
	default:
		fmt.Fprintf(&b, "%s: %s %s", name, s.Type, s.State)
		if bar {
			filled := min(max(s.Progress, 0), 100) / 5
			fmt.Fprintf(&b, " [%s%s]", strings.Repeat("#", filled), strings.Repeat(".", 20-filled))
		}
		fmt.Fprintf(&b, " %d%%", s.Progress)
		if s.Description != "" {
			fmt.Fprintf(&b, " - %s", oneLine(s.Description))
		}
		b.WriteByte('\n')
	}
	for _, e := range s.Errors {
		b.WriteString("  error")
		if e.TaskID != "" {
			fmt.Fprintf(&b, " in %s", e.TaskID)
		}
		if len(e.Codes) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(e.Codes, ", "))
		}
		fmt.Fprintf(&b, ": %s\n", oneLine(e.Description))
	}
	return b.String()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
