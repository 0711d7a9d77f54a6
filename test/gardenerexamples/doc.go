// Package gardenerexamples gives tests Gardener's example manifests (../shared/gardener/examples beside the
// repository, never copied into it): where they are, their placeholders filled with concrete values of the right JSON
// type, and the Trellis message of each manifest's kind.
package gardenerexamples
