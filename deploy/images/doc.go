// Package images owns the container images Trellis builds locally, without Docker or a registry: one-layer OCI images
// around static binaries (the project's and those `make testbin` caches), written as image archives that a node
// imports with `ctr -n k8s.io images import`, each named local.trellis.dev/<name>:<version>.
//
// Images are reproducible: the same input files give the same layer, config and manifest digests on every run (tar
// entries in a fixed order with fixed owners, modes and times; a fixed creation time; gzip without name or time), so
// an image changes only when its binary does. Components run as a non-root user (65532, pause as 65535) wherever they
// need no privileges; busybox, the tools image, runs as root because local-path-provisioner's helper pods create and
// delete directories on the node's disk with it.
//
// Catalog lists the images from where their binaries are; Build makes one; WriteArchive writes it. The command
// deploy/images/cmd/build-images (`make images`, and `make testbin` for the images a node needs) uses them.
package images
