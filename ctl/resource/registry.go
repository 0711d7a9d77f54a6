package resource

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Registry finds kinds by name and by apiVersion and kind.
type Registry struct {
	kinds []*Kind
}

// NewRegistry returns a registry of kinds.
func NewRegistry(kinds []*Kind) *Registry {
	return &Registry{kinds: kinds}
}

// Kinds returns every kind, in the order given to NewRegistry.
func (r *Registry) Kinds() []*Kind { return r.kinds }

// Lookup finds the kind a user means by name (see Kind.matches). A resource served in several versions of one
// group resolves to the version Kubernetes ranks highest (v1 before v1beta1 before v1alpha1), as kubectl picks the
// preferred version; a qualified name (controllerdeployments.v1beta1.core.gardener.cloud) picks another.
func (r *Registry) Lookup(name string) (*Kind, error) {
	var match []*Kind
	for _, k := range r.kinds {
		if k.matches(name) {
			match = append(match, k)
		}
	}
	switch {
	case len(match) == 0:
		return nil, fmt.Errorf("the hub serves no resource %q (see trellisctl api-resources)", name)
	case len(match) == 1:
		return match[0], nil
	}
	for _, k := range match[1:] {
		if k.Group != match[0].Group {
			names := make([]string, len(match))
			for i, m := range match {
				names[i] = m.GroupResource()
			}
			return nil, fmt.Errorf("%q is ambiguous: say %s", name, strings.Join(names, " or "))
		}
	}
	sort.SliceStable(match, func(i, j int) bool { return versionPriority(match[i].Version) > versionPriority(match[j].Version) })
	return match[0], nil
}

// ForObject finds the kind of a manifest by its apiVersion and kind.
func (r *Registry) ForObject(apiVersion, kind string) (*Kind, bool) {
	for _, k := range r.kinds {
		if k.APIVersion() == apiVersion && k.Kind == kind {
			return k, true
		}
	}
	return nil, false
}

// Names returns the resource names of every kind, sorted and without duplicates, for completion.
func (r *Registry) Names() []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range r.kinds {
		if !seen[k.Resource] {
			seen[k.Resource] = true
			out = append(out, k.Resource)
		}
	}
	sort.Strings(out)
	return out
}

// versionPriority ranks Kubernetes API versions as Kubernetes sorts them: GA above beta above alpha, higher numbers
// first within each; anything else lowest.
func versionPriority(v string) int {
	rest, ok := strings.CutPrefix(v, "v")
	if !ok {
		return 0
	}
	num, pre, minor := rest, 3, 0
	for i, stage := range []string{"alpha", "beta"} {
		if a, b, found := strings.Cut(rest, stage); found {
			num, pre = a, i+1
			n, err := strconv.Atoi(b)
			if err != nil {
				return 0
			}
			minor = n
		}
	}
	major, err := strconv.Atoi(num)
	if err != nil {
		return 0
	}
	return pre<<24 | major<<12 | minor
}
