/**
 * One metric of one run, as the charts hold it: the downsampled history from
 * `GET /metrics` followed by the live points from the stream.
 *
 * Values are JS numbers with NaN and +-Infinity kept (never dropped: the plot marks them);
 * `null` means the server had no value.
 */

import { decodeNumber, decodeNumbers } from "../api/numbers";
import type { MetricsEvent, WireSeries } from "../api/types";

export interface Series {
  step: number[];
  /** Epoch seconds of each point (a bucket's last point's); null where unknown. */
  wall: (number | null)[];
  value: (number | null)[];
  /** Per point the min and max of the bucket it stands for (= value where not merged). */
  min: (number | null)[];
  max: (number | null)[];
}

export function emptySeries(): Series {
  return { step: [], wall: [], value: [], min: [], max: [] };
}

/** A series of `GET /metrics` (`wall_time` may be missing from an older server). */
export function seriesFromWire(wire: Omit<WireSeries, "wall_time"> & { wall_time?: number[] }): Series {
  return {
    step: [...wire.step],
    wall: wire.step.map((_, i) => wire.wall_time?.[i] ?? null),
    value: decodeNumbers(wire.value),
    min: decodeNumbers(wire.min),
    max: decodeNumbers(wire.max),
  };
}

export function lastStep(series: Series): number {
  return series.step.length ? (series.step[series.step.length - 1] as number) : -Infinity;
}

/**
 * Appends a live point when it is newer than the series' last step. A point at or before
 * the last step is already accounted for (the history covers it, or it is a replay), so it
 * is ignored. Returns whether the point was appended.
 */
export function appendPoint(
  series: Series,
  step: number,
  value: number | null,
  wallTime: number | null = null,
): boolean {
  if (step <= lastStep(series)) return false;
  series.step.push(step);
  series.wall.push(wallTime);
  series.value.push(value);
  series.min.push(value);
  series.max.push(value);
  return true;
}

/** Appends every value of a metrics event to its key's series (creating missing keys).
 * Returns the keys that changed. */
export function appendEvent(store: Map<string, Series>, event: MetricsEvent): string[] {
  const changed: string[] = [];
  for (const [key, wire] of Object.entries(event.values)) {
    let series = store.get(key);
    if (!series) {
      series = emptySeries();
      store.set(key, series);
    }
    if (appendPoint(series, event.step, decodeNumber(wire), event.wall_time)) changed.push(key);
  }
  return changed;
}

/** Drops the points after `step` (a rewind: the run trains those steps again). Returns
 * whether any was dropped. */
export function truncateAfter(series: Series, step: number): boolean {
  const keep = series.step.findIndex((s) => s > step);
  if (keep < 0) return false;
  for (const column of [series.step, series.wall, series.value, series.min, series.max]) {
    column.length = keep;
  }
  return true;
}

/** True where some bucket merged several points (its min or max differs from its value). */
export function isDownsampled(series: Series): boolean {
  return series.value.some((v, i) => !sameNumber(series.min[i], v) || !sameNumber(series.max[i], v));
}

function sameNumber(a: number | null | undefined, b: number | null | undefined): boolean {
  return a === b || (Number.isNaN(a) && Number.isNaN(b));
}

/** Where the points of non-finite value are (NaN, +Inf, -Inf), for markers. */
export interface NonFinitePoint {
  step: number;
  label: "NaN" | "+Inf" | "-Inf";
}

export function nonFinitePoints(series: Series): NonFinitePoint[] {
  const found: NonFinitePoint[] = [];
  series.value.forEach((v, i) => {
    if (v === null || Number.isFinite(v)) return;
    const label = Number.isNaN(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf";
    found.push({ step: series.step[i] as number, label });
  });
  return found;
}
