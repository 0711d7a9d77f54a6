package helmrelease

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// rendered is a chart rendered for a release, as Helm's install and upgrade render it.
type rendered struct {
	// manifest is the release's manifest: every resource document in install order, each headed by
	// "---\n# Source: <template path>\n" (Helm's format; CRDs of crds/ are not part of it).
	manifest string
	// manifests are the documents of manifest, in the same order.
	manifests []releaseutil.Manifest
	// hooks are the chart's hooks: recorded in the release, never run.
	hooks []*release.Hook
	// notes is the rendered NOTES.txt of the chart itself.
	notes string
}

// render renders ch with vals (complete, in JSON normal form) for a release, with Helm's engine and Helm's render
// values (.Release, .Chart, .Capabilities, .Values after the chart's defaults, dependency conditions, tags and import
// values, and its values.schema.json). seed, when not nil, serves the templates' lookup function.
func render(ch *chart.Chart, vals map[string]any, opts chartutil.ReleaseOptions, caps *chartutil.Capabilities, seed *rest.Config) (rendered, error) {
	if v := ch.Metadata.KubeVersion; v != "" && !chartutil.IsCompatibleRange(v, caps.KubeVersion.String()) {
		return rendered{}, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", v, caps.KubeVersion.String())
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return rendered{}, err
	}
	values, err := chartutil.ToRenderValues(ch, vals, opts, caps)
	if err != nil {
		return rendered{}, err
	}
	var files map[string]string
	if seed != nil {
		files, err = engine.New(seed).Render(ch, values)
	} else {
		files, err = engine.Render(ch, values)
	}
	if err != nil {
		return rendered{}, err
	}

	var r rendered
	notes := path.Join(ch.Name(), "templates", "NOTES.txt")
	for name, content := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			if name == notes {
				r.notes = content
			}
			delete(files, name)
		}
	}
	r.hooks, r.manifests, err = releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return rendered{}, err
	}
	var b strings.Builder
	for _, m := range r.manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	r.manifest = b.String()
	return r, nil
}

// capabilities are the seed's, as Helm's install and upgrade find them: the server's version and every group/version
// and group/version/Kind it serves (a group that failed discovery is left out).
func capabilities(dc discovery.DiscoveryInterface) (*chartutil.Capabilities, error) {
	v, err := dc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the seed's Kubernetes version: %w", err)
	}
	groups, resources, err := dc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("reading the seed's API versions: %w", err)
	}
	set := map[string]bool{}
	for _, g := range groups {
		for _, gv := range g.Versions {
			set[gv.GroupVersion] = true
		}
	}
	for _, list := range resources {
		for _, r := range list.APIResources {
			set[list.GroupVersion+"/"+r.Kind] = true
		}
	}
	versions := chartutil.DefaultVersionSet
	if len(set) > 0 {
		versions = make(chartutil.VersionSet, 0, len(set))
		for gv := range set {
			versions = append(versions, gv)
		}
		sort.Strings(versions)
	}
	return &chartutil.Capabilities{
		KubeVersion: chartutil.KubeVersion{Version: v.GitVersion, Major: v.Major, Minor: v.Minor},
		APIVersions: versions,
		HelmVersion: chartutil.DefaultCapabilities.HelmVersion,
	}, nil
}
