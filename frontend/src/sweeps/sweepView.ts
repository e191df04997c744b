/** What a sweep's page and the sweeps list show, worked out from the sweep: its columns,
 * axes, objective chart and texts. Pure: `views/sweepPage.ts` and `views/sweepsList.ts` draw
 * them. */

import { formatNumber } from "../api/numbers";
import type { ObjectiveMode, SpaceEntry, SweepDetail, Trial } from "../api/types";
import type { ChartInput } from "../charts/lineChart";
import { plural } from "../views/liveState";
import { axisOfEntry, categoryLabel, objectiveAxis, type Axis } from "./parallelAxes";
import { objectiveSeries, sameKey, stableJson, type SortKey, type SortState } from "./trials";

/** How many of a sweep's trials have ended (pruned ones included). */
export function trialsDone(sweep: { trial_counts: Record<string, number> }): number {
  return ["succeeded", "failed", "cancelled", "pruned"].reduce((n, s) => n + (sweep.trial_counts[s] ?? 0), 0);
}

/** A parameter's value in a table cell. */
export function paramText(value: unknown): string {
  if (typeof value === "number") return formatNumber(value);
  if (value === undefined) return "–";
  return categoryLabel(stableJson(value));
}

/** The sweep's search space by spec path, as its request names it. */
export function searchSpace(sweep: Pick<SweepDetail, "request"> | null): Record<string, SpaceEntry> {
  return ((sweep?.request as { space?: Record<string, SpaceEntry> } | undefined)?.space ?? {}) as Record<
    string,
    SpaceEntry
  >;
}

export function objectiveMode(sweep: Pick<SweepDetail, "objective"> | null): ObjectiveMode {
  return sweep?.objective.mode === "min" ? "min" : "max";
}

export function objectiveMetric(sweep: Pick<SweepDetail, "objective"> | null): string {
  return sweep?.objective.metric ?? "objective";
}

export interface TrialColumn {
  label: string;
  key: SortKey;
  title?: string;
}

/** The trial table's columns: the trial, one per swept path (its last part), the status and
 * the objective (named after the metric). */
export function trialColumns(paths: readonly string[], metric: string): TrialColumn[] {
  return [
    { label: "Trial", key: { kind: "trial" } },
    ...paths.map((path) => ({
      label: path.split(".").pop() ?? path,
      key: { kind: "param", path } as SortKey,
      title: path,
    })),
    { label: "Status", key: { kind: "status" } },
    { label: metric, key: { kind: "objective" } },
  ];
}

/** A column header's sort mark: its `aria-sort` and the arrow shown. */
export function sortMark(sort: SortState, key: SortKey): { ariaSort: string; arrow: string } {
  if (!sameKey(key, sort.key)) return { ariaSort: "none", arrow: "" };
  return sort.descending ? { ariaSort: "descending", arrow: " ▼" } : { ariaSort: "ascending", arrow: " ▲" };
}

/** The parallel plot's axes: one per swept path, then the objective. */
export function sweepAxes(sweep: SweepDetail): Axis[] {
  return [
    ...Object.entries(searchSpace(sweep)).map(([path, entry]) => axisOfEntry(path, entry)),
    objectiveAxis(
      objectiveMetric(sweep),
      sweep.trials.map((t) => t.objective),
    ),
  ];
}

/** The objective by trial number with the running best, in `colors[0]` and `colors[1]`. */
export function objectiveChart(
  trials: readonly Trial[],
  mode: ObjectiveMode,
  metric: string,
  colors: readonly string[],
): ChartInput {
  const series = objectiveSeries(trials, mode);
  return {
    x: series.x,
    lines: [
      { label: metric, color: colors[0] as string, values: series.objective, points: true },
      { label: "best so far", color: colors[1] as string, values: series.best },
    ],
    markers: [],
    xAxis: "step",
    logScale: false,
    integerX: true,
  };
}

/** The "Best N" box's text as a count from 1 to 20. */
export function bestCountOf(text: string): number {
  return Math.max(1, Math.min(20, Math.round(Number(text) || 1)));
}

/** The note beside "Clear brushes": how many trials the brushes keep (blank without any). */
export function brushNote(shown: number, all: number, brushes: number): string {
  return brushes ? `${shown} of ${all} trials` : "";
}

/** The trial table's line when it shows no trial. */
export function noTrialsText(trials: number): string {
  return trials ? "No trial in the brushed ranges." : "No trials yet.";
}

/** The confirmation deleting a sweep asks. */
export function deleteSweepText(trials: number): string {
  return `The sweep and its ${plural(trials, "trial run")} (metrics, checkpoints, videos) are deleted for good.`;
}

/** The sweeps list's order: newest first. */
export function newestFirst<T extends { created_at: number }>(sweeps: Iterable<T>): T[] {
  return [...sweeps].sort((a, b) => b.created_at - a.created_at);
}
