// Package admission owns what the hub checks and fills in before it stores an object: defaulting, validation with
// field paths, and admission checks that read other objects (a Shoot's namespace belongs to a Project, its cloud
// profile exists and offers its Kubernetes version and machine types, its credentials binding exists). The kinds'
// plugins form an explicit table (Builtin, in builtin.go) that the API server and the controllers creating objects are
// given; kinds without a plugin get only the generic metadata validation of package api.
package admission
