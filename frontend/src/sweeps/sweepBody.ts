/**
 * The new-sweep form's state and the body of `POST /api/sweeps`, both ways (the form and
 * the JSON tab edit the same sweep). No DOM here.
 *
 * A search-space entry is edited as text: a spec path, a kind, and either a range's low and
 * high or a list of values. Values are typed like JSON without the outer brackets
 * (`[32, 32], [64, 64]`, `0.1, 0.3`, `"relu", "tanh"`); bare words are strings (`relu, tanh`).
 */

import type { ObjectiveMode, RunSpec, SpaceEntry, SweepCreate } from "../api/types";

export const SPACE_KINDS = ["log_uniform", "uniform", "int_uniform", "choice", "grid"] as const;
export type SpaceKind = (typeof SPACE_KINDS)[number];
export const RANGE_KINDS: readonly SpaceKind[] = ["log_uniform", "uniform", "int_uniform"];
export const METHODS = ["tpe", "random", "grid"] as const;
export type Method = (typeof METHODS)[number];
export const PRUNERS = ["off", "median", "asha"] as const;
export type PrunerChoice = (typeof PRUNERS)[number];

export interface SpaceRow {
  path: string;
  kind: SpaceKind;
  low: string;
  high: string;
  values: string;
}

export interface SweepFormState {
  name: string;
  method: Method;
  /** Empty: the server's default. */
  maxTrials: string;
  parallel: string;
  metric: string;
  mode: ObjectiveMode;
  pruner: PrunerChoice;
  /** A pruner given as an object with options (JSON tab), kept while its kind is picked. */
  prunerOptions: Record<string, unknown> | null;
  seed: number | null;
  space: SpaceRow[];
  spec: RunSpec;
}

/** The settings the form edits in plain inputs (read and written with `readValues` and
 * `writeValues`), in the order they are written. */
export const SETTING_KEYS = ["name", "method", "maxTrials", "parallel", "metric", "mode", "pruner"] as const;
export type SettingKey = (typeof SETTING_KEYS)[number];

/** The settings as their inputs hold them, typed: a select's value is one of its options;
 * any mode but "min" maximises. */
export function settingsOf(values: Record<SettingKey, string>): Pick<SweepFormState, SettingKey> {
  return {
    ...values,
    method: values.method as Method,
    mode: values.mode === "min" ? "min" : "max",
    pruner: values.pruner as PrunerChoice,
  };
}

/** A problem found before submitting: which row's which input, or a top-level field. */
export interface FormProblem {
  /** A space row's index, or null for a top-level field. */
  row: number | null;
  field: string;
  message: string;
}

export function emptyRow(): SpaceRow {
  return { path: "", kind: "log_uniform", low: "", high: "", values: "" };
}

/** The values typed in a choice or grid field. */
export function parseValues(text: string): unknown[] {
  const trimmed = text.trim();
  if (!trimmed) return [];
  try {
    return JSON.parse(`[${trimmed}]`) as unknown[];
  } catch {
    // not JSON: comma-separated, bare words being strings
  }
  return trimmed
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      try {
        return JSON.parse(part) as unknown;
      } catch {
        return part;
      }
    });
}

/** The text a list of values is edited as (`parseValues` reads it back). */
export function valuesText(values: readonly unknown[]): string {
  return values.map((v) => JSON.stringify(v)).join(", ");
}

function parseNumber(text: string, integer: boolean): number | string {
  const trimmed = text.trim();
  if (!trimmed) return "required";
  const value = Number(trimmed);
  if (!Number.isFinite(value)) return "must be a number";
  if (integer && !Number.isInteger(value)) return "must be an integer";
  return value;
}

/** One row as a space entry, or the problems of its inputs. */
export function rowToEntry(row: SpaceRow): { entry: SpaceEntry | null; problems: [string, string][] } {
  const problems: [string, string][] = [];
  if (!row.path.trim()) problems.push(["path", "name a spec path, e.g. config.ppo.learning_rate"]);
  if (RANGE_KINDS.includes(row.kind)) {
    const integer = row.kind === "int_uniform";
    const low = parseNumber(row.low, integer);
    const high = parseNumber(row.high, integer);
    if (typeof low === "string") problems.push(["low", low]);
    if (typeof high === "string") problems.push(["high", high]);
    if (problems.length) return { entry: null, problems };
    return { entry: { [row.kind]: [low, high] } as SpaceEntry, problems };
  }
  const values = parseValues(row.values);
  if (!values.length) problems.push(["values", "give one value or more, separated by commas"]);
  if (problems.length) return { entry: null, problems };
  return { entry: { [row.kind]: values } as SpaceEntry, problems };
}

