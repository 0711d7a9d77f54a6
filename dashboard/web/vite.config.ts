import { defineConfig } from "vite";
import { svelte } from "@sveltejs/vite-plugin-svelte";

// The page is served by the hub at /dashboard/ from the embedded ../dist (package dashboard).
export default defineConfig({
  base: "/dashboard/",
  plugins: [svelte()],
  build: {
    outDir: "../dist",
    emptyOutDir: true,
    // No inline scripts or styles anywhere: the hub's Content-Security-Policy allows only 'self'.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    cssCodeSplit: false,
    target: "es2022",
    reportCompressedSize: false,
    rolldownOptions: { checks: { pluginTimings: false } },
  },
});
