/** What the New Run form opens with, read from its query. Pure: the view fetches the run
 * named and loads the spec. */

import type { RunSpec } from "../api/types";

/**
 * `?resume=<run>&step=<n>`: resume that run's checkpoint (`resumingSpec`);
 * `?teacher=<run>&step=<n>`: a distillation run with that teacher (`studentSpec`), when
 *   there is no `resume`;
 * neither: the default env's preset. A missing or blank `step` is null (the newest
 * checkpoint).
 */
export type Prefill = { from: "resume" | "teacher"; run: string; step: number | null } | { from: "preset" };

export function prefillOf(query: URLSearchParams): Prefill {
  const stepText = query.get("step");
  const step = stepText === null || stepText === "" ? null : Number(stepText);
  const resume = query.get("resume");
  if (resume) return { from: "resume", run: resume, step };
  const teacher = query.get("teacher");
  if (teacher) return { from: "teacher", run: teacher, step };
  return { from: "preset" };
}

/** The spec of a student of `run`'s checkpoint at `step` (null: its newest): a distillation
 * run on the teacher's env, named after it. */
export function studentSpec(
  run: { id: string; name: string; spec: Pick<RunSpec, "env"> },
  step: number | null,
): Partial<RunSpec> {
  return {
    kind: "distillation",
    name: `${run.name}-student`,
    env: run.spec.env,
    teacher: { run_id: run.id, step },
  };
}
