// Presentation of Gardener's status fields, as Gardener's dashboard shows them.
import type { Condition } from "./types";

/** age renders the time since ts as kubectl does: 42s, 5m, 3h, 12d. */
export function age(ts: string | undefined, now = Date.now()): string {
  if (!ts) return "";
  const s = Math.max(0, Math.floor((now - Date.parse(ts)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 48 * 3600) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** until renders the time from now to ts ("in 3d", "expired 2h ago"). */
export function until(ts: string | undefined, now = Date.now()): string {
  if (!ts) return "";
  const t = Date.parse(ts);
  return t >= now ? `in ${age(new Date(now).toISOString(), t)}` : `expired ${age(ts, now)} ago`;
}

const short: Record<string, string> = {
  APIServerAvailable: "API",
  ControlPlaneHealthy: "CP",
  ObservabilityComponentsHealthy: "OC",
  EveryNodeReady: "N",
  SystemComponentsHealthy: "SC",
  GardenletReady: "GR",
  BackupBucketsReady: "BB",
  ExtensionsReady: "EX",
  SeedSystemComponentsHealthy: "SSC",
  Installed: "I",
  Healthy: "H",
  Valid: "V",
  Progressing: "P",
  Required: "R",
};

/** shortName is the condition chip's label. */
export const shortName = (type = "") => short[type] ?? (type.replace(/[a-z]/g, "").slice(0, 3) || type.slice(0, 3));

/** tone is the colour class of a condition status or operation state. */
export function tone(c: Pick<Condition, "status" | "type"> | undefined): string {
  switch (c?.status) {
    case "True":
      return c.type === "Progressing" ? "info" : "ok";
    case "False":
      return c.type === "Progressing" || c.type === "Required" ? "muted" : "bad";
    case "Progressing":
      return "info";
    default:
      return "warn";
  }
}

export function stateTone(state: string | undefined): string {
  switch (state) {
    case "Succeeded":
      return "ok";
    case "Processing":
    case "Pending":
      return "info";
    case "Error":
      return "warn";
    case "Failed":
    case "Aborted":
      return "bad";
    default:
      return "muted";
  }
}

/** time renders an RFC 3339 timestamp in the reader's locale. */
export const time = (ts?: string) => (ts ? new Date(ts).toLocaleString() : "");
