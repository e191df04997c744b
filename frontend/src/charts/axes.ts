/**
 * Axis arithmetic of the charts, kept pure for tests: the wall-time axis (one format, ticks
 * at whole seconds, minutes or hours, measured from the run's start), and the width of a
 * y axis that fits its widest tick label.
 */

import { formatDuration } from "../dom";
import { formatNumber } from "../api/numbers";

/** Tick spacings of the wall-time axis, in seconds: whole seconds up to whole hours, so
 * that every tick reads as `m:ss` (or `h:mm:ss`) without a fraction. */
export const WALL_INCREMENTS = [
  1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
];

/** A wall-time value (seconds since the run started) in the axis's one format. */
export function formatWallTime(seconds: number): string {
  return formatDuration(seconds);
}

export function formatX(xAxis: "step" | "wall", value: number): string {
  return xAxis === "wall" ? formatWallTime(value) : formatNumber(value);
}

/** Where the wall-time axis starts (epoch seconds): the run's start when it is known (so
 * the compile before the first metric shows), or the earliest wall time known when that is
 * earlier (a requeued run starts again after its first attempt's metrics). */
export function wallOrigin(startedAt: number | null | undefined, ...known: (number | null)[]): number {
  const times = [startedAt ?? null, ...known].filter((t): t is number => t !== null && Number.isFinite(t));
  return times.length ? Math.min(...times) : 0;
}

/** uPlot's tick length and its gap between tick and label (its defaults), in CSS px. */
const TICK_AND_GAP = 10 + 5;
/** Room left of the widest label, so that it is never flush with the chart's edge. */
const MARGIN = 6;
const MIN_SIZE = 36;

/** The width (CSS px) of a y axis whose tick labels are `labels`, given a function that
 * measures a label's width: the widest label, the tick, the gap and a margin. */
export function yAxisSize(labels: readonly string[], measure: (label: string) => number): number {
  const widest = labels.reduce((w, label) => Math.max(w, measure(label)), 0);
  return Math.max(MIN_SIZE, Math.ceil(widest + TICK_AND_GAP + MARGIN));
}
