package doctest

import (
	"bufio"
	"bytes"
	"strings"
)

// Info is the info string of the fenced blocks that hold runnable examples.
const Info = "sh doctest"

// Step is one command of a document and the output it should print.
type Step struct {
	// Line is the line of the document the command starts on (1-based).
	Line int
	// Command is the command as bash reads it: continuation lines joined with newlines.
	Command string
	// Want are the lines the command should print.
	Want []string
}

// Parse returns the steps of the "sh doctest" blocks of a Markdown document, in order. Text outside such blocks,
// and lines of a block before its first command, are ignored.
func Parse(doc []byte) []Step {
	var steps []Step
	in, fence := false, ""
	var cur *Step
	continuing := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if !in {
			if f, info, ok := fenceOf(trimmed); ok && strings.TrimSpace(info) == Info {
				in, fence = true, f
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
			in, cur, continuing = false, nil, false
			continue
		}
		switch {
		case continuing:
			cur.Command += "\n" + line
		case strings.HasPrefix(line, "$ "):
			steps = append(steps, Step{Line: n, Command: line[2:]})
			cur = &steps[len(steps)-1]
		case cur != nil:
			cur.Want = append(cur.Want, strings.TrimRight(line, " \t"))
			continue
		default:
			continue
		}
		continuing = strings.HasSuffix(line, `\`)
	}
	for i := range steps {
		// Blank lines after a command's output separate it from the next command; they are not output.
		w := steps[i].Want
		for len(w) > 0 && w[len(w)-1] == "" {
			w = w[:len(w)-1]
		}
		if len(w) == 0 {
			w = nil
		}
		steps[i].Want = w
	}
	return steps
}

// fenceOf reports whether line opens a fenced code block, with its fence ("```" or "~~~", possibly longer) and info
// string.
func fenceOf(line string) (fence, info string, ok bool) {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return line[:n], line[n:], true
		}
	}
	return "", "", false
}
