// What the logged-in user may do in a project, read from Project.spec.members as the hub decides it
// (docs/access.md). The page hides what the hub would refuse; the hub refuses it anyway.
import type { User } from "./api";
import type { Project } from "./types";

/** roles returns the user's roles in project (owner, admin, viewer, uam, ...). */
export function roles(project: Project | undefined, user: User): Set<string> {
  const out = new Set<string>();
  if (!project) return out;
  const ns = project.spec?.namespace ?? "";
  for (const m of project.spec?.members ?? []) {
    let match = false;
    switch (m.kind) {
      case "User":
        match = m.name === user.name;
        break;
      case "Group":
        match = !!m.name && user.groups.includes(m.name);
        break;
      case "ServiceAccount":
        match = user.name === `system:serviceaccount:${m.namespace || ns}:${m.name}`;
        break;
    }
    if (!match) continue;
    if (m.role) out.add(m.role);
    for (const r of m.roles ?? []) out.add(r);
  }
  if (out.has("owner")) out.add("admin");
  return out;
}

/** canWriteShoots reports whether the user may create, change and delete the project's shoots. */
export function canWriteShoots(project: Project | undefined, user: User): boolean {
  if (user.clusterAdmin) return true;
  const r = roles(project, user);
  return r.has("admin") || r.has("owner");
}

/** roleLabel names the user's strongest role for the header. */
export function roleLabel(project: Project | undefined, user: User): string {
  if (user.clusterAdmin) return "cluster admin";
  const r = roles(project, user);
  for (const name of ["owner", "admin", "viewer", "uam"]) if (r.has(name)) return name;
  return [...r][0] ?? "";
}
