// Package healthcheck owns the health-check library: per extension kind and type (Add) a controller that runs a set
// of checks every SyncPeriod (default 30 s) and reports them as conditions in the objects' status.conditions, with the
// shoot's condition types (SystemComponentsHealthy, EveryNodeReady, ControlPlaneHealthy,
// ObservabilityComponentsHealthy; never APIServerAvailable, which only the agent reports). The agent merges them into
// the Shoot's conditions.
//
// One condition per type, from the results of the checks mapped to it:
//
//   - all True: True, reason HealthCheckSuccessful, message "(n/n) Health checks successful";
//   - a check returned an error: Unknown, reason ConditionCheckError;
//   - a check returned False: False, reason HealthCheckUnsuccessful;
//   - else a check returned Progressing: Progressing, reason HealthCheckProgressing, until the condition has been
//     Progressing (or Unknown) for longer than the threshold, then False; a condition that is already False stays
//     False, one that was True becomes Progressing.
//
// Codes of False and Progressing results go into the condition's codes. lastTransitionTime moves when the status
// changes, lastUpdateTime when anything changes; an unchanged condition is not written again. Conditions of other
// types (written by other controllers) are kept.
//
// Objects are not checked while being deleted, while migrated or being migrated (operation annotation or last
// operation migrate), and before their first Create or Restore succeeded. While the shoot is hibernated every
// condition is True with the message "Shoot is hibernated".
//
// Reusable checks: DeploymentReady, and SecretExists, ConfigMapExists, ServiceExists (ObjectExists for any kind) for
// objects in the extension object's namespace. Checks read the seed through the manager's API reader, uncached, so
// checking a Secret does not cache every Secret of the seed.
package healthcheck
