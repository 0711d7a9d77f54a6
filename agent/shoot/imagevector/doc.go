// Package imagevector says which container image runs each component of a shoot's control plane, by the shoot's
// Kubernetes version: Gardener's image vector. The agent embeds upstream defaults (images.yaml: registry.k8s.io);
// an operator overrides them with a file of the same form (the agent's controllers.shoot.controlPlane.imageVector),
// whose entries win over the defaults' for the components they name, as the local landscape does with the images
// `make testbin` builds (local.trellis.dev/<component>:<version>).
package imagevector
