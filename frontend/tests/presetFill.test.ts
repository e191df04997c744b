import { describe, expect, it } from "vitest";

import { ApiError } from "../src/api/http";
import type { EnvPreset } from "../src/api/types";
import {
  createPresetFiller,
  formSpec,
  presetLoadingNote,
  presetOutcomeNote,
  presetSummary,
  specFromPreset,
} from "../src/form/presetFill";
import { NETWORK_FIELDS, configSections } from "../src/form/fields";
import { randomizeState } from "../src/form/randomizeField";

/** GET /api/envs/Go1JoystickFlatTerrain/preset?variant=cpu, as the service answers it. */
const GO1: EnvPreset = {
  env: "Go1JoystickFlatTerrain",
  variant: "cpu",
  source: "playground",
  unmapped: [
    "GAE: over the whole rollout, where Brax restarts it at each unroll_length segment",
    "minibatches: whole envs (sequences kept for recurrent networks), where Brax shuffles unroll_length segments",
    "evaluation: deterministic (tanh of the mean), where Brax's default samples",
    "num_resets_per_eval=10 (each finished env is reset)",
  ],
  spec: {
    env: { name: "Go1JoystickFlatTerrain", overrides: { episode_length: 1000 }, randomize: true },
    network: {
      kind: "mlp",
      actor_hidden_sizes: [512, 256, 128],
      critic_hidden_sizes: [512, 256, 128],
      activation: "swish",
      normalize_obs: true,
      entropy_weight: 0.01,
      policy_obs_key: "state",
      value_obs_key: "privileged_state",
    },
    config: {
      ppo: {
        n_envs: 256,
        rollout_length: 20,
        total_steps: 200000000,
        gae_lambda: 0.95,
        discounting_factor: 0.97,
        clip_range: 0.3,
        learning_rate: 0.0003,
        normalize_advantages: true,
        combine_advantages: false,
        n_epochs: 4,
        n_minibatches: 1,
        critic_loss_weight: 0.5,
        gradient_clipping: 1.0,
        weight_decay: null,
        logging_level: "LOSSES",
        logging_percentiles: null,
        anneal_learning_rate: false,
        reward_scaling: 1.0,
      },
      eval: {
        enabled: true,
        every_steps: 22222223,
        n_envs: 64,
        max_episode_length: 1000,
        logging_level: "NONE",
        logging_percentiles: [0, 25, 50, 75, 100],
      },
      video: { enabled: false, every_steps: 200000, episode_length: 1000, render_kwargs: {} },
      seed: 17,
      checkpoint_every_steps: 22222223,
      stop_on_non_finite: true,
      devices: null,
    },
  },
};

const deferred = <T>() => {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
};

