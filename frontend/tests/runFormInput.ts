import type { RunFormInput } from "../src/form/runSpec";

/** A New Run form's input as `buildRunSpec` takes it: a PPO run on PointReach with an mlp,
 * nothing typed, no preset; `extra` replaces what a test is about. */
export function runFormInput(extra: Partial<RunFormInput> = {}): RunFormInput {
  return {
    kind: "ppo",
    env: "PointReach",
    text: { name: "", tags: "", notes: "", overrides: "" },
    network: "mlp",
    randomize: false,
    randomizePath: "env.randomize",
    controls: [],
    teacher: null,
    resume: null,
    preset: null,
    ...extra,
  };
}
