// Package project owns the Project controllers of the hub's leader, Gardener's
// pkg/controllermanager/controller/project rebuilt on package controller:
//
//   - project (project.go, namespace.go): keeps the "gardener" finalizer on every Project, creates its namespace
//     (spec.namespace, or garden-<name>) or adopts an existing one that carries the project's labels, refuses an
//     unlabelled namespace or one of another project (status.phase Failed and a Warning event), and keeps
//     status.phase (Pending, Ready, Failed, Terminating) and status.observedGeneration. A Project being deleted waits
//     while its namespace holds Shoots; then the namespace is released: kept (stripped of the project's labels and
//     annotations) when annotated namespace.gardener.cloud/keep-after-project-deletion=true, deleted otherwise, and
//     the finalizer goes once the namespace is gone.
//   - project-stale (stale.go): marks unused Projects stale (status.staleSinceTimestamp), gives them an auto-delete
//     time (status.staleAutoDeleteTimestamp) after the grace period, never moves that time earlier, and deletes them,
//     with Gardener's deletion confirmation, once it has passed. Checked every staleSyncPeriod per Project.
//   - project-activity (activity.go): sets status.lastActivityTimestamp when objects in the project namespace
//     change: Shoots and BackupEntries (created, spec changed, deleted), Secrets and Quotas that carry a binding
//     reference label.
//
// Namespaces. Namespaces are objects of the hub's store, and the hub has no namespace controller: deleting a
// namespace object does not delete what is in it. So the project controller does what kube's namespace controller
// does for the namespaces it deletes: it marks the namespace for deletion with the finalizer
// FinalizerNamespaceContent (the namespace is then Terminating and the API refuses new content in it), deletes every
// object in it but Shoots (which need Gardener's deletion confirmation and are waited for instead), and removes the
// finalizer once the namespace is empty, which removes the namespace.
//
// Default quotas (ControllerManagerConfiguration controllers.project.quotas) are not kept here: Gardener writes them as
// a ResourceQuota named "gardener" into the project namespace for kube-apiserver to enforce, and the hub has no
// ResourceQuota kind. Package admission enforces them on create (admission.ProjectQuotas).
package project
