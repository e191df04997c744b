/**
 * Filling the New Run form from the picked env's preset (GET /api/envs/{name}/preset).
 *
 * A pick starts a fetch; the preset is applied when it arrives unless the user edited the
 * form in the meantime (their edits win) or picked another env (only the latest pick
 * counts). `fill` applies the current env's preset whatever was edited (the button).
 */

import type { EnvPreset, RunSpec } from "../api/types";

export type FillOutcome = "filled" | "edited" | "superseded" | "failed";

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
  const unmapped = preset.unmapped.length ? `; not carried over: ${preset.unmapped.join("; ")}` : "";
  return `Filled from the ${preset.env} preset (${source}, ${preset.variant} variant)${unmapped}.`;
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
    } catch {
      return "failed";
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
