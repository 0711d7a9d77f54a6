package jsonpath

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Path is a parsed path.
type Path struct {
	segs []segment
}

type segmentKind int

const (
	field segmentKind = iota
	index
	wildcard
	filter
)

type segment struct {
	kind  segmentKind
	name  string // field
	index int    // index
	// filter: the elements whose sub-path's value equals value (or differs from it with negate).
	sub    *Path
	value  any
	negate bool
}

// maxLen bounds the paths Parse accepts; paths come from protos and command lines and are short.
const maxLen = 1024

// Parse parses a path.
func Parse(s string) (*Path, error) {
	orig := s
	if len(s) > maxLen {
		return nil, fmt.Errorf("jsonpath: longer than %d bytes", maxLen)
	}
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	if s == "." || s == "" || s == "$" {
		if s == "" {
			return nil, fmt.Errorf("jsonpath: empty path")
		}
		return &Path{}, nil
	}
	s = strings.TrimPrefix(s, "$")
	p := &parser{s: s}
	segs, err := p.segments(false)
	if err != nil {
		return nil, fmt.Errorf("jsonpath %q: %w", orig, err)
	}
	return &Path{segs: segs}, nil
}

// MustParse is Parse for paths known to be valid; it panics otherwise.
func MustParse(s string) *Path {
	p, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

type parser struct {
	s   string
	pos int
}

func (p *parser) peek() byte {
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

// segments parses segments until the end, or, in a filter, until an operator or ')'.
func (p *parser) segments(inFilter bool) ([]segment, error) {
	var segs []segment
	for p.pos < len(p.s) {
		switch c := p.peek(); {
		case c == '.':
			p.pos++
			start := p.pos
			for p.pos < len(p.s) && isNameChar(p.s[p.pos]) {
				p.pos++
			}
			if p.pos == start {
				return nil, fmt.Errorf("a field name is missing at offset %d", start)
			}
			segs = append(segs, segment{kind: field, name: p.s[start:p.pos]})
		case c == '[':
			seg, err := p.bracket()
			if err != nil {
				return nil, err
			}
			segs = append(segs, seg)
		case inFilter && (c == '=' || c == '!' || c == ')' || c == ' '):
			return segs, nil
		default:
			return nil, fmt.Errorf("unexpected %q at offset %d", c, p.pos)
		}
	}
	return segs, nil
}

func isNameChar(c byte) bool {
	return c == '_' || c == '-' || c == '/' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func (p *parser) bracket() (segment, error) {
	p.pos++ // [
	var seg segment
	switch c := p.peek(); {
	case c == '\'' || c == '"':
		s, err := p.quoted()
		if err != nil {
			return seg, err
		}
		seg = segment{kind: field, name: s}
	case c == '*':
		p.pos++
		seg = segment{kind: wildcard}
	case c == '?':
		f, err := p.filter()
		if err != nil {
			return seg, err
		}
		seg = f
	default:
		start := p.pos
		if c == '-' {
			p.pos++
		}
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			p.pos++
		}
		n, err := strconv.Atoi(p.s[start:p.pos])
		if err != nil {
			return seg, fmt.Errorf("bad index at offset %d", start)
		}
		seg = segment{kind: index, index: n}
	}
	if p.peek() != ']' {
		return seg, fmt.Errorf("']' expected at offset %d", p.pos)
	}
	p.pos++
	return seg, nil
}

// quoted reads a string in single or double quotes; a backslash escapes the next character.
func (p *parser) quoted() (string, error) {
	q := p.peek()
	p.pos++
	var b strings.Builder
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		p.pos++
		switch {
		case c == q:
			return b.String(), nil
		case c == '\\' && p.pos < len(p.s):
			b.WriteByte(p.s[p.pos])
			p.pos++
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("unterminated string")
}

// filter parses ?(@<path> op literal) after '['.
func (p *parser) filter() (segment, error) {
	if !strings.HasPrefix(p.s[p.pos:], "?(@") {
		return segment{}, fmt.Errorf("a filter is [?(@.path==value)], at offset %d", p.pos)
	}
	p.pos += 3
	subSegs, err := p.segments(true)
	if err != nil {
		return segment{}, err
	}
	p.skipSpace()
	seg := segment{kind: filter, sub: &Path{segs: subSegs}}
	switch {
	case strings.HasPrefix(p.s[p.pos:], "=="):
	case strings.HasPrefix(p.s[p.pos:], "!="):
		seg.negate = true
	default:
		return seg, fmt.Errorf("== or != expected at offset %d", p.pos)
	}
	p.pos += 2
	p.skipSpace()
	if c := p.peek(); c == '\'' || c == '"' {
		s, err := p.quoted()
		if err != nil {
			return seg, err
		}
		seg.value = s
	} else {
		start := p.pos
		for p.pos < len(p.s) && p.s[p.pos] != ')' && p.s[p.pos] != ' ' {
			p.pos++
		}
		lit := p.s[start:p.pos]
		switch lit {
		case "true":
			seg.value = true
		case "false":
			seg.value = false
		case "null":
			seg.value = nil
		default:
			if _, err := strconv.ParseFloat(lit, 64); err != nil {
				return seg, fmt.Errorf("bad literal %q at offset %d", lit, start)
			}
			seg.value = json.Number(lit)
		}
	}
	p.skipSpace()
	if p.peek() != ')' {
		return seg, fmt.Errorf("')' expected at offset %d", p.pos)
	}
	p.pos++
	return seg, nil
}

func (p *parser) skipSpace() {
	for p.peek() == ' ' {
		p.pos++
	}
}

// Eval returns the values the path selects in v, a value decoded from JSON (maps, slices, strings, json.Number or
// float64, bools, nil).
func (p *Path) Eval(v any) []any {
	cur := []any{v}
	for _, s := range p.segs {
		var next []any
		for _, c := range cur {
			next = s.apply(c, next)
		}
		cur = next
	}
	return cur
}

func (s segment) apply(v any, out []any) []any {
	switch s.kind {
	case field:
		if m, ok := v.(map[string]any); ok {
			if x, ok := m[s.name]; ok {
				out = append(out, x)
			}
		}
	case index:
		if l, ok := v.([]any); ok {
			i := s.index
			if i < 0 {
				i += len(l)
			}
			if i >= 0 && i < len(l) {
				out = append(out, l[i])
			}
		}
	case wildcard:
		switch x := v.(type) {
		case []any:
			out = append(out, x...)
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				out = append(out, x[k])
			}
		}
	case filter:
		if l, ok := v.([]any); ok {
			for _, el := range l {
				if s.matches(el) {
					out = append(out, el)
				}
			}
		}
	}
	return out
}

func (s segment) matches(el any) bool {
	got := s.sub.Eval(el)
	eq := false
	for _, g := range got {
		if equal(g, s.value) {
			eq = true
			break
		}
	}
	return eq != s.negate
}

// equal compares JSON scalars; numbers by value.
func equal(a, b any) bool {
	an, aNum := number(a)
	bn, bNum := number(b)
	if aNum || bNum {
		return aNum && bNum && an == bn
	}
	switch a.(type) {
	case map[string]any, []any:
		return false
	}
	return a == b
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

// Format renders selected values as a table cell or a comparison value: strings as they are, other values as
// compact JSON, several values separated by commas.
func Format(values []any) string {
	parts := make([]string, len(values))
	for i, v := range values {
		switch x := v.(type) {
		case string:
			parts[i] = x
		case json.Number:
			parts[i] = x.String()
		default:
			b, err := json.Marshal(x)
			if err != nil {
				b = []byte(fmt.Sprint(x))
			}
			parts[i] = string(b)
		}
	}
	return strings.Join(parts, ",")
}

// Step is one step of a path, as Steps returns them for checking a path against a schema.
type Step struct {
	// Field is the name a field step selects ("" for other steps).
	Field string
	// Elements is set for steps into the elements of a list or the values of a map: [3], [*] and filters.
	Elements bool
	// Filter is the sub-path a filter step compares, evaluated on each element.
	Filter *Path
}

// Steps returns the path's steps; none for ".".
func (p *Path) Steps() []Step {
	out := make([]Step, len(p.segs))
	for i, s := range p.segs {
		switch s.kind {
		case field:
			out[i] = Step{Field: s.name}
		case filter:
			out[i] = Step{Elements: true, Filter: s.sub}
		default:
			out[i] = Step{Elements: true}
		}
	}
	return out
}