describe("filling the New Run form from an env's preset", () => {
  it("takes env, network and config from the preset and keeps the run's own name", () => {
    const spec = specFromPreset(GO1, { name: "go1-try", tags: ["a"], notes: "" });
    expect(spec).toEqual({
      kind: "ppo",
      name: "go1-try",
      tags: ["a"],
      env: GO1.spec.env,
      network: GO1.spec.network,
      config: GO1.spec.config,
    });
    expect(presetSummary(GO1)).toContain("Go1JoystickFlatTerrain preset (MuJoCo Playground");
    expect(presetSummary(GO1)).toContain("num_resets_per_eval");
    expect(presetSummary(GO1)).toContain("with Playground's domain randomization");
    const plain = {
      ...GO1,
      spec: { ...GO1.spec, env: { name: "Go1JoystickFlatTerrain", randomize: false } },
    };
    expect(presetSummary(plain)).not.toContain("randomization");
  });

  it("has a form field for every preset value that differs from the form's default", () => {
    // A preset value without a field would be silently dropped from the submitted spec.
    const paths = new Set<string>();
    for (const def of NETWORK_FIELDS.mlp) paths.add(`network.${def.name}`);
    for (const section of configSections("ppo"))
      for (const def of section.fields) paths.add([...section.path, def.name].join("."));
    const leaves = (node: Record<string, unknown>, prefix: string): string[] =>
      Object.entries(node).flatMap(([key, value]) =>
        value !== null && typeof value === "object" && !Array.isArray(value) && key !== "render_kwargs"
          ? leaves(value as Record<string, unknown>, `${prefix}${key}.`)
          : [`${prefix}${key}`],
      );
    const spec = GO1.spec as Record<string, Record<string, unknown>>;
    const missing = [...leaves(spec.network!, "network."), ...leaves(spec.config!, "config.")].filter(
      (path) => path !== "network.kind" && !paths.has(path),
    );
    // Left at the library's defaults by every preset.
    expect(missing).toEqual(["config.stop_on_non_finite", "config.devices"]);
  });

  it("applies the preset of the latest pick unless the user edited the form meanwhile", async () => {
    const answers = new Map<string, ReturnType<typeof deferred<EnvPreset>>>();
    const applied: string[] = [];
    const filler = createPresetFiller(
      (name) => {
        const d = deferred<EnvPreset>();
        answers.set(name, d);
        return d.promise;
      },
      (preset) => {
        applied.push(preset.env);
      },
    );
    const preset = (env: string): EnvPreset => ({ ...GO1, env });

    // Picked, answered, applied.
    const first = filler.picked("CartpoleBalance");
    answers.get("CartpoleBalance")!.resolve(preset("CartpoleBalance"));
    expect(await first).toBe("filled");

    // Edited while the preset was on its way: the edit wins.
    const second = filler.picked("CheetahRun");
    filler.edited();
    answers.get("CheetahRun")!.resolve(preset("CheetahRun"));
    expect(await second).toBe("edited");

    // Two quick picks: only the latest is applied, whatever order the answers come in.
    const third = filler.picked("WalkerWalk");
    const fourth = filler.picked("HopperHop");
    answers.get("HopperHop")!.resolve(preset("HopperHop"));
    answers.get("WalkerWalk")!.resolve(preset("WalkerWalk"));
    expect([await third, await fourth]).toEqual(["superseded", "filled"]);

    // The button fills over edits.
    filler.edited();
    const forced = filler.fill("CheetahRun");
    filler.edited();
    answers.get("CheetahRun")!.resolve(preset("CheetahRun"));
    expect(await forced).toBe("filled");
    expect(applied).toEqual(["CartpoleBalance", "HopperHop", "CheetahRun"]);

    const failing = createPresetFiller(
      () => Promise.reject(new Error("503")),
      () => {},
    );
    expect(await failing.picked("PointReach")).toBe("failed");
    const none = createPresetFiller(
      () => Promise.reject(new ApiError(404, { detail: "unknown preset" }, "404")),
      () => {},
    );
    expect(await none.picked("TwoLinkArm")).toBe("none"); // a plugin env: no preset
  });

  it("says in the note what a pick's fill came to, and leaves it to a fill that applied", () => {
    expect(presetLoadingNote("CheetahRun")).toBe("Loading the CheetahRun preset…");
    expect(presetOutcomeNote("edited", "CheetahRun")).toBe(
      "Kept your edits; “Fill from preset” applies the preset.",
    );
    expect(presetOutcomeNote("failed", "CheetahRun")).toBe("Could not load the CheetahRun preset.");
    expect(presetOutcomeNote("none", "TwoLinkArm")).toBe(
      "TwoLinkArm has no preset: fields keep their values, the library's defaults where left out.",
    );
    // The fill said `presetSummary`; a superseded pick leaves the note to the later one.
    expect(presetOutcomeNote("filled", "CheetahRun")).toBeNull();
    expect(presetOutcomeNote("superseded", "WalkerWalk")).toBeNull();
  });

  it("submits only what the server would not fill with the same value", () => {
    const base = {
      kind: "ppo" as const,
      env: { name: GO1.env, overrides: { episode_length: 1000 } },
      network: { kind: "mlp" as const },
      config: {},
    };
    const values = [
      { path: "config.ppo.n_envs", value: 256, libraryDefault: 256 }, // the preset's
      { path: "config.ppo.learning_rate", value: 0.001, libraryDefault: 0.0001 }, // edited
      { path: "config.ppo.total_steps", value: 200000000, libraryDefault: 512000 }, // the preset's
      { path: "config.eval.every_steps", value: 22222223, libraryDefault: 50000 }, // the preset's
      { path: "network.activation", value: "swish", libraryDefault: "tanh" }, // the preset's
      { path: "network.min_std", value: null, libraryDefault: null }, // not in the preset
      // A LoggingLevel: a list of names in the form, "A|B" or "NONE" in a preset.
      { path: "config.ppo.logging_level", value: ["LOSSES"], libraryDefault: ["LOSSES"] },
      { path: "config.eval.logging_level", value: [], libraryDefault: [] },
    ];
    // The preset's values are left to the server (recorded as filled); its variant pinned.
    expect(formSpec(base, values, GO1)).toEqual({
      kind: "ppo",
      env: { name: GO1.env },
      network: { kind: "mlp" },
      config: { ppo: { learning_rate: 0.001 } },
      preset: { variant: "cpu" },
    });

    // A new total: the server would move a cadence left out, so the shown one is sent.
    const shorter = values.map((v) => (v.path === "config.ppo.total_steps" ? { ...v, value: 1000000 } : v));
    expect(formSpec(base, shorter, GO1).config).toEqual({
      ppo: { learning_rate: 0.001, total_steps: 1000000 },
      eval: { every_steps: 22222223 },
    });

    // Another network kind takes none of the preset's network fields: sent if off the defaults.
    const lstm = formSpec({ ...base, network: { kind: "lstm" } }, values, GO1);
    expect(lstm.network).toEqual({ kind: "lstm", activation: "swish" });

    // Without the env's preset (not loaded, another env's, or "preset": false): every value
    // off the library's defaults, and the preset off.
    for (const preset of [null, { ...GO1, env: "PointReach" }]) {
      const spec = formSpec(base, values, preset);
      expect(spec.preset).toBe(false);
      expect(spec.env).toEqual({ name: GO1.env, overrides: { episode_length: 1000 } });
      expect(spec.config).toEqual({
        ppo: { learning_rate: 0.001, total_steps: 200000000 },
        eval: { every_steps: 22222223 },
      });
      expect(spec.network).toEqual({ kind: "mlp", activation: "swish" });
    }
  });

  it("sends the domain-randomization switch only where the server would not set it so", () => {
    const base = {
      kind: "ppo" as const,
      env: { name: GO1.env },
      network: { kind: "mlp" as const },
      config: {},
    };
    const switchAt = (on: boolean) => [{ path: "env.randomize", value: on, libraryDefault: false }];
    // On, as Go1's preset has it: left to the server, which records it as the preset's.
    expect(formSpec(base, switchAt(true), GO1).env).toEqual({ name: GO1.env });
    // Turned off: sent.
    expect(formSpec(base, switchAt(false), GO1).env).toEqual({ name: GO1.env, randomize: false });
    // A distillation run takes the preset's switch too.
    const distill = formSpec({ ...base, kind: "distillation" }, switchAt(false), GO1);
    expect(distill.env).toEqual({ name: GO1.env, randomize: false });
    // Without the preset the server's default is off: only "on" is sent.
    expect(formSpec(base, switchAt(true), null).env).toEqual({ name: GO1.env, randomize: true });
    expect(formSpec(base, switchAt(false), null).env).toEqual({ name: GO1.env });
  });
});

describe("the domain-randomization switch", () => {
  const env = (name: string, domain_randomizer: boolean) => ({
    name,
    source: "playground" as const,
    domain_randomizer,
  });
  it("can be turned on only for an env with a randomizer, and off always", () => {
    expect(randomizeState(env("Go1JoystickFlatTerrain", true), false).disabled).toBe(false);
    const cartpole = randomizeState(env("CartpoleBalance", false), false);
    expect(cartpole).toEqual({
      disabled: true,
      help: "CartpoleBalance has no domain randomizer in MuJoCo Playground.",
    });
    expect(randomizeState(env("CartpoleBalance", false), true).disabled).toBe(false);
    expect(randomizeState(undefined, false).disabled).toBe(false); // not listed yet
  });
});
