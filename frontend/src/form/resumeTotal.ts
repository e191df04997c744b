/** The totals of a run that resumes another run's checkpoint ("Resume from here"). */

import type { RunSpec } from "../api/types";

/**
 * The `total_steps` the form starts with when it resumes a checkpoint at `checkpointStep`
 * of a run that trained towards `originalTotal`: that total when it lies past the
 * checkpoint (the run goes on to where it was headed), else the checkpoint's step plus as
 * much again (a run resumed from its end trains as long once more). The server refuses a
 * total that does not exceed the checkpoint's step.
 */
export function resumeTotal(originalTotal: number, checkpointStep: number): number {
  return originalTotal > checkpointStep ? originalTotal : checkpointStep + Math.max(originalTotal, 1);
}

/**
 * The form's spec for resuming `run` from its checkpoint at `step` (null: its newest, at
 * most `run.steps`): the run's own spec, named after it, with the total of `resumeTotal`.
 * A spec stored before specs were filled from the env's preset trained with the library's
 * defaults: it resumes with `preset: false`.
 */
export function resumingSpec(
  run: { id: string; name: string; spec: RunSpec; steps: number; total_steps: number },
  step: number | null,
): RunSpec {
  const spec = run.spec;
  const section = spec.kind === "distillation" ? "distillation" : "ppo";
  const config = { ...(spec.config ?? {}) } as Record<string, Record<string, unknown>>;
  const total = resumeTotal(run.total_steps, step ?? run.steps);
  config[section] = { ...(config[section] ?? {}), total_steps: total };
  return {
    ...spec,
    preset: "preset" in spec ? spec.preset : false,
    name: `${run.name}-resumed`,
    config: config as RunSpec["config"],
    resume_from: { run_id: run.id, step },
  };
}
