/** Paths in a run spec: reading, writing, and mapping a 422 error's `loc` to a form field. */

export function getPath(source: unknown, path: readonly string[]): unknown {
  let node: unknown = source;
  for (const key of path) {
    if (typeof node !== "object" || node === null) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

export function setPath(target: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let node = target;
  path.slice(0, -1).forEach((key) => {
    const next = node[key];
    if (typeof next !== "object" || next === null || Array.isArray(next)) node[key] = {};
    node = node[key] as Record<string, unknown>;
  });
  node[path[path.length - 1] as string] = value;
}

export function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** A FastAPI `loc` (`["body", "config", "ppo", "n_envs"]`) as a dotted spec path. */
export function locToPath(loc: readonly (string | number)[]): string {
  const parts = loc[0] === "body" ? loc.slice(1) : loc;
  return parts.map(String).join(".");
}

/**
 * The form target that shows an error at `path`: the field or section with the longest
 * path that is `path` itself or one of its ancestors ("" = the whole form when none is).
 * `config.ppo.n_envs` goes to its field; `network` to the network section; `env.overrides.x`
 * to the overrides field.
 */
export function errorTarget(path: string, targets: readonly string[]): string {
  let best = "";
  for (const target of targets) {
    const matches = path === target || path.startsWith(`${target}.`);
    if (matches && target.length > best.length) best = target;
  }
  return best;
}
