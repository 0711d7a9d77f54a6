// Package controllerregistration owns the controller-manager's ControllerRegistration controllers, Gardener's of the
// same name: the seed reconciler decides, per seed, which ControllerRegistrations the seed needs (those serving the
// kinds and types its shoots and backups need, ForShoot, and those of policy Always or AlwaysExceptNoShoots, all
// filtered by their seedSelector) and keeps one ControllerInstallation per needed registration and seed; finalizer controllers keep
// ControllerRegistrations, ControllerDeployments and Seeds while installations use them. The agent of the seed
// installs what the installations name (agent/controllerinstallation); docs/controller-registration.md describes the
// whole path.
package controllerregistration
