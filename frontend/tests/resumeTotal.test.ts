import { describe, expect, it } from "vitest";

import type { RunSpec } from "../src/api/types";
import { resumeTotal, resumingSpec } from "../src/form/resumeTotal";

describe("resuming a checkpoint", () => {
  it("prefills a total past the checkpoint's step", () => {
    // Mid-run checkpoint: on to where the run was headed.
    expect(resumeTotal(300_000, 163_840)).toBe(300_000);
    // The last checkpoint of a finished run lies at or past its total (whole iterations:
    // 311,296 for a total of 300,000): as much training again, 311,296 + 300,000.
    expect(resumeTotal(300_000, 311_296)).toBe(611_296);
    expect(resumeTotal(20_000, 20_000)).toBe(40_000);
    expect(resumeTotal(0, 5)).toBe(6);
  });

  it("builds the form's spec from the run, its total in the run's own section", () => {
    const spec = {
      kind: "distillation",
      env: { name: "PointReach" },
      config: { distillation: { n_envs: 16, total_steps: 300_000 }, seed: 3 },
      teacher: { run_id: "t1", step: null },
    } as unknown as RunSpec;
    const run = { id: "r1", name: "student", spec, steps: 311_296, total_steps: 300_000 };
    const out = resumingSpec(run, 311_296) as unknown as Record<string, unknown>;
    expect(out.name).toBe("student-resumed");
    expect(out.resume_from).toEqual({ run_id: "r1", step: 311_296 });
    expect(out.config).toEqual({ distillation: { n_envs: 16, total_steps: 611_296 }, seed: 3 });
    expect(out.teacher).toEqual({ run_id: "t1", step: null });
    // The run's own spec is left as it was.
    expect(spec.config).toEqual({ distillation: { n_envs: 16, total_steps: 300_000 }, seed: 3 });
    // The newest checkpoint (step null) is at most the run's steps.
    const ppo = { ...run, spec: { kind: "ppo", env: { name: "PointReach" } } as RunSpec };
    expect(resumingSpec(ppo, null).config).toEqual({ ppo: { total_steps: 611_296 } });
  });
});
