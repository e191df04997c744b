/**
 * Exponential moving average with bias correction (as TensorBoard's smoothing slider):
 * s_n = w * s_{n-1} + (1 - w) * v_n from s_0 = 0, shown as s_n / (1 - w^k) where k counts
 * the finite values so far, so that the first points are not pulled towards zero.
 *
 * A non-finite value (NaN, +-Inf) or a missing one (null) is passed through unchanged at its
 * own position and does not enter the average, so one NaN neither hides nor poisons the rest.
 */
export function smoothEma(values: readonly (number | null)[], weight: number): (number | null)[] {
  if (!(weight > 0)) return [...values];
  const w = Math.min(weight, 0.999);
  let accumulator = 0;
  let count = 0;
  return values.map((v) => {
    if (v === null || !Number.isFinite(v)) return v;
    accumulator = w * accumulator + (1 - w) * v;
    count += 1;
    return accumulator / (1 - w ** count);
  });
}
