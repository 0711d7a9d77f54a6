// Package ocitest runs an OCI registry for tests: go-containerregistry's pkg/registry, a real OCI distribution
// server whose storage is memory, behind TLS (httptest, so clients need the registry's CA bundle) and HTTP basic auth
// (so clients need credentials, as from a kubernetes.io/dockerconfigjson pull secret). Charts are pushed with Helm's
// own registry client.
package ocitest
