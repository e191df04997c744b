/**
 * Filling the New Run form from the picked env's preset (GET /api/envs/{name}/preset).
 *
 * A pick starts a fetch; the preset is applied when it arrives unless the user edited the
 * form in the meantime (their edits win) or picked another env (only the latest pick
 * counts). `fill` applies the current env's preset whatever was edited (the button).
 */

import { ApiError } from "../api/http";
import type { EnvPreset, RunSpec } from "../api/types";
import { getPath, sameJson, setPath } from "./specPaths";

/** `none`: the env has no preset (a plugin env: 404); `failed`: it could not be fetched. */
export type FillOutcome = "filled" | "edited" | "superseded" | "none" | "failed";

/** The spec the form shows after filling from `preset`: the preset's env, network and
 * config; the run's own name, tags and notes kept; a PPO run (presets train with PPO), not
 * resuming anything. */
export function specFromPreset(
  preset: EnvPreset,
  keep: Pick<Partial<RunSpec>, "name" | "tags" | "notes"> = {},
): RunSpec {
  const spec = preset.spec as Pick<RunSpec, "env" | "network" | "config">;
  const out: RunSpec = { kind: "ppo", env: spec.env, network: spec.network, config: spec.config };
  if (keep.name) out.name = keep.name;
  if (keep.tags?.length) out.tags = keep.tags;
  if (keep.notes) out.notes = keep.notes;
  return out;
}

/** One line about where the form's values came from. */
export function presetSummary(preset: EnvPreset): string {
  const source = preset.source === "playground" ? "MuJoCo Playground's Brax PPO parameters" : preset.source;
  const env = (preset.spec as { env?: { randomize?: boolean } }).env;
  const randomized = env?.randomize ? ", with Playground's domain randomization" : "";
  const unmapped = preset.unmapped.length ? `; not carried over: ${preset.unmapped.join("; ")}` : "";
  return `Filled from the ${preset.env} preset (${source}, ${preset.variant} variant${randomized})${unmapped}.`;
}

/** What the note beside "Fill from preset" says while `env`'s preset loads. */
export function presetLoadingNote(env: string): string {
  return `Loading the ${env} preset…`;
}

/** What the note says once a fill of `env`'s preset came to `outcome`; null: it keeps what
 * it says (a fill says `presetSummary`, and a later pick's fill speaks for itself). */
export function presetOutcomeNote(outcome: FillOutcome, env: string): string | null {
  switch (outcome) {
    case "edited":
      return "Kept your edits; “Fill from preset” applies the preset.";
    case "failed":
      return `Could not load the ${env} preset.`;
    case "none":
      return `${env} has no preset: fields keep their values, the library's defaults where left out.`;
    case "filled":
    case "superseded":
      return null;
  }
}

export interface PresetFiller {
  /** The user picked `name`: fetch its preset and apply it unless edited meanwhile. */
  picked(name: string): Promise<FillOutcome>;
  /** Apply `name`'s preset now, over any edits. */
  fill(name: string): Promise<FillOutcome>;
  /** The user edited a field. */
  edited(): void;
}

export function createPresetFiller(
  fetchPreset: (name: string) => Promise<EnvPreset>,
  apply: (preset: EnvPreset) => Promise<void> | void,
): PresetFiller {
  let pick = 0;
  let edits = 0;
  const run = async (name: string, force: boolean): Promise<FillOutcome> => {
    const mine = ++pick;
    const editsAtPick = edits;
    let preset: EnvPreset;
    try {
      preset = await fetchPreset(name);
    } catch (error) {
      return error instanceof ApiError && error.status === 404 ? "none" : "failed";
    }
    if (mine !== pick) return "superseded";
    if (!force && edits !== editsAtPick) return "edited";
    await apply(preset);
    return "filled";
  };
  return {
    picked: (name) => run(name, false),
    fill: (name) => run(name, true),
    edited: () => {
      edits += 1;
    },
  };
}

