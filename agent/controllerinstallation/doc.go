// Package controllerinstallation owns the agent's ControllerInstallation controllers, gardenlet's role for the
// extensions the hub assigns to the agent's seed.
//
// The installation controller deploys each ControllerInstallation of the seed: it renders the Helm chart of the
// installation's ControllerDeployment (helm.rawChart, or helm.ociRepository pulled with the registry credentials and
// CA bundle the deployment names) with the deployment's helm.values deep-merged with the `gardener:` block Gardener
// injects (version, garden cluster identity, the seed's name, identity, labels, annotations, provider, region,
// volume providers, ingress domain, protection, visibility, taints, networks, blockCIDRs and spec, gardenlet feature
// gates), and installs or upgrades it as Helm release <registration name> in namespace extension-<installation>
// (package helmrelease), labelled gardener.cloud/role=extension. It keeps the conditions Gardener's gardenlet keeps:
//
//   - Valid: RegistrationValid, or RegistrationNotFound, SeedNotFound, ChartInformationInvalid,
//     OCIChartCannotBePulled, ChartCannotBeRendered (with Helm's message);
//   - Installed: InstallationSuccessful, or InstallationFailed; while being deleted DeletionPending,
//     DeletionFailed, DeletionSuccessful;
//   - Healthy and Progressing: ControllerHealthy / ControllerNotHealthy and ControllerRolledOut /
//     ControllerNotRolledOut, from the health of what the release deployed (Gardener's workload health rules).
//
// A change of the installation, its registration, its deployment, the seed or the registry secrets deploys again; a
// release whose chart and values are unchanged is left alone. A deleted installation (the hub deletes it once the
// seed no longer needs it) has its release uninstalled and its namespace deleted before the agent's finalizer
// core.gardener.cloud/controllerinstallation lets it go.
//
// The required controller keeps the Required condition: True (ExtensionObjectsExist) while extension objects of the
// kinds and types of the installation's registration exist in the seed, False (NoExtensionObjects) once none do;
// the hub keeps a Required installation even when no shoot needs it any more, so that the extension can finish
// cleaning up. It decides only once the informers of every extension kind have synced.
package controllerinstallation
