// Package manifest owns reading the manifests trellisctl is given with -f: Gardener and Kubernetes objects in YAML or
// JSON, several documents per file separated by "---" lines, files, directories (their *.yaml, *.yml and *.json
// files, optionally recursively) and standard input ("-"). A List (kind List, or any kind ending in List with items,
// as `trellisctl get -o yaml` writes several objects) stands for its items. Each object comes out as JSON with its
// apiVersion, kind, name and namespace and where it was read from.
package manifest
