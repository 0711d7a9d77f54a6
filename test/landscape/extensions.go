package landscape

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/trellis-dev/trellis/deploy/extensions"
)

// The landscape registers provider-local as a real extension is registered: the ControllerDeployment and
// ControllerRegistration `make generate` writes (deploy/extensions), so the hub creates a ControllerInstallation per
// seed and each agent installs the chart into extension-<installation> of its seed. The seeds have no nodes to run
// the chart's pod, so the chart is installed with no replicas (DefaultProviderLocalValues) and the landscape runs the
// provider-local binary itself in the installation's namespace, where it renews its heartbeat.
const (
	// ProviderLocalRegistration is the name of provider-local's ControllerRegistration and ControllerDeployment.
	ProviderLocalRegistration = "provider-local"
)

// DefaultProviderLocalValues are the chart values the landscape registers provider-local with: no replicas, since
// the landscape runs the process.
func DefaultProviderLocalValues() map[string]any { return map[string]any{"replicaCount": 0} }

// RegisterProviderLocal applies provider-local's generated ControllerDeployment (with values merged over its
// helm.values, top-level keys replacing) and ControllerRegistration to the hub: created, or updated to this build's
// state when they exist.
func (l *Landscape) RegisterProviderLocal(ctx context.Context, values map[string]any) error {
	docs, err := extensions.ProviderLocalDocuments()
	if err != nil {
		return err
	}
	for _, d := range docs {
		body := d.JSON
		if d.Kind == "ControllerDeployment" && len(values) > 0 {
			if body, err = withValues(body, values); err != nil {
				return err
			}
		}
		if err := l.hubc.apply(ctx, collectionPath(d.APIVersion, d.Kind), d.Name, body); err != nil {
			return fmt.Errorf("register provider-local: %w", err)
		}
	}
	return nil
}

// RegisterExtensions creates (or updates) the ControllerRegistration name, without a deployment, registering each
// "Kind/type" of resources as primary, so that the hub admits Seeds, Shoots, BackupBuckets and BackupEntries of those
// types (Gardener's ExtensionValidator).
func (l *Landscape) RegisterExtensions(ctx context.Context, name string, resources ...string) error {
	type resource struct {
		Kind string `json:"kind"`
		Type string `json:"type"`
	}
	res := make([]resource, 0, len(resources))
	for _, r := range resources {
		kind, typ, ok := strings.Cut(r, "/")
		if !ok || kind == "" || typ == "" {
			return fmt.Errorf("register %s: %q is not Kind/type", name, r)
		}
		res = append(res, resource{Kind: kind, Type: typ})
	}
	body, err := json.Marshal(map[string]any{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "ControllerRegistration",
		"metadata": map[string]string{"name": name}, "spec": map[string]any{"resources": res}})
	if err != nil {
		return err
	}
	if err := l.hubc.apply(ctx, collectionPath("core.gardener.cloud/v1beta1", "ControllerRegistration"), name, body); err != nil {
		return fmt.Errorf("register %s: %w", name, err)
	}
	return nil
}

// withValues merges values into the helm.values of a ControllerDeployment.
func withValues(cd []byte, values map[string]any) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(cd, &obj); err != nil {
		return nil, err
	}
	helm, _ := obj["helm"].(map[string]any)
	if helm == nil {
		helm = map[string]any{}
		obj["helm"] = helm
	}
	vals, _ := helm["values"].(map[string]any)
	if vals == nil {
		vals = map[string]any{}
	}
	for k, v := range values {
		vals[k] = v
	}
	helm["values"] = vals
	return json.Marshal(obj)
}

// collectionPath is the REST path of the cluster-scoped collection of a Gardener kind.
func collectionPath(apiVersion, kind string) string {
	resource := map[string]string{"ControllerDeployment": "controllerdeployments", "ControllerRegistration": "controllerregistrations"}[kind]
	return "/apis/" + apiVersion + "/" + resource
}

// ProviderLocalInstallation waits until the hub has a ControllerInstallation of provider-local for seed and the
// seed's agent has installed its chart (condition Installed=True), and returns its name; the chart's namespace in the
// seed is "extension-" + that name.
func (l *Landscape) ProviderLocalInstallation(ctx context.Context, seed string) (string, error) {
	s, err := l.seed(seed)
	if err != nil {
		return "", err
	}
	var name string
	err = l.waitFor(ctx, s.agent, "the ControllerInstallation of provider-local to be installed", func(ctx context.Context) (bool, error) {
		var installed bool
		name, installed, err = l.hubc.installation(ctx, ProviderLocalRegistration, seed)
		return installed, err
	})
	return name, err
}

// installation returns the name of the ControllerInstallation of registration for seed that is not being deleted
// ("" when there is none) and whether its condition Installed is True.
func (c *hubClient) installation(ctx context.Context, registration, seed string) (string, bool, error) {
	path := "/apis/core.gardener.cloud/v1beta1/controllerinstallations?fieldSelector=" + url.QueryEscape("spec.seedRef.name="+seed)
	code, body, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return "", false, err
	}
	if code != http.StatusOK {
		return "", false, statusError(code, body)
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name              string     `json:"name"`
				DeletionTimestamp *time.Time `json:"deletionTimestamp"`
			} `json:"metadata"`
			Spec struct {
				RegistrationRef struct {
					Name string `json:"name"`
				} `json:"registrationRef"`
			} `json:"spec"`
			Status struct {
				Conditions []condition `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return "", false, err
	}
	for _, ci := range list.Items {
		if ci.Spec.RegistrationRef.Name == registration && ci.Metadata.DeletionTimestamp == nil {
			installed := slices.ContainsFunc(ci.Status.Conditions, func(c condition) bool { return c.Type == "Installed" && c.Status == "True" })
			return ci.Metadata.Name, installed, nil
		}
	}
	return "", false, nil
}

// apply creates obj in the collection at path, or replaces the existing object name with it (keeping of the old one
// its finalizers and its resourceVersion, which the update is conditional on).
func (c *hubClient) apply(ctx context.Context, path, name string, obj []byte) error {
	created, err := c.create(ctx, path, obj)
	if err != nil || created {
		return err
	}
	for attempt := 0; ; attempt++ {
		code, body, err := c.do(ctx, http.MethodGet, path+"/"+name, nil)
		if err != nil {
			return fmt.Errorf("GET %s/%s: %w", path, name, err)
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET %s/%s: %w", path, name, statusError(code, body))
		}
		var cur struct {
			Metadata struct {
				ResourceVersion string   `json:"resourceVersion"`
				Finalizers      []string `json:"finalizers"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(body, &cur); err != nil {
			return err
		}
		var next map[string]any
		if err := json.Unmarshal(obj, &next); err != nil {
			return err
		}
		md, _ := next["metadata"].(map[string]any)
		md["resourceVersion"] = cur.Metadata.ResourceVersion
		if len(cur.Metadata.Finalizers) > 0 {
			md["finalizers"] = cur.Metadata.Finalizers // the hub's and the agents' to keep
		}
		put, _ := json.Marshal(next)
		code, body, err = c.do(ctx, http.MethodPut, path+"/"+name, put)
		if err != nil {
			return fmt.Errorf("PUT %s/%s: %w", path, name, err)
		}
		if code == http.StatusConflict && statusReason(body) == "Conflict" && attempt < 5 {
			continue
		}
		if code != http.StatusOK {
			return fmt.Errorf("PUT %s/%s: %w", path, name, statusError(code, body))
		}
		return nil
	}
}

// extensionNamespacePrefix prefixes a ControllerInstallation's namespace in its seed.
const extensionNamespacePrefix = "extension-"
