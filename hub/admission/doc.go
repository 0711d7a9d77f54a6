// Package admission owns what the hub checks and fills in before it stores an object: defaulting, validation with
// field paths, and admission checks that read other objects (a Shoot's namespace belongs to a Project, its cloud
// profile exists and offers its Kubernetes version and machine types, its credentials binding exists). Each kind
// registers a Plugin keyed by its message; kinds without one get only the generic metadata validation of package api.
package admission
