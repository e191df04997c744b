import { defineConfig } from "vitest/config";

// The API serves dist/ from the same origin; `npm run dev` proxies /api to a running
// `nnx-ppo serve` (NNX_PPO_API_URL, default http://127.0.0.1:8000).
const apiUrl = process.env.NNX_PPO_API_URL ?? "http://127.0.0.1:8000";

export default defineConfig({
  build: { outDir: "dist", emptyOutDir: true, sourcemap: true, chunkSizeWarningLimit: 200 },
  server: { proxy: { "/api": { target: apiUrl, ws: true, changeOrigin: false } } },
  test: { include: ["tests/**/*.test.ts"], environment: "node" },
});
