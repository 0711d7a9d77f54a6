// Package extensions owns the registrations of the extensions Trellis ships: for each, a generated manifest with its
// ControllerDeployment (core.gardener.cloud/v1, the Helm chart of deploy/charts inline in helm.rawChart) and its
// ControllerRegistration (core.gardener.cloud/v1beta1, the kinds and types it serves), embedded so that the local
// landscape and tests apply them without reading files.
//
// provider-local/controller-registration.yaml is written by `make generate` (go run ./deploy/extensions/gen) from
// deploy/charts/provider-local and extsdk/provider/local.Kinds(); never edit it by hand. `make checkgenerate` fails
// when it is stale, and so does the generator's test.
//
//	docs, err := extensions.ProviderLocalDocuments()
//	for _, d := range docs {
//		// POST d.JSON to the collection of d.APIVersion and d.Kind, e.g.
//		// /apis/core.gardener.cloud/v1/controllerdeployments
//	}
//
// Documents are Gardener's JSON, so they decode strictly into the hub's protos (proto/kjson).
package extensions
