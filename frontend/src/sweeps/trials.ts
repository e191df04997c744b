/**
 * A sweep's trials as the sweep page shows them: sorted by a column, the running best
 * objective, and the best N trials (for the compare view). Pure functions, no DOM.
 */

import type { ObjectiveMode, Trial } from "../api/types";

/** A column of the trial table: the trial number, its status, its objective, or a parameter. */
export type SortKey =
  { kind: "trial" } | { kind: "status" } | { kind: "objective" } | { kind: "param"; path: string };

export interface SortState {
  key: SortKey;
  descending: boolean;
}

export function sameKey(a: SortKey, b: SortKey): boolean {
  return a.kind === b.kind && (a.kind !== "param" || a.path === (b as { path: string }).path);
}

/** Clicking a column header: a new column sorts ascending (the objective: best first),
 * the same column again flips the order. */
export function nextSort(current: SortState, key: SortKey, mode: ObjectiveMode): SortState {
  if (sameKey(current.key, key)) return { key, descending: !current.descending };
  return { key, descending: key.kind === "objective" ? mode === "max" : false };
}

/** JSON with object keys sorted, so that equal values have one text (as the server's
 * `encode_choice`). */
export function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** Orders two cell values: numbers numerically, lists element by element, others by
 * their JSON text; missing values (null, undefined, NaN) compare equal among themselves. */
export function compareValues(a: unknown, b: unknown): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const c = compareValues(a[i], b[i]);
      if (c !== 0) return c;
    }
    return a.length - b.length;
  }
  const x = stableJson(a);
  const y = stableJson(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

function isMissing(value: unknown): boolean {
  return value === null || value === undefined || (typeof value === "number" && Number.isNaN(value));
}

function cellValue(trial: Trial, key: SortKey): unknown {
  switch (key.kind) {
    case "trial":
      return trial.trial;
    case "status":
      return trial.status;
    case "objective":
      return trial.objective;
    case "param":
      return trial.params[key.path];
  }
}

/** The trials sorted by a column; missing values last in either order, ties by trial
 * number. Returns a new array. */
export function sortTrials(trials: readonly Trial[], sort: SortState): Trial[] {
  const sign = sort.descending ? -1 : 1;
  return [...trials].sort((a, b) => {
    const x = cellValue(a, sort.key);
    const y = cellValue(b, sort.key);
    const mx = isMissing(x);
    const my = isMissing(y);
    if (mx || my) return mx === my ? a.trial - b.trial : mx ? 1 : -1;
    return sign * compareValues(x, y) || a.trial - b.trial;
  });
}

/** After each point (in the order given), the best objective so far of the points that
 * count (`counts`: finished trials); null until one does. */
export function runningBest(
  points: readonly { objective: number | null; counts: boolean }[],
  mode: ObjectiveMode,
): (number | null)[] {
  let best: number | null = null;
  return points.map((point) => {
    const value = point.objective;
    if (point.counts && value !== null && Number.isFinite(value)) {
      if (best === null || (mode === "max" ? value > best : value < best)) best = value;
    }
    return best;
  });
}

/** The `n` best succeeded trials with an objective, best first (ties: lower trial first). */
export function bestTrials(trials: readonly Trial[], mode: ObjectiveMode, n: number): Trial[] {
  const done = trials.filter(
    (t) => t.status === "succeeded" && t.objective !== null && Number.isFinite(t.objective),
  );
  const sign = mode === "max" ? -1 : 1;
  done.sort((a, b) => sign * ((a.objective as number) - (b.objective as number)) || a.trial - b.trial);
  return done.slice(0, Math.max(0, n));
}

/** The objective chart's data: x = trial numbers of the trials with an objective that have
 * ended (succeeded or pruned), the objective, and the running best of the succeeded ones. */
export function objectiveSeries(
  trials: readonly Trial[],
  mode: ObjectiveMode,
): { x: number[]; objective: (number | null)[]; best: (number | null)[] } {
  const ended = [...trials]
    .filter((t) => (t.status === "succeeded" || t.status === "pruned") && t.objective !== null)
    .sort((a, b) => a.trial - b.trial);
  const best = runningBest(
    ended.map((t) => ({ objective: t.objective, counts: t.status === "succeeded" })),
    mode,
  );
  return { x: ended.map((t) => t.trial), objective: ended.map((t) => t.objective), best };
}
