/** The steps a recording's heatmaps show: the whole episode, or a window `[t0, t1)` the
 * user zoomed into (typed, or shift-dragged across a heatmap). Pure: no DOM. */

export interface TimeWindow {
  t0: number;
  t1: number;
}

/** Steps a window spans at the least (a narrower drag is widened, inside the episode). */
export const MIN_SPAN = 2;

export function wholeEpisode(length: number): TimeWindow {
  return { t0: 0, t1: length };
}

export function isWhole(range: TimeWindow, length: number): boolean {
  return range.t0 === 0 && range.t1 === length;
}

/** The window typed as "from" and "to" (inclusive) steps, or what is wrong with them. */
export function parseWindow(from: string, to: string, length: number): TimeWindow | { error: string } {
  const first = Number(from.trim());
  const last = Number(to.trim());
  if (from.trim() === "" || to.trim() === "" || !Number.isInteger(first) || !Number.isInteger(last))
    return { error: "whole step numbers, please" };
  if (first < 0 || last > length - 1) return { error: `steps run from 0 to ${length - 1}` };
  if (last - first + 1 < MIN_SPAN) return { error: `"to" must be at least ${MIN_SPAN - 1} after "from"` };
  return { t0: first, t1: last + 1 };
}

/** The window between two steps a drag went from and to (either order), at least
 * `MIN_SPAN` steps wide and inside `[0, length)`. */
export function windowBetween(a: number, b: number, length: number): TimeWindow {
  let t0 = Math.max(0, Math.min(a, b));
  let t1 = Math.min(length, Math.max(a, b) + 1);
  const span = Math.min(MIN_SPAN, length);
  if (t1 - t0 < span) {
    t0 = Math.max(0, Math.min(t0, length - span));
    t1 = t0 + span;
  }
  return { t0, t1 };
}

/** The window as the page says it: "steps 120–239 of 1000" (inclusive). */
export function describeWindow(range: TimeWindow, length: number): string {
  return isWhole(range, length) ? `all ${length} steps` : `steps ${range.t0}–${range.t1 - 1} of ${length}`;
}
