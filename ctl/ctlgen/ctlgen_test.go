package ctlgen_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCLI is what adding a kind takes: a throwaway proto (testdata/widget.proto: a kind's message with
// column options on the message and on fields, its list, watch event and service, with one RPC beyond the standard
// ones) goes through buf with protoc-gen-go, protoc-gen-go-grpc and this plugin; the generated table is checked, then
// compiled into trellisctl (testdata/widgetcli, with an overlay, since the generated packages exist only here) and
// run against an in-memory WidgetService: apply, the table and its wide columns, the subresource command, errors.
func TestGeneratedCLI(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tools := filepath.Join(root, "bin", "tools")
	for _, tool := range []string{"buf", "protoc-gen-go", "protoc-gen-go-grpc"} {
		if _, err := os.Stat(filepath.Join(tools, tool)); err != nil {
			t.Fatalf("%s is missing: run make tools (%v)", tool, err)
		}
	}
	dir := t.TempDir()
	for src, dst := range map[string]string{
		"proto/trellis/meta/v1/meta.proto":               "trellis/meta/v1/meta.proto",
		"proto/trellis/meta/v1/options.proto":            "trellis/meta/v1/options.proto",
		"proto/trellis/cli/v1/options.proto":             "trellis/cli/v1/options.proto",
		"proto/third_party/google/api/annotations.proto": "google/api/annotations.proto",
		"proto/third_party/google/api/http.proto":        "google/api/http.proto",
		"ctl/ctlgen/testdata/widget.proto":               "widgets/v1/widget.proto",
	} {
		copyFile(t, filepath.Join(root, src), filepath.Join(dir, dst))
	}
	plugin := filepath.Join(dir, "bin", "protoc-gen-trellisctl")
	run(t, root, "go", "build", "-o", plugin, "./cmd/protoc-gen-trellisctl")
	write(t, filepath.Join(dir, "buf.yaml"), "version: v2\n")
	const module = "github.com/trellis-dev/trellis"
	write(t, filepath.Join(dir, "buf.gen.yaml"), `version: v2
plugins:
  - local: `+filepath.Join(tools, "protoc-gen-go")+`
    out: gen
    opt: module=`+module+`
  - local: `+filepath.Join(tools, "protoc-gen-go-grpc")+`
    out: gen
    opt: module=`+module+`
  - local: `+plugin+`
    out: gen/ctl/ctlgen/widgettest/kinds
    opt: import_path=`+module+`/ctl/ctlgen/widgettest/kinds
    strategy: all
inputs:
  - directory: .
    paths:
      - widgets
`)
	run(t, dir, filepath.Join(tools, "buf"), "generate")

	src := read(t, filepath.Join(dir, "gen/ctl/ctlgen/widgettest/kinds/kinds.go"))
	for _, want := range []string{
		"package kinds",
		`Group: "widgets.example", Version: "v1", Kind: "Widget", Resource: "widgets", Singular: "widget",`,
		"Namespaced: true,",
		`ShortNames: []string{"wd"},`,
		`{Name: "SHINY", Path: ".status.conditions[?(@.type==\"Shiny\")].status", Format: resource.FormatReady},`,
		`{Name: "COLOR", Path: ".spec.color"},`,
		`{Name: "SIZE", Path: ".spec.size", Priority: 1},`,
		`{Name: "PARTS", Path: ".spec.parts[*].name", Priority: 1},`,
		`PatchSubresources: []string{"polish"},`,
		`RPC: "Polish", Command: "polish", Path: "polish",`,
		`Help: "Polish makes a widget shiny.",`,
		"resource.NewClient[*widgetpb.Widget, *widgetpb.WidgetList, widgetpb.WidgetWatchEvent](widgetpb.NewWidgetServiceClient(conn))",
	} {
		if !strings.Contains(squeeze(src), squeeze(want)) {
			t.Errorf("the generated kinds lack %s\n%s", want, src)
		}
	}
	if t.Failed() {
		return
	}

	// Compile trellisctl with the generated kinds and run it.
	replace := map[string]string{filepath.Join(root, "ctl/ctlgen/widgettest/main.go"): filepath.Join(root, "ctl/ctlgen/testdata/widgetcli/main.go")}
	err = filepath.WalkDir(filepath.Join(dir, "gen"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(filepath.Join(dir, "gen"), p)
			replace[filepath.Join(root, rel)] = p
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": replace})
	write(t, filepath.Join(dir, "overlay.json"), string(overlay))
	write(t, filepath.Join(dir, "m", "widgets.yaml"), `apiVersion: widgets.example/v1
kind: Widget
metadata:
  name: w1
spec:
  color: red
  size: 3
  parts:
  - name: wheel
  - name: bell
---
apiVersion: widgets.example/v1
kind: Widget
metadata:
  name: w2
  namespace: shop
spec:
  color: blue
`)
	commands := [][]string{
		{"apply", "-f", filepath.Join(dir, "m"), "-n", "shop"},
		{"apply", "-f", filepath.Join(dir, "m"), "-n", "shop"},
		{"get", "widgets", "-n", "shop"},
		{"get", "wd", "w1", "-n", "shop", "-o", "wide"},
		{"polish", "widget", "w1", "-n", "shop", "--patch", `{"spec":{"color":"gold"}}`},
		{"get", "widget/w1", "-n", "shop"},
		{"api-resources"},
		{"get", "widget", "nope", "-n", "shop"},
	}
	cmds, _ := json.Marshal(commands)
	out := run(t, root, "go", "run", "-overlay", filepath.Join(dir, "overlay.json"), "./ctl/ctlgen/widgettest", dir, string(cmds))
	sections := strings.Split(out, "=== ")[1:]
	if len(sections) != len(commands) {
		t.Fatalf("%d outputs for %d commands:\n%s", len(sections), len(commands), out)
	}
	for i, want := range [][]string{
		{"widget.widgets.example/w1 created\nwidget.widgets.example/w2 created\nexit 0"},
		{"widget.widgets.example/w1 unchanged\nwidget.widgets.example/w2 unchanged\nexit 0"},
		// Widgets are an hour old: HumanDuration prints "60m" for a whole minute, so a slow run still matches.
		{"NAME   SHINY     COLOR   AGE\n", "w1     Unknown   red     60m\n", "w2     Unknown   blue    60m\n", "exit 0"},
		{"NAME   SHINY     COLOR   SIZE   PARTS        AGE\nw1     Unknown   red     3      wheel,bell   60m\nexit 0"},
		{"widget.widgets.example/w1 Polish done\nexit 0"},
		{"w1     Ready   gold    60m\nexit 0"},
		{"widgets   wd           widgets.example/v1   true         Widget\nexit 0"},
		{"Error from server (NotFound): widgets.widgets.example \"nope\" not found\nexit 1"},
	} {
		for _, w := range want {
			if !strings.Contains(sections[i], w) {
				t.Errorf("%s\nlacks %q", sections[i], w)
			}
		}
	}
}

// squeeze collapses white space, which gofmt aligns.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	write(t, dst, read(t, src))
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
