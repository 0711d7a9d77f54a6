// Reactive live collections for components: a listWatch whose items are Svelte state.
import { listWatch } from "./watch";
import type { KObject } from "./types";

export class Live<T extends KObject> {
  items = $state.raw<Map<string, T>>(new Map());
  loaded = $state(false);
  error = $state<unknown>(null);
  /** lastChange is when the latest batch of watch events was applied (performance.now()), for measurements. */
  lastChange = 0;
  #abort = new AbortController();

  constructor(path: string) {
    listWatch<T>(
      path,
      {
        onChange: (items) => {
          this.items = items;
          this.loaded = true;
          this.error = null;
          this.lastChange = performance.now();
        },
        onError: (err) => (this.error = err),
      },
      this.#abort.signal,
    );
  }

  get list(): T[] {
    return [...this.items.values()];
  }

  close() {
    this.#abort.abort();
  }
}

/** live opens a collection for the lifetime of the calling component (or $effect). */
export function live<T extends KObject>(path: string): Live<T> {
  const l = new Live<T>(path);
  $effect(() => () => l.close());
  return l;
}
