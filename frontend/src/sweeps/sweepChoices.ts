/** The New Sweep form's lists and messages. Pure: `views/sweepForm.ts` shows them. */

import type { Run } from "../api/types";
import { configSections, networkSection } from "../form/fields";
import type { FormProblem } from "./sweepBody";

/** Spec paths a sweep may name, for the path inputs' suggestions (sorted, each once). */
export function knownPaths(): string[] {
  const sections = [...configSections("ppo"), networkSection("mlp"), networkSection("lstm")];
  const paths = sections.flatMap((s) => s.fields.map((f) => [...s.path, f.name].join(".")));
  return [...new Set(paths)].sort();
}

/** The runs a sweep can start from: those of no sweep, and `from` (the run the page was
 * opened for) first whatever it is. */
export function baseRunChoices(runs: readonly Run[], from: Run | null): Run[] {
  const out = runs.filter((r) => !r.sweep_id || r.id === from?.id);
  if (from && !out.some((r) => r.id === from.id)) out.unshift(from);
  return out;
}

/** A base run as the picker names it. */
export function baseRunLabel(run: Run): string {
  return `${run.name || run.id} (${run.spec.env?.name ?? "?"})`;
}

/** The name a sweep gets from its base run when the user typed none. */
export function defaultSweepName(run: Run): string {
  return `${run.name || run.id}-sweep`;
}

/** One space row's problems in one line: "high: not a number; values: empty". */
export function rowMessage(problems: readonly FormProblem[], row: number): string {
  return problems
    .filter((p) => p.row === row)
    .map((p) => `${p.field}: ${p.message}`)
    .join("; ");
}

/** The metric names a run has logged, sorted: suggestions for the objective. */
export function metricNames(run: Run): string[] {
  return Object.keys(run.latest_metrics ?? {}).sort();
}
