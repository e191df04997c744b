/** Metric keys grouped by their prefix (`losses/actor` → `losses`), in a stable order. */

const ORDER = ["eval", "losses", "rollout", "throughput"];

export function metricGroup(key: string): string {
  const slash = key.indexOf("/");
  return slash > 0 ? key.slice(0, slash) : "other";
}

export function groupKeys(keys: Iterable<string>): [string, string[]][] {
  const groups = new Map<string, string[]>();
  for (const key of keys) {
    const group = metricGroup(key);
    groups.set(group, [...(groups.get(group) ?? []), key]);
  }
  const rank = (g: string) => (ORDER.includes(g) ? ORDER.indexOf(g) : g === "other" ? 1000 : 100);
  return [...groups.entries()]
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b))
    .map(([group, members]) => [group, members.sort()]);
}
