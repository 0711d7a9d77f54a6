// Package config owns the agent's configuration file: the AgentConfiguration type (apiVersion
// agent.trellis.dev/v1alpha1, in the spirit of gardenlet's GardenletConfiguration), its strict decoder, its defaults
// and its validation.
//
// A file is YAML or JSON. Decoding is strict: unknown fields, duplicate keys and type mismatches are errors that name
// the field path ("hubClientConnection.kubeconfigValidity.validity"). seedConfig is a Seed manifest in Gardener's JSON
// (metadata and spec) and is decoded with the hub's codec (proto/kjson), so it accepts exactly what the hub's API
// accepts for a Seed.
//
// Load reads, decodes, defaults and validates a file; Decode only decodes, Default fills unset fields and Validate
// reports every invalid field at once.
package config
