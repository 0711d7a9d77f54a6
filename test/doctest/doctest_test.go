package doctest

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	doc := "# Title\n\n```sh\n$ not run\n```\n\nText.\n\n```sh doctest\n$ echo a \\\n    b\na b\n$ true\n\n$ printf 'x\\n\\ny\\n'\nx\n\ny\n```\n\n" +
		"~~~~sh doctest\n$ echo ```\n```\n~~~~\n"
	got := Parse([]byte(doc))
	want := []Step{
		{Line: 10, Command: "echo a \\\n    b", Want: []string{"a b"}},
		{Line: 13, Command: "true"},
		{Line: 15, Command: `printf 'x\n\ny\n'`, Want: []string{"x", "", "y"}},
		{Line: 22, Command: "echo ```", Want: []string{"```"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n%#v\nwant\n%#v", got, want)
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		want []string
		got  string
		ok   bool
	}{
		{nil, "", true},
		{nil, "x", false},
		{[]string{"a"}, "a\n", true},
		{[]string{"a"}, "b", false},
		{[]string{"NAME   AGE", "local  ..."}, "NAME   AGE\nlocal  5s", true},
		{[]string{"NAME   AGE", "local  ..."}, "NAME   AGE\nother  5s", false},
		{[]string{"first", "...", "last"}, "first\nx\ny\nlast", true},
		{[]string{"first", "...", "last"}, "first\nlast", true},
		{[]string{"first", "...", "last"}, "first\nx", false},
		{[]string{"a.b"}, "axb", false}, // no regular expressions but "..."
		{[]string{"trailing"}, "trailing   ", true},
	} {
		if err := Match(c.want, c.got); (err == nil) != c.ok {
			t.Errorf("Match(%q, %q) = %v, want ok=%v", c.want, c.got, err, c.ok)
		}
	}
}

func TestSession(t *testing.T) {
	s, err := Start(t.TempDir(), os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		cmd, out string
		rc       int
	}{
		{"export X=1; cd /; Y=2", "", 0},
		{"echo $X$Y; pwd", "12\n/", 0},
		{"printf 'no newline'", "no newline", 0},
		{"echo err >&2; exit_code() { return 3; }; exit_code", "err", 3},
		{"cat", "", 0}, // stdin is closed for commands
	} {
		out, rc, err := s.Run(c.cmd, 10*time.Second)
		if err != nil || out != c.out || rc != c.rc {
			t.Errorf("Run(%q) = %q, %d, %v; want %q, %d", c.cmd, out, rc, err, c.out, c.rc)
		}
	}
	if _, _, err := s.Run("sleep 5", 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Errorf("timeout: %v", err)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	doc := dir + "/doc.md"
	md := "```sh doctest\n$ X=hello\n$ echo $X world\nhello ...\n$ false\n$ echo wrong\nright\n$ ls missing-file\nls: cannot access 'missing-file': No such file or directory\n```\n"
	if err := os.WriteFile(doc, []byte(md), 0o600); err != nil {
		t.Fatal(err)
	}
	n, failures, err := Check(doc, dir, os.Environ())
	if err != nil || n != 5 {
		t.Fatalf("Check: %d commands, %v", n, err)
	}
	if len(failures) != 2 || !strings.Contains(failures[0], "doc.md:5: $ false\nexited 1") ||
		!strings.Contains(failures[1], "doc.md:6: $ echo wrong") {
		t.Errorf("failures: %q", failures)
	}
	if _, _, err := Check(doc+".none", dir, os.Environ()); err == nil {
		t.Error("a missing document passes")
	}
	if err := os.WriteFile(doc, []byte("# no examples\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Check(doc, dir, os.Environ()); err == nil {
		t.Error("a document without examples passes")
	}
}
