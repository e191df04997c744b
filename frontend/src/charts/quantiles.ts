/**
 * Percentile metrics (`eval/episode_reward_p0` … `_p100`) drawn as one chart: the median
 * as a line, and shaded bands between symmetric percentiles (p0–p100 light, p25–p75
 * darker), as W&B draws them.
 */

/** The chart id of a family of percentile keys: `eval/episode_reward_p*`. */
export const familyId = (base: string): string => `${base}_p*`;

export interface QuantileFamily {
  /** The metric without its suffix: `eval/episode_reward`. */
  base: string;
  /** Percentile → metric key, in increasing percentile. */
  members: [number, string][];
}

const PERCENTILE = /^(.+)_p(\d{1,3})$/;

/** Splits `keys` into percentile families (two percentiles of one base or more) and the
 * other keys, each list in the order of `keys`. */
export function quantileFamilies(keys: readonly string[]): { families: QuantileFamily[]; others: string[] } {
  const byBase = new Map<string, [number, string][]>();
  for (const key of keys) {
    const match = PERCENTILE.exec(key);
    const q = match ? Number(match[2]) : NaN;
    if (!match || q > 100) continue;
    const base = match[1] as string;
    byBase.set(base, [...(byBase.get(base) ?? []), [q, key]]);
  }
  const families: QuantileFamily[] = [];
  const grouped = new Set<string>();
  for (const [base, members] of byBase) {
    if (members.length < 2) continue;
    families.push({ base, members: [...members].sort((a, b) => a[0] - b[0]) });
    members.forEach(([, key]) => grouped.add(key));
  }
  return { families, others: keys.filter((key) => !grouped.has(key)) };
}

export interface QuantileBand {
  lower: string;
  upper: string;
  /** Fill opacity: the inner bands darker. */
  opacity: number;
  label: string;
}

/** The median's key (p50), and a band per symmetric pair of percentiles (p0 with p100,
 * p25 with p75, ...), outermost first, each inner one darker. */
export function quantileLayout(family: QuantileFamily): { median: string | null; bands: QuantileBand[] } {
  const at = new Map(family.members);
  const pairs = family.members
    .filter(([q]) => q < 50 && at.has(100 - q))
    .map(([q]) => q)
    .sort((a, b) => a - b);
  const bands = pairs.map((q, i): QuantileBand => ({
    lower: at.get(q) as string,
    upper: at.get(100 - q) as string,
    opacity: 0.15 + (0.2 * i) / Math.max(1, pairs.length - 1),
    label: `p${q}–p${100 - q}`,
  }));
  return { median: at.get(50) ?? null, bands };
}
