/** The order of a heatmap's rows (units): by index, by the time of each unit's peak, or by
 * its loading on the first principal component. Pure. */

export const UNIT_ORDERS = ["index", "peak", "pc1"] as const;
export type UnitOrder = (typeof UNIT_ORDERS)[number];

export const ORDER_LABELS: Record<UnitOrder, string> = {
  index: "Index",
  peak: "Peak time",
  pc1: "PC1 loading",
};

/** Per unit (`values` is `[units][points]`): the point of its largest finite value (the
 * first one on a tie), or Infinity for a unit with no finite value. */
export function peakPoints(values: readonly ArrayLike<number>[]): number[] {
  return values.map((row) => {
    let best = Infinity;
    let at = Infinity;
    for (let i = 0; i < row.length; i++) {
      const v = row[i] as number;
      if (Number.isFinite(v) && (at === Infinity || v > best)) {
        best = v;
        at = i;
      }
    }
    return at;
  });
}

/** Unit indices sorted by `keys` ascending, ties by index (a stable order). */
function sortedBy(keys: readonly number[]): number[] {
  return keys
    .map((key, unit) => [Number.isNaN(key) ? Infinity : key, unit] as const)
    .sort((a, b) => (a[0] === b[0] ? a[1] - b[1] : a[0] < b[0] ? -1 : 1))
    .map(([, unit]) => unit);
}

/** The units top to bottom. `pc1` puts the largest loading first; without loadings for
 * every unit it falls back to the index order. */
export function unitOrder(
  mode: UnitOrder,
  values: readonly ArrayLike<number>[],
  pc1?: readonly number[] | null,
): number[] {
  const units = values.length;
  if (mode === "peak") return sortedBy(peakPoints(values));
  if (mode === "pc1" && pc1 && pc1.length === units) return sortedBy(pc1.map((v) => -v));
  return Array.from({ length: units }, (_, i) => i);
}
