package ctlgen

import (
	"testing"

	"google.golang.org/genproto/googleapis/api/annotations"
)

func TestParsePath(t *testing.T) {
	for path, want := range map[string]kind{
		"/apis/core.gardener.cloud/v1beta1/namespaces/{namespace}/shoots/{name}": {group: "core.gardener.cloud", version: "v1beta1", resource: "shoots", namespaced: true},
		"/apis/core.gardener.cloud/v1beta1/seeds/{name}":                         {group: "core.gardener.cloud", version: "v1beta1", resource: "seeds"},
		"/api/v1/namespaces/{namespace}/secrets/{name}":                          {version: "v1", resource: "secrets", namespaced: true},
		"/api/v1/namespaces/{name}":                                              {version: "v1", resource: "namespaces"},
	} {
		var k kind
		if err := k.parsePath(path); err != nil || k.group != want.group || k.version != want.version || k.resource != want.resource || k.namespaced != want.namespaced {
			t.Errorf("%s: %+v %v", path, k, err)
		}
	}
	for _, bad := range []string{"/apis/g/v1/shoots", "/v1/x/{name}", "/apis/g/v1/namespaces/{namespace}/{name}", "/api/v1/a/b/{name}"} {
		var k kind
		if err := k.parsePath(bad); err == nil {
			t.Errorf("%s accepted: %+v", bad, k)
		}
	}
}

func TestSubresourceOf(t *testing.T) {
	for _, c := range []struct {
		rule *annotations.HttpRule
		want string
	}{
		{&annotations.HttpRule{Pattern: &annotations.HttpRule_Put{Put: "/apis/g/v1/namespaces/{metadata.namespace}/shoots/{metadata.name}/status"}}, "status"},
		{&annotations.HttpRule{Pattern: &annotations.HttpRule_Patch{Patch: "/apis/g/v1/x/{name}/{subresource=binding}"}}, "binding"},
		{&annotations.HttpRule{Pattern: &annotations.HttpRule_Post{Post: "/apis/g/v1/x/{name}"}}, ""},
		{&annotations.HttpRule{Pattern: &annotations.HttpRule_Post{Post: "/apis/g/v1/count"}}, ""},
	} {
		if got, _ := subresourceOf(c.rule); got != c.want {
			t.Errorf("%v: %q, want %q", c.rule, got, c.want)
		}
	}
	if kebab("UpdateStatus") != "update-status" || kebab("Polish") != "polish" {
		t.Error("kebab")
	}
}
