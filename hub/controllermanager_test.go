package hub

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/hub/admission"

	"google.golang.org/grpc"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/componentconfig"
	"github.com/trellis-dev/trellis/hub/store/storetest"
)

func TestControllerEnabled(t *testing.T) {
	for _, tc := range []struct {
		list []string
		name string
		want bool
	}{
		{nil, "project", true},
		{[]string{"*"}, "project", true},
		{[]string{"*", "-project"}, "project", false},
		{[]string{"-project", "*"}, "project", false},
		{[]string{"*", "-project"}, "project-stale", true},
		{[]string{"project"}, "project", true},
		{[]string{"project"}, "shoot-retry", false},
		{[]string{"-project"}, "shoot-retry", false}, // no "*": only what is named runs
	} {
		if got := controllerEnabled(tc.list, tc.name); got != tc.want {
			t.Errorf("controllerEnabled(%q, %s) = %t, want %t", tc.list, tc.name, got, tc.want)
		}
	}
}

func names(t *testing.T, enabled []string) ([]string, error) {
	t.Helper()
	reg, err := api.NewRegistry(t.Context(), api.Config{Store: storetest.NewStore(t), Services: grpc.NewServer(), Admission: admission.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	var cfg componentconfig.ControllerManagerConfiguration
	cfg.Default()
	g, err := controllerManager(reg, admission.Builtin(), cfg, enabled, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var out []string
	for _, c := range g {
		out = append(out, c.Name())
	}
	return out, err
}

func TestControllerManagerSelection(t *testing.T) {
	all, err := names(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Gardener's loops, by the names the logs and docs/controller-manager.md use; the event controller is off
	// without its configuration section, as in Gardener.
	for _, want := range []string{"controllerregistration-seed", "cloudprofile", "secretbinding", "shoot-reference", "bastion",
		"seed-secrets", "seed-extensions-check", "project", "project-stale", "project-activity", "shoot-hibernation",
		"shoot-maintenance", "shoot-quota", "shoot-retry", "shoot-statuslabel", "shoot-conditions", "managedseedset", "garbagecollector", "accesstoken"} {
		if !slices.Contains(all, want) {
			t.Errorf("controller %s missing from %q", want, all)
		}
	}
	if slices.Contains(all, "event") {
		t.Errorf("event controller runs without its configuration section")
	}

	some, err := names(t, []string{"*", "-shoot-statuslabel", "-project-stale"})
	if err != nil {
		t.Fatal(err)
	}
	if len(some) != len(all)-2 || slices.Contains(some, "shoot-statuslabel") || slices.Contains(some, "project-stale") {
		t.Errorf("*,-shoot-statuslabel,-project-stale selected %q", some)
	}
	only, err := names(t, []string{"bastion", "event"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(only, []string{"bastion"}) {
		t.Errorf("bastion,event selected %q, want [bastion]", only)
	}

	_, err = names(t, []string{"*", "-shoot-statuslable"})
	if err == nil || !strings.Contains(err.Error(), `unknown controller "shoot-statuslable"`) || !strings.Contains(err.Error(), "shoot-statuslabel") {
		t.Errorf("a misspelt controller: want an error naming it and the known ones, got %v", err)
	}
}

func TestControllersValidation(t *testing.T) {
	cfg := Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Controllers: []string{"*", "-Shoot Retry", ""}}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), `controllers[1]: "-Shoot Retry"`) || !strings.Contains(err.Error(), `controllers[2]: ""`) {
		t.Fatalf("want errors naming controllers[1] and controllers[2], got %v", err)
	}
}
