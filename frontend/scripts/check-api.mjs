// Regenerates the server's OpenAPI document and fails when it differs from the committed
// snapshot (openapi.json), or when schema.d.ts is out of date with the snapshot.
// `node scripts/check-api.mjs --update` writes the fresh document instead.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const frontend = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const repo = resolve(frontend, "..");
const python =
  process.env.NNX_PPO_PYTHON ??
  (existsSync(join(repo, ".venv/bin/python")) ? join(repo, ".venv/bin/python") : "python3");
const snapshotPath = join(frontend, "openapi.json");
const schemaPath = join(frontend, "src/api/schema.d.ts");

const fresh = execFileSync(python, ["-m", "server.openapi"], {
  cwd: repo,
  encoding: "utf8",
  maxBuffer: 64 << 20,
});
const normalize = (text) => JSON.stringify(JSON.parse(text), null, 2) + "\n";

if (process.argv.includes("--update")) {
  writeFileSync(snapshotPath, normalize(fresh));
  execFileSync("npm", ["run", "--silent", "gen-api"], { cwd: frontend, stdio: "inherit" });
  console.log("openapi.json and src/api/schema.d.ts updated; now run `npm run build`.");
  process.exit(0);
}

let failed = false;
if (normalize(fresh) !== normalize(readFileSync(snapshotPath, "utf8"))) {
  const before = JSON.parse(readFileSync(snapshotPath, "utf8"));
  const after = JSON.parse(fresh);
  const paths = (doc) =>
    new Set(
      Object.entries(doc.paths ?? {}).flatMap(([p, ops]) =>
        Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`),
      ),
    );
  const [was, now] = [paths(before), paths(after)];
  const removed = [...was].filter((p) => !now.has(p));
  const added = [...now].filter((p) => !was.has(p));
  console.error("The server's OpenAPI document differs from frontend/openapi.json.");
  if (removed.length) console.error(`  operations removed: ${removed.join(", ")}`);
  if (added.length) console.error(`  operations added: ${added.join(", ")}`);
  console.error("  Run `npm run update-api`, then `npm run build` to see what the change breaks.");
  failed = true;
}

const tmp = mkdtempSync(join(tmpdir(), "nnx-ppo-api-"));
const regenerated = join(tmp, "schema.d.ts");
execFileSync(
  "npx",
  ["--no-install", "openapi-typescript", snapshotPath, "-o", regenerated, "--default-non-nullable", "false"],
  { cwd: frontend, stdio: "ignore" },
);
if (readFileSync(regenerated, "utf8") !== readFileSync(schemaPath, "utf8")) {
  console.error("src/api/schema.d.ts is out of date with openapi.json: run `npm run gen-api`.");
  failed = true;
}
if (failed) process.exit(1);
console.log("API snapshot up to date.");
