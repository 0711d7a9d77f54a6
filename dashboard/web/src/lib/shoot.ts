// What the shoot table and page read from a Shoot.
import type { Shoot } from "./types";

export const cloudProfile = (s: Shoot) => s.spec?.cloudProfile?.name ?? s.spec?.cloudProfileName ?? "";

/** hibernation is the shoot's hibernation as Gardener's dashboard words it. */
export function hibernation(s: Shoot): string {
  const want = !!s.spec?.hibernation?.enabled;
  const is = !!s.status?.hibernated;
  if (want && is) return "Hibernated";
  if (want) return "Hibernating";
  if (is) return "Waking up";
  return "Awake";
}

/** health is the shoot's status label (shoot.gardener.cloud/status), or what the conditions say. */
export function health(s: Shoot): string {
  const label = s.metadata?.labels?.["shoot.gardener.cloud/status"];
  if (label) return label;
  const conds = s.status?.conditions ?? [];
  if (conds.some((c) => c.status === "False")) return "unhealthy";
  if (conds.some((c) => c.status === "Unknown")) return "unknown";
  if (conds.some((c) => c.status === "Progressing")) return "progressing";
  return "healthy";
}

export const opState = (s: Shoot) => s.status?.lastOperation?.state ?? "Pending";

/** sortKey is the value a column sorts by. */
export function sortKey(s: Shoot, col: string): string | number {
  switch (col) {
    case "name":
      return s.metadata?.name ?? "";
    case "project":
      return s.metadata?.namespace ?? "";
    case "purpose":
      return s.spec?.purpose ?? "";
    case "profile":
      return cloudProfile(s);
    case "region":
      return `${s.spec?.provider?.type ?? ""}/${s.spec?.region ?? ""}`;
    case "seed":
      return s.spec?.seedName ?? "";
    case "version":
      return (s.spec?.kubernetes?.version ?? "").split(".").map((p) => p.padStart(4, "0")).join(".");
    case "hibernation":
      return hibernation(s);
    case "operation":
      return `${opState(s)} ${String(s.status?.lastOperation?.progress ?? 0).padStart(3, "0")}`;
    case "health":
      return health(s);
    case "age":
      return -Date.parse(s.metadata?.creationTimestamp ?? "") || 0;
  }
  return "";
}

/** matches reports whether the shoot matches every word of the filter in one of its columns. */
export function matches(s: Shoot, words: string[]): boolean {
  if (words.length === 0) return true;
  const hay = [
    s.metadata?.name,
    s.spec?.purpose,
    cloudProfile(s),
    s.spec?.provider?.type,
    s.spec?.region,
    s.spec?.seedName,
    s.spec?.kubernetes?.version,
    hibernation(s),
    opState(s),
    health(s),
    s.status?.lastOperation?.description,
  ]
    .join(" ")
    .toLowerCase();
  return words.every((w) => hay.includes(w));
}
