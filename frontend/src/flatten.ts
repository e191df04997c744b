/** Nested JSON as flat `a.b.c → value` rows (config tables, config differences). */

export function flatten(value: unknown, prefix = "", out = new Map<string, string>()): Map<string, string> {
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const entries = Object.entries(value as Record<string, unknown>);
    if (!entries.length && prefix) out.set(prefix, "{}");
    for (const [key, child] of entries) flatten(child, prefix ? `${prefix}.${key}` : key, out);
  } else if (prefix) {
    out.set(prefix, value === undefined ? "" : JSON.stringify(value));
  }
  return out;
}

/** The keys whose values differ between the flattened objects (a key missing in one
 * of them counts as different), sorted. */
export function differingKeys(flats: readonly Map<string, string>[]): string[] {
  const keys = new Set(flats.flatMap((f) => [...f.keys()]));
  return [...keys].filter((key) => new Set(flats.map((f) => f.get(key))).size > 1).sort();
}
