// Package config owns trellisctl's configuration file and the resolution of where a command connects: the file
// holds named contexts (hub address, CA, token, default namespace or project) and the current one, like a
// kubeconfig; Resolve combines the chosen context with the TRELLIS_HUB, TRELLIS_CA and TRELLIS_TOKEN environment
// variables and the command-line flags into a Target.
//
// The file is $TRELLISCONFIG, or ~/.trellis/config. It is YAML (or JSON), read strictly, written with mode 0600:
//
//	apiVersion: trellis.dev/v1alpha1
//	kind: Config
//	current-context: local
//	contexts:
//	- name: local
//	  hub: 127.0.0.1:8443
//	  certificate-authority-data: <base64 of the CA's PEM>   # or certificate-authority: /path/to/ca.crt
//	  token: <bearer token>
//	  namespace: garden-dev                                  # or project: dev
package config