/** The body the form describes, and what must be fixed before it can be sent. */
export function formToBody(state: SweepFormState): { body: SweepCreate; problems: FormProblem[] } {
  const problems: FormProblem[] = [];
  const space: Record<string, SpaceEntry> = {};
  state.space.forEach((row, index) => {
    const { entry, problems: rowProblems } = rowToEntry(row);
    rowProblems.forEach(([field, message]) => problems.push({ row: index, field, message }));
    const path = row.path.trim();
    if (entry && path in space)
      problems.push({ row: index, field: "path", message: `${path} is in the space twice` });
    if (entry) space[path] = entry;
  });
  if (!state.space.length) problems.push({ row: null, field: "space", message: "add a parameter to search" });
  const body: SweepCreate = { spec: state.spec, space, method: state.method };
  if (state.name.trim()) body.name = state.name.trim();
  for (const [field, text] of [
    ["max_trials", state.maxTrials],
    ["parallel", state.parallel],
  ] as const) {
    if (!text.trim()) continue;
    const value = parseNumber(text, true);
    if (typeof value === "string") problems.push({ row: null, field, message: value });
    else body[field] = value;
  }
  body.objective = { metric: state.metric.trim(), mode: state.mode };
  if (state.pruner !== "off")
    body.pruner =
      state.prunerOptions && state.prunerOptions.kind === state.pruner
        ? (state.prunerOptions as SweepCreate["pruner"])
        : { kind: state.pruner };
  if (state.seed !== null) body.seed = state.seed;
  return { body, problems };
}

/** The form's state for a body (the JSON tab's text, parsed); unknown kinds of a space
 * entry come back as an empty choice. */
export function bodyToForm(body: SweepCreate): SweepFormState {
  const rawPruner: unknown = body.pruner;
  const prunerKind =
    typeof rawPruner === "string" ? rawPruner : ((rawPruner as { kind?: string } | null)?.kind ?? "off");
  const pruner = (PRUNERS as readonly string[]).includes(prunerKind) ? (prunerKind as PrunerChoice) : "off";
  return {
    name: body.name ?? "",
    method: (METHODS as readonly string[]).includes(body.method ?? "") ? (body.method as Method) : "tpe",
    maxTrials: body.max_trials === null || body.max_trials === undefined ? "" : String(body.max_trials),
    parallel: body.parallel === undefined ? "" : String(body.parallel),
    metric: body.objective?.metric ?? "eval/episode_reward",
    mode: body.objective?.mode === "min" ? "min" : "max",
    pruner,
    prunerOptions:
      typeof rawPruner === "object" && rawPruner !== null ? (rawPruner as Record<string, unknown>) : null,
    seed: typeof body.seed === "number" ? body.seed : null,
    space: Object.entries(body.space ?? {}).map(([path, entry]) => entryToRow(path, entry)),
    spec: body.spec,
  };
}

export function entryToRow(path: string, entry: SpaceEntry): SpaceRow {
  const row = { ...emptyRow(), path };
  for (const kind of SPACE_KINDS) {
    const value = entry[kind];
    if (value === null || value === undefined) continue;
    if (RANGE_KINDS.includes(kind)) {
      const [low, high] = value as [number, number];
      return { ...row, kind, low: String(low), high: String(high) };
    }
    return { ...row, kind, values: valuesText(value as unknown[]) };
  }
  return { ...row, kind: "choice" };
}

/** A run's spec as a sweep's base: the run's own name and resume point are left out. A
 * spec stored before the server filled specs from the env's preset (no `preset` key)
 * trained with the library's defaults: its base says `"preset": false` so that the trials
 * do too. */
export function baseSpec(spec: RunSpec): RunSpec {
  const base: RunSpec & Record<string, unknown> = { ...spec };
  delete base.name;
  delete base.resume_from;
  if (!("preset" in spec)) base.preset = false;
  return base;
}
