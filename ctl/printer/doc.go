// Package printer owns how trellisctl shows objects: tables of a kind's columns (package resource; -o wide adds the
// columns of higher priority), YAML and JSON in Gardener's JSON (package proto/kjson), names
// (shoot.core.gardener.cloud/local, as kubectl prints them), a JSONPath (-o jsonpath=...), watch events, and the
// describe view. Several objects print as a List in YAML and JSON, which `trellisctl apply -f` reads back.
package printer
