/**
 * Turns a Series into the arrays a chart draws, given the view settings (x axis, smoothing,
 * log scale). Non-finite values become gaps in the line plus a marker at their x, so a NaN
 * is always visible; on a log scale, values <= 0 become gaps and are counted.
 */

import { isDownsampled, type Series } from "./series";
import { smoothEma } from "./smoothing";
import type { WallClock } from "./wallClock";

export type XAxis = "step" | "wall";

export interface ViewSettings {
  xAxis: XAxis;
  /** EMA weight in [0, 1); 0 is no smoothing. */
  smoothing: number;
  logScale: boolean;
}

export interface Marker {
  x: number;
  label: "NaN" | "+Inf" | "-Inf";
}

export interface PlotData {
  x: number[];
  /** The line: smoothed when smoothing > 0. */
  line: (number | null)[];
  /** The raw values drawn faintly behind a smoothed line; null without smoothing. */
  raw: (number | null)[] | null;
  /** The min/max band where the series is downsampled; null otherwise. */
  band: { min: (number | null)[]; max: (number | null)[] } | null;
  markers: Marker[];
  /** Points hidden because a log scale cannot show values <= 0. */
  hiddenNonPositive: number;
  /** Points without a known wall time (wall-time axis only), left out. */
  withoutTime: number;
}

/** The x of each point: its env step, or seconds since `t0` on the wall-time axis (the
 * point's own wall time, else the clock's estimate at its step). */
function xValues(series: Series, xAxis: XAxis, clock: WallClock | null, t0: number): (number | null)[] {
  if (xAxis === "step") return series.step;
  return series.step.map((step, i) => {
    const time = series.wall[i] ?? clock?.at(step) ?? null;
    return time === null ? null : time - t0;
  });
}

/** The earliest known wall time of `series` (epoch seconds), or null. */
export function firstWallTime(series: Iterable<Series>): number | null {
  let first: number | null = null;
  for (const s of series) {
    const t = s.wall.find((w): w is number => w !== null);
    if (t !== undefined && (first === null || t < first)) first = t;
  }
  return first;
}

function markerLabel(v: number): Marker["label"] {
  return Number.isNaN(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf";
}

export function toPlotData(
  series: Series,
  settings: ViewSettings,
  clock: WallClock | null = null,
  t0 = clock?.start ?? firstWallTime([series]) ?? 0,
): PlotData {
  const xs = xValues(series, settings.xAxis, clock, t0);
  const keep = xs.map((x) => x !== null);
  const pick = <T>(values: readonly T[]): T[] => values.filter((_, i) => keep[i]);
  const x = pick(xs) as number[];
  const values = pick(series.value);

  const drawable = (v: number | null): number | null => {
    if (v === null || !Number.isFinite(v)) return null;
    return settings.logScale && v <= 0 ? null : v;
  };
  const markers: Marker[] = [];
  values.forEach((v, i) => {
    if (v !== null && !Number.isFinite(v)) markers.push({ x: x[i] as number, label: markerLabel(v) });
  });
  const hiddenNonPositive = settings.logScale
    ? values.filter((v) => v !== null && Number.isFinite(v) && v <= 0).length
    : 0;
  const line = smoothEma(values, settings.smoothing).map(drawable);
  const raw = settings.smoothing > 0 ? values.map(drawable) : null;
  const band = isDownsampled(series)
    ? { min: pick(series.min).map(drawable), max: pick(series.max).map(drawable) }
    : null;
  return { x, line, raw, band, markers, hiddenNonPositive, withoutTime: xs.length - x.length };
}

/**
 * Puts several (x, y) series on one shared x (the sorted union of their x values), as
 * uPlot wants for overlaid lines. A series has `undefined` where it has no point at an x
 * (the line is drawn across), and keeps its own `null` gaps.
 */
export function alignSeries(series: readonly { x: readonly number[]; y: readonly (number | null)[] }[]): {
  x: number[];
  ys: (number | null | undefined)[][];
} {
  const x = [...new Set(series.flatMap((s) => s.x))].sort((a, b) => a - b);
  const index = new Map(x.map((value, i) => [value, i]));
  const ys = series.map((s) => {
    const y: (number | null | undefined)[] = new Array(x.length).fill(undefined);
    s.x.forEach((value, i) => {
      y[index.get(value) as number] = s.y[i] ?? null;
    });
    return y;
  });
  return { x, ys };
}
