/** The New Run form's values to a run spec and back. Pure: the view reads its inputs into
 * a `RunFormInput`, builds the spec here, and marks the problems at their paths. */

import type { CheckpointRef, EnvPreset, RunKind, RunSpec } from "../api/types";
import type { GraphParse } from "../network/graphJson";
import type { FieldDef } from "./fields";
import { formSpec, type FormValue } from "./presetFill";
import type { ServerProblem } from "./serverProblems";

/** The form's free-text fields as typed. */
export interface RunTextFields {
  name: string;
  /** Comma-separated. */
  tags: string;
  notes: string;
  /** A JSON object, or blank. */
  overrides: string;
}

/** One section field as its control read it. */
export interface ControlValue {
  path: string;
  def: FieldDef;
  result: { ok: true; value: unknown } | { ok: false; message: string };
}

export interface RunFormInput {
  kind: RunKind;
  env: string;
  text: RunTextFields;
  network: string;
  /** The graph editor's network (network kind "graph" only). */
  graph?: GraphParse;
  /** A plugin network's keyword arguments as typed: a JSON object, or blank (kind
   * "plugin:<name>" only). */
  pluginKwargs?: string;
  /** The value at `randomizePath` (`env.randomize`). */
  randomize: boolean;
  randomizePath: string;
  controls: readonly ControlValue[];
  teacher: CheckpointRef | null;
  resume: CheckpointRef | null;
  /** The env's preset the server would fill left-out fields from, or null (none, or the
   * spec says `"preset": false`). */
  preset: EnvPreset | null;
}

export const OVERRIDES_PATH = "env.overrides";
export const PLUGIN_KWARGS_PATH = "network.kwargs";
const PLUGIN_KWARGS_PROBLEM = 'must be a JSON object of the factory\'s arguments, e.g. {"hidden": 64}';

/** Whether a network kind names an installed plugin network ("plugin:<name>"). */
export function isPluginKind(kind: string | undefined): kind is string {
  return kind !== undefined && /^plugin:./.test(kind);
}

/** The network kind the form shows for a spec's `kind`: a built-in one other than mlp, or
 * a plugin's, as it is; anything else (none, unknown) as mlp. */
export function networkKindOf(kind: string | undefined): string {
  return isPluginKind(kind) || kind === "lstm" || kind === "graph" ? kind : "mlp";
}

/** The installed plugin networks of GET /api/networks as the kind select offers them:
 * "plugin:tiny (tiny_pkg)", its package named. The built-in kinds are in the select already. */
export function pluginNetworkChoices(
  items: readonly { kind: string; source: string }[],
): { kind: string; label: string }[] {
  return items
    .filter((item) => isPluginKind(item.kind))
    .map((item) => ({ kind: item.kind, label: `${item.kind} (${item.source.slice("plugin:".length)})` }));
}

/** A plugin network's keyword arguments as the form shows them (blank when none). */
export function pluginKwargsText(network: { kwargs?: unknown } | undefined): string {
  const kwargs = network?.kwargs;
  return kwargs && typeof kwargs === "object" && Object.keys(kwargs).length ? JSON.stringify(kwargs) : "";
}
const OVERRIDES_PROBLEM = 'must be a JSON object, e.g. {"impl": "jax"}';

/** The tags typed as "a, b,, c" -> ["a", "b", "c"]. */
export function parseTags(text: string): string[] {
  return text
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean);
}

/** The overrides text as an object; undefined when blank; null when it is not a JSON object. */
export function parseOverrides(text: string): Record<string, unknown> | undefined | null {
  const trimmed = text.trim();
  if (!trimmed) return undefined;
  try {
    const parsed: unknown = JSON.parse(trimmed);
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

/** The spec the form describes, and the problems (by spec path) that keep it from being
 * sent. Fields the server would fill with the same value (from the preset, else the
 * library's defaults) are left out (see `formSpec`). */
export function buildRunSpec(input: RunFormInput): { spec: RunSpec; problems: ServerProblem[] } {
  const problems: ServerProblem[] = [];
  const spec: RunSpec & Record<string, unknown> = { kind: input.kind, env: { name: input.env } };
  const name = input.text.name.trim();
  if (name) spec.name = name;
  const tags = parseTags(input.text.tags);
  if (tags.length) spec.tags = tags;
  if (input.text.notes.trim()) spec.notes = input.text.notes;
  const overrides = parseOverrides(input.text.overrides);
  if (overrides === null) problems.push({ path: OVERRIDES_PATH, message: OVERRIDES_PROBLEM });
  else if (overrides) spec.env.overrides = overrides;
  const networkKind = networkKindOf(input.network);
  spec.network = { kind: networkKind };
  if (networkKind === "graph") {
    if (input.graph?.ok) spec.network = input.graph.network;
    else problems.push({ path: "network", message: input.graph?.message ?? "the graph is missing" });
  } else if (isPluginKind(networkKind)) {
    const kwargs = parseOverrides(input.pluginKwargs ?? "");
    if (kwargs === null) problems.push({ path: PLUGIN_KWARGS_PATH, message: PLUGIN_KWARGS_PROBLEM });
    else if (kwargs) spec.network = { kind: networkKind, kwargs };
  }
  spec.config = {};
  const values: FormValue[] = [{ path: input.randomizePath, value: input.randomize, libraryDefault: false }];
  for (const control of input.controls) {
    if (control.result.ok)
      values.push({ path: control.path, value: control.result.value, libraryDefault: control.def.default });
    else problems.push({ path: control.path, message: control.result.message });
  }
  if (input.kind === "distillation") {
    if (input.teacher) spec.teacher = input.teacher;
    else problems.push({ path: "teacher", message: "pick the teacher run" });
  }
  if (input.resume) spec.resume_from = input.resume;
  return { spec: formSpec(spec, values, input.preset), problems };
}

/** The free-text fields that show `spec`. */
export function textFields(spec: Partial<RunSpec>): RunTextFields {
  const overrides = spec.env?.overrides;
  return {
    name: spec.name ?? "",
    tags: (spec.tags ?? []).join(", "),
    notes: spec.notes ?? "",
    overrides: overrides && Object.keys(overrides).length ? JSON.stringify(overrides) : "",
  };
}

/** What a field shows for the spec's `value` at its path: the default when the spec leaves
 * it out, or sets null where null is not a value of the field. */
export function fieldValue(def: FieldDef, value: unknown): unknown {
  const optional =
    def.kind === "optionalFloat" || def.kind === "optionalInt" || def.kind === "optionalNumberList";
  return value === undefined || (value === null && !optional) ? def.default : value;
}
