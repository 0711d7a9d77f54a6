package doctest

import (
	"fmt"
	"regexp"
	"strings"
)

// Ellipsis matches any text within a line, or any number of lines when it is a line of its own.
const Ellipsis = "..."

// Match reports whether got, a command's output, has the lines want describes; the error shows both.
func Match(want []string, got string) error {
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if got == "" {
		lines = nil
	}
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " \t")
	}
	if match(want, lines) {
		return nil
	}
	return fmt.Errorf("want:\n%s\ngot:\n%s", indent(want), indent(lines))
}

func match(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == Ellipsis {
		for i := 0; i <= len(got); i++ {
			if match(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && lineMatches(want[0], got[0]) && match(want[1:], got[1:])
}

// lineMatches compares one line, with "..." matching any text.
func lineMatches(want, got string) bool {
	if !strings.Contains(want, Ellipsis) {
		return want == got
	}
	parts := strings.Split(want, Ellipsis)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got)
}

func indent(lines []string) string {
	if len(lines) == 0 {
		return "    (nothing)"
	}
	return "    " + strings.Join(lines, "\n    ")
}
