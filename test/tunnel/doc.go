// Package tunnel holds the end-to-end tests of tunnels through seed agents (docs/tunnels.md): a real hub, real agents,
// a real seed kube-apiserver from bin/testbin and the real kubectl, and a real TLS server as the stand-in target of a
// shoot's kube-apiserver until shoots have control planes of their own.
package tunnel