/** Config paths the server moves with a total the spec sets itself (server/spec/preset_fill). */
export const CADENCE_PATHS = ["config.eval.every_steps", "config.checkpoint_every_steps"];
const DISTILLATION_FILLED = ["config.eval.n_envs", "config.eval.max_episode_length", "env.randomize"];
const MUST_SEND = Symbol("must send");

/** What the server gives a field the spec leaves out, filling it as server/spec/preset_fill
 * does: the preset's value (a network field only for the preset's own network kind; for a
 * distillation run only the evaluation's episode sizes and `env.randomize`), else the
 * library's default.
 * `MUST_SEND` for a cadence the server would move with a total the form changed. */
function leftOutValue(
  preset: EnvPreset | null,
  form: { kind: string; networkKind: string; totalSteps: unknown },
  path: string,
  libraryDefault: unknown,
): unknown {
  if (!preset) return libraryDefault;
  const spec = preset.spec as { network?: Record<string, unknown>; config?: Record<string, unknown> };
  const parts = path.split(".");
  if (form.kind === "distillation")
    return DISTILLATION_FILLED.includes(path) ? (getPath(spec, parts) ?? libraryDefault) : libraryDefault;
  if (parts[0] === "network" && (spec.network?.kind ?? "mlp") !== form.networkKind) return libraryDefault;
  if (
    CADENCE_PATHS.includes(path) &&
    !sameJson(form.totalSteps, getPath(spec, ["config", "ppo", "total_steps"]))
  )
    return MUST_SEND;
  const value = getPath(spec, parts);
  return value === undefined ? libraryDefault : value;
}

/** A LoggingLevel as sorted names: the form reads a list, a preset says "A|B" or "NONE". */
function comparable(path: string, value: unknown): unknown {
  if (!path.endsWith(".logging_level")) return value;
  const names =
    typeof value === "string" ? value.split("|") : Array.isArray(value) ? (value as unknown[]) : null;
  if (!names) return value;
  return names
    .map((n) => String(n).trim().toUpperCase())
    .filter((n) => n && n !== "NONE")
    .sort();
}

export interface FormValue {
  path: string;
  value: unknown;
  libraryDefault: unknown;
}

/** The spec the New Run form submits: `base` (kind, env, name, ...) plus each form value
 * the server would not give the field by itself. With the env's `preset` at hand, a value
 * equal to the preset's is left out, so that the stored spec records it as the preset's
 * (`preset.filled`), and the preset's variant is pinned; without it (not loaded, or opted
 * out), every value off the library's defaults is sent with `"preset": false`. Either way
 * the run trains with what the form shows. */
export function formSpec(base: RunSpec, values: FormValue[], preset: EnvPreset | null): RunSpec {
  const usable = preset && preset.env === base.env.name ? preset : null;
  const spec = structuredClone(base) as RunSpec & Record<string, unknown>;
  const form = {
    kind: base.kind ?? "ppo",
    networkKind: (base.network?.kind as string | undefined) ?? "mlp",
    totalSteps: values.find((v) => v.path === "config.ppo.total_steps")?.value,
  };
  for (const { path, value, libraryDefault } of values) {
    const leftOut = leftOutValue(usable, form, path, libraryDefault);
    if (!sameJson(comparable(path, value), comparable(path, leftOut))) setPath(spec, path.split("."), value);
  }
  const overrides = spec.env.overrides;
  const presetOverrides = (usable?.spec as { env?: { overrides?: Record<string, unknown> } } | undefined)?.env
    ?.overrides;
  if (overrides && presetOverrides) {
    for (const [key, value] of Object.entries(presetOverrides))
      if (key in overrides && sameJson(overrides[key], value)) delete overrides[key];
    if (!Object.keys(overrides).length) delete spec.env.overrides;
  }
  spec.preset = usable ? { variant: usable.variant } : false;
  return spec;
}
