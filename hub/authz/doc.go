// Package authz owns authorization: what an authenticated user may do. It decides for the kinds' servers through
// api.Authorizer and for the hub's other entry points (gRPC methods, paths outside the API):
//
//   - Bootstrap token users may do nothing but the agent's bootstrap exchange (AgentService/Connect).
//   - Seed agents (users with auth.User.Seed) are held to the rules of Gardener's SeedAuthorizer and SeedRestriction:
//     they read only what belongs to their seed — lists and watches are filtered on the server — and write only
//     what belongs to it and only where a gardenlet may; a create is checked on the new object. What belongs to a
//     seed beyond what an object says itself (a shoot's spec.seedName, a BackupBucket's spec.seedName, ...) is the
//     Graph's answer (package seedgraph keeps it). A get is decided by the Graph's paths, as Gardener's: an object
//     the seed's objects reference may be read whether or not it exists, so a missing one is NotFound, not
//     Forbidden.
//   - Cluster admins (group system:masters) may do everything.
//   - Everyone else is held to Gardener's project roles (user.go, roles.go): Project.spec.owner and spec.members
//     (users, groups, service accounts) with the roles owner, admin, viewer, uam, serviceaccountmanager and
//     extension:<name>, whose rules are those of Gardener's RBAC for project members, in the project namespace
//     (spec.namespace); the ClusterRoles labelled rbac.gardener.cloud/aggregate-to-extension-role=<name> define the
//     extension roles. Every user reads the global resources (CloudProfiles, ExposureClasses, Seeds), creates
//     projects, and gets, lists and revokes its own user tokens. Projects and their namespaces are invisible to
//     non-members: lists and watches are filtered, gets are NotFound. Decisions read the watch cache through
//     indexes (Indexes): the projects of a user or group, the ClusterRoles of an extension role.
//
// Denials are Kubernetes Forbidden errors naming the user, verb and resource (api.Forbidden).
package authz
