package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeModule writes a module of its own into dir: files by path relative to dir.
func writeModule(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunBuildsOnceAndReports runs a module with two packages of the same name (one passing, one failing), one that
// does not build, one without tests and one that go vet finds fault with: each package's result is go test's but
// for the last, which passes (no vet), and a second run links nothing that did not change, while a changed test is
// linked again.
func TestRunBuildsOnceAndReports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	mod := t.TempDir()
	writeModule(t, mod, map[string]string{
		"go.mod":        "module example.com/m\n\ngo 1.24\n",
		"a/x/x.go":      "package x\n\nfunc One() int { return 1 }\n",
		"a/x/x_test.go": "package x\n\nimport \"testing\"\n\nfunc TestOne(t *testing.T) {\n\tif One() != 1 {\n\t\tt.Fatal(\"not one\")\n\t}\n}\n",
		"b/x/x_test.go": "package x\n\nimport \"testing\"\n\nfunc TestFails(t *testing.T) { t.Fatal(\"fails on purpose\") }\n",
		"c/c_test.go":   "package c\n\nimport \"testing\"\n\nfunc TestBroken(t *testing.T) { undefined() }\n",
		"d/d.go":        "package d\n",
		"e/e_test.go":   "package e\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestDir(t *testing.T) {\n\tif _, err := os.Stat(\"e_test.go\"); err != nil {\n\t\tt.Fatal(\"not run in the package's directory:\", err)\n\t}\n}\n",
		// go vet's printf check finds the Logf; suite runs no vet, so it passes.
		"f/f_test.go":     "package f\n\nimport \"testing\"\n\nfunc TestArgs(t *testing.T) { t.Logf(\"%d\", \"vet\") }\n",
		"a/x/testdata/ok": "",
	})
	t.Chdir(mod)
	cache := t.TempDir()
	// One slot: the builds and the tests take turns in it.
	cfg := config{parallel: 1, timeout: time.Minute, cache: cache, group: 8}
	var out bytes.Buffer
	ok, err := run(context.Background(), cfg, []string{"./e", "./..."}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Errorf("run passed with a failing and a broken package:\n%s", out.String())
	}
	got := out.String()
	for _, want := range []string{"ok  \texample.com/m/a/x\t", "--- FAIL: TestFails", "fails on purpose", "FAIL\texample.com/m/b/x\t",
		"undefined", "FAIL\texample.com/m/c\t", "[build failed]", "ok  \texample.com/m/e\t", "ok  \texample.com/m/f\t"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "example.com/m/d") {
		t.Errorf("a package without tests was reported:\n%s", got)
	}
	if strings.Count(got, "example.com/m/e\t") != 1 {
		t.Errorf("./e, given first and matched by ./... too, ran other than once:\n%s", got)
	}
	if strings.Contains(got, "TestOne") {
		t.Errorf("a passing package's output was printed:\n%s", got)
	}

	// Both x packages have binaries of their own; a second run keeps them; a changed test is linked again.
	ax, bx := filepath.Join(cache, "test", "0", "x.test"), filepath.Join(cache, "test", "1", "x.test")
	before := map[string]os.FileInfo{}
	for _, p := range []string{ax, bx} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("the binary of an x package: %v", err)
		}
		before[p] = fi
	}
	out.Reset()
	if _, err := run(context.Background(), cfg, []string{"./a/...", "./b/..."}, &out); err != nil {
		t.Fatal(err)
	}
	for p, fi := range before {
		if now, err := os.Stat(p); err != nil || !os.SameFile(fi, now) { // go touches a binary it finds up to date; a link replaces it
			t.Errorf("%s was linked again though nothing changed", p)
		}
	}
	writeModule(t, mod, map[string]string{"a/x/x.go": "package x\n\nfunc One() int { return 2 }\n"})
	out.Reset()
	if _, err := run(context.Background(), cfg, []string{"./a/..."}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "FAIL\texample.com/m/a/x\t") || !strings.Contains(out.String(), "not one") {
		t.Errorf("a changed package ran its old binary:\n%s", out.String())
	}
	if now, err := os.Stat(ax); err != nil || os.SameFile(before[ax], now) {
		t.Errorf("the changed package's binary was not replaced (%v)", err)
	}

	// Arguments after "--" reach the binaries: -test.run selects no test.
	out.Reset()
	cfg.testArgs, cfg.parallel = []string{"-test.run", "^$"}, 3
	if ok, err := run(context.Background(), cfg, []string{"./f", "./e"}, &out); err != nil || !ok || strings.Count(out.String(), "[no tests to run]") != 2 {
		t.Errorf("-test.run ^$: ok %v, %v:\n%s", ok, err, out.String())
	}
}

// TestGroups: packages are built in their order, a go test -c per binary directory and at most size packages.
func TestGroups(t *testing.T) {
	pkgs := []pkg{{path: "m/e2e"}, {path: "m/a/shoot"}, {path: "m/b/shoot"}, {path: "m/c"}, {path: "m/d"}, {path: "m/e"}}
	assignDirs(pkgs, "/r")
	var got []string
	for _, g := range groups(pkgs, 2) {
		var names []string
		for _, p := range g {
			names = append(names, strings.TrimPrefix(p.path, "m/")+"@"+filepath.Base(p.binDir))
		}
		got = append(got, strings.Join(names, ","))
	}
	want := "e2e@0,a/shoot@0 | b/shoot@1 | c@0,d@0 | e@0"
	if strings.Join(got, " | ") != want {
		t.Errorf("groups %q, want %q", strings.Join(got, " | "), want)
	}
}
