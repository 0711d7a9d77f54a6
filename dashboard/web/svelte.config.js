import { vitePreprocess } from "@sveltejs/vite-plugin-svelte";

export default {
  preprocess: vitePreprocess(),
  compilerOptions: {
    // Pages read their props once on purpose: the router re-creates a page (keyed) when its project or shoot changes.
    warningFilter: (w) => w.code !== "state_referenced_locally",
  },
};
