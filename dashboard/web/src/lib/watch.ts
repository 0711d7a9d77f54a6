// Live collections: a list, then the hub's watch (?watch=true, one JSON event per line) from the list's
// resourceVersion. A watch that ends is resumed from the last version seen; an expired version (410, or an ERROR
// event) relists. Nothing polls.
import { base, ApiError } from "./api";
import type { KObject, Status } from "./types";

export type WatchType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";

export interface Collection<T extends KObject> {
  /** Called with every object after the list and on every change; items is keyed by namespace/name. */
  onChange: (items: Map<string, T>, event?: { type: WatchType; object: T }) => void;
  onError?: (err: unknown) => void;
}

const headers = { "X-Trellis-Dashboard": "1" };

function k(o: KObject) {
  return `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;
}

/**
 * listWatch keeps a collection of path (a collection path, optionally with a query) in step with the hub until
 * signal aborts. Events are handed over in batches of whatever arrived together, so that a burst renders once.
 */
export function listWatch<T extends KObject>(path: string, sink: Collection<T>, signal: AbortSignal): void {
  const sep = path.includes("?") ? "&" : "?";
  let items = new Map<string, T>();
  let rv = "";
  let backoff = 250;

  const list = async () => {
    const res = await fetch(`${base}/api${path}`, { headers, signal, credentials: "same-origin" });
    if (!res.ok) throw new ApiError(res.status, (await res.json().catch(() => ({}))) as Status);
    const body = (await res.json()) as { items?: T[]; metadata?: { resourceVersion?: string } };
    items = new Map((body.items ?? []).map((o) => [k(o), o]));
    rv = body.metadata?.resourceVersion ?? "";
    sink.onChange(items);
  };

  const watch = async () => {
    const url = `${base}/api${path}${sep}watch=true&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(rv)}`;
    const res = await fetch(url, { headers, signal, credentials: "same-origin" });
    if (res.status === 410) return "expired";
    if (!res.ok || !res.body) throw new ApiError(res.status, (await res.json().catch(() => ({}))) as Status);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return "ended";
      buf += value;
      let nl: number;
      let changed = false;
      let last: { type: WatchType; object: T } | undefined;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line) continue;
        const ev = JSON.parse(line) as { type: WatchType; object: T };
        if (ev.type === "ERROR") {
          const st = ev.object as unknown as Status;
          if (st.code === 410) return "expired";
          throw new ApiError(st.code ?? 500, st);
        }
        rv = ev.object.metadata?.resourceVersion ?? rv;
        if (ev.type === "BOOKMARK") continue;
        if (!changed) items = new Map(items);
        changed = true;
        if (ev.type === "DELETED") items.delete(k(ev.object));
        else items.set(k(ev.object), ev.object);
        last = ev;
      }
      if (changed) sink.onChange(items, last);
      backoff = 250;
    }
  };

  (async () => {
    let needList = true;
    while (!signal.aborted) {
      try {
        if (needList) await list();
        needList = (await watch()) === "expired";
      } catch (err) {
        if (signal.aborted) return;
        sink.onError?.(err);
        if (err instanceof ApiError && err.code === 401) window.dispatchEvent(new CustomEvent("trellis:unauthorized"));
        if (err instanceof ApiError && (err.code === 401 || err.code === 403 || err.code === 404)) return;
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 10_000);
        needList = true;
      }
    }
  })();
}
