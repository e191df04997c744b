/**
 * The axes of the parallel-coordinates plot and its brushes, without the DOM. Each axis maps
 * a value to a unit position in [0, 1] (0 at the bottom): linearly for `uniform` and
 * `int_uniform` ranges and the objective, in log space for `log_uniform`, and to evenly
 * spaced slots for `choice` and `grid` values (categorical). A brush is a unit range on one
 * axis; a trial passes the brushes when its value on every brushed axis lies in its range.
 */

import type { SpaceEntry, Trial } from "../api/types";
import { formatNumber } from "../api/numbers";
import { stableJson } from "./trials";

export type AxisKind = "linear" | "log" | "categorical";

export interface Axis {
  /** A parameter's spec path, or `OBJECTIVE`. */
  key: string;
  label: string;
  kind: AxisKind;
  /** linear/log: [low, high]; categorical: unused ([0, 1]). */
  domain: [number, number];
  /** categorical: each value's JSON text, bottom to top. */
  categories: string[];
}

export interface Tick {
  at: number;
  label: string;
}

/** A brushed unit range, `low <= high`. */
export interface Brush {
  low: number;
  high: number;
}

export const OBJECTIVE = "\u0000objective";

/** The axis of a space entry (its kind and bounds come from the sweep's request). */
export function axisOfEntry(path: string, entry: SpaceEntry): Axis {
  const base = { key: path, label: shortLabel(path), categories: [] as string[] };
  if (entry.log_uniform)
    return { ...base, kind: "log", domain: [entry.log_uniform[0], entry.log_uniform[1]] };
  if (entry.uniform) return { ...base, kind: "linear", domain: [entry.uniform[0], entry.uniform[1]] };
  if (entry.int_uniform)
    return { ...base, kind: "linear", domain: [entry.int_uniform[0], entry.int_uniform[1]] };
  const values = entry.choice ?? entry.grid ?? [];
  return { ...base, kind: "categorical", domain: [0, 1], categories: values.map(stableJson) };
}

/** The objective's axis: linear over the trials' objectives (a unit-wide span around a
 * single value, [0, 1] without any). */
export function objectiveAxis(label: string, values: readonly (number | null)[]): Axis {
  const finite = values.filter((v): v is number => v !== null && Number.isFinite(v));
  let low = finite.length ? Math.min(...finite) : 0;
  let high = finite.length ? Math.max(...finite) : 1;
  if (low === high) {
    low -= 0.5;
    high += 0.5;
  }
  return { key: OBJECTIVE, label, kind: "linear", domain: [low, high], categories: [] };
}

/** `config.ppo.learning_rate` → `learning_rate`; the full path stays in the axis title. */
export function shortLabel(path: string): string {
  return path.split(".").pop() ?? path;
}

/** The value's unit position on the axis, or null when it has none (missing, not
 * positive on a log axis, not one of the categories). Values outside the domain are
 * clamped to its ends. */
export function toUnit(axis: Axis, value: unknown): number | null {
  if (axis.kind === "categorical") {
    const index = axis.categories.indexOf(stableJson(value));
    if (index < 0) return null;
    return axis.categories.length === 1 ? 0.5 : index / (axis.categories.length - 1);
  }
  if (typeof value !== "number" || !Number.isFinite(value)) return null;
  const [low, high] = axis.domain;
  let unit: number;
  if (axis.kind === "log") {
    if (value <= 0 || low <= 0) return null;
    unit = (Math.log(value) - Math.log(low)) / (Math.log(high) - Math.log(low));
  } else {
    unit = (value - low) / (high - low);
  }
  return Math.min(1, Math.max(0, unit));
}

/** The labelled positions along an axis: every category; a log axis's ends and the powers
 * of ten between them; a linear axis's ends and middle. */
export function ticks(axis: Axis): Tick[] {
  if (axis.kind === "categorical") {
    return axis.categories.map((text, i) => ({
      at: axis.categories.length === 1 ? 0.5 : i / (axis.categories.length - 1),
      label: categoryLabel(text),
    }));
  }
  const [low, high] = axis.domain;
  if (axis.kind === "log") {
    const out: Tick[] = [{ at: 0, label: formatNumber(low) }];
    for (let e = Math.ceil(Math.log10(low)); 10 ** e < high; e++) {
      const at = toUnit(axis, 10 ** e) as number;
      if (at > 0.08 && at < 0.92) out.push({ at, label: `1e${e}` });
    }
    out.push({ at: 1, label: formatNumber(high) });
    return out;
  }
  return [0, 0.5, 1].map((at) => ({ at, label: formatNumber(low + at * (high - low)) }));
}

/** A category's JSON text as a label: `[64,64]` → `64,64`, `"relu"` → `relu`. */
export function categoryLabel(text: string): string {
  if (text.startsWith("[") && text.endsWith("]")) return text.slice(1, -1);
  if (text.startsWith('"') && text.endsWith('"')) return text.slice(1, -1);
  return text;
}

/** The value of a trial on an axis. */
export function trialValue(axis: Axis, trial: Trial): unknown {
  return axis.key === OBJECTIVE ? trial.objective : trial.params[axis.key];
}

/** A brush from a drag between two unit positions (either order), clamped to [0, 1]. */
export function brushBetween(a: number, b: number): Brush {
  const clamp = (v: number) => Math.min(1, Math.max(0, v));
  return { low: clamp(Math.min(a, b)), high: clamp(Math.max(a, b)) };
}

/** The trials whose value on every brushed axis lies in its brush (a trial without a
 * value there does not). Without brushes, all of them. */
export function filterByBrushes(
  trials: readonly Trial[],
  axes: readonly Axis[],
  brushes: ReadonlyMap<string, Brush>,
): Trial[] {
  const active = axes.filter((axis) => brushes.has(axis.key));
  return trials.filter((trial) =>
    active.every((axis) => {
      const brush = brushes.get(axis.key) as Brush;
      const unit = toUnit(axis, trialValue(axis, trial));
      // A small tolerance, so that a brush dragged exactly to a category's slot keeps it.
      return unit !== null && unit >= brush.low - 1e-9 && unit <= brush.high + 1e-9;
    }),
  );
}
