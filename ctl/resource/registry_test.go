package resource

import (
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	kinds := []*Kind{
		{Group: "core.gardener.cloud", Version: "v1beta1", Kind: "ControllerDeployment", Resource: "controllerdeployments", Singular: "controllerdeployment", ShortNames: []string{"ctrldeploy"}},
		{Group: "core.gardener.cloud", Version: "v1", Kind: "ControllerDeployment", Resource: "controllerdeployments", Singular: "controllerdeployment"},
		{Group: "core.gardener.cloud", Version: "v1alpha1", Kind: "ControllerDeployment", Resource: "controllerdeployments", Singular: "controllerdeployment"},
		{Group: "", Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Singular: "configmap", ShortNames: []string{"cm"}},
		{Group: "a.example", Version: "v1", Kind: "Widget", Resource: "widgets", Singular: "widget"},
		{Group: "b.example", Version: "v1", Kind: "Widget", Resource: "widgets", Singular: "widget"},
	}
	r := NewRegistry(kinds)
	for name, want := range map[string]*Kind{
		"controllerdeployments": kinds[1], // v1 ranks above v1beta1 and v1alpha1
		"ControllerDeployment":  kinds[1],
		"ctrldeploy":            kinds[0],
		"controllerdeployments.v1beta1.core.gardener.cloud": kinds[0],
		"controllerdeployment.core.gardener.cloud":          kinds[1],
		"cm":                kinds[3],
		"configmap":         kinds[3],
		"CONFIGMAPS":        kinds[3],
		"widgets.b.example": kinds[5],
	} {
		got, err := r.Lookup(name)
		if err != nil || got != want {
			t.Errorf("Lookup(%q) = %v, %v; want %s/%s", name, got, err, want.APIVersion(), want.Kind)
		}
	}
	if _, err := r.Lookup("widgets"); err == nil || !strings.Contains(err.Error(), "widgets.a.example or widgets.b.example") {
		t.Errorf("ambiguous: %v", err)
	}
	if _, err := r.Lookup("gizmos"); err == nil || !strings.Contains(err.Error(), "api-resources") {
		t.Errorf("unknown: %v", err)
	}
	if k, ok := r.ForObject("v1", "ConfigMap"); !ok || k != kinds[3] {
		t.Errorf("ForObject: %v %v", k, ok)
	}
	if _, ok := r.ForObject("core.gardener.cloud/v2", "ControllerDeployment"); ok {
		t.Error("ForObject matched an unknown version")
	}
	if got := strings.Join(r.Names(), " "); got != "configmaps controllerdeployments widgets" {
		t.Errorf("Names = %s", got)
	}
}

func TestVersionPriority(t *testing.T) {
	order := []string{"v2", "v1", "v11beta2", "v10beta3", "v1beta1", "v2alpha1", "v1alpha1", "foo"}
	for i := 1; i < len(order); i++ {
		if versionPriority(order[i-1]) <= versionPriority(order[i]) {
			t.Errorf("%s does not rank above %s", order[i-1], order[i])
		}
	}
}
