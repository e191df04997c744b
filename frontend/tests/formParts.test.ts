// The pure parts the New Run and New Sweep forms share or keep apart from their DOM: plain
// inputs read and written as one record, the sweep's typed settings, the run form's prefill
// from its query, and what a form says when its own check marked problems.
import { describe, expect, it } from "vitest";

import type { RunSpec } from "../src/api/types";
import { readValues, writeValues } from "../src/form/inputValues";
import { prefillOf, studentSpec } from "../src/form/runPrefill";
import { buildRunSpec, textFields } from "../src/form/runSpec";
import { fixFirstMessage } from "../src/form/serverProblems";
import { bodyToForm, SETTING_KEYS, settingsOf, type SettingKey } from "../src/sweeps/sweepBody";

import { runFormInput } from "./runFormInput";

/** Stand-ins for `<input>`s: each remembers the order it was written in. */
function fakeInputs<K extends string>(
  keys: readonly K[],
  written: string[] = [],
): Record<K, { value: string }> {
  const out = {} as Record<K, { value: string }>;
  for (const key of keys) {
    let value = "";
    out[key] = {
      get value() {
        return value;
      },
      set value(next: string) {
        written.push(key);
        value = next;
      },
    };
  }
  return out;
}

describe("plain inputs as one record", () => {
  it("reads and writes each input under its key, in the inputs' order", () => {
    const written: string[] = [];
    const inputs = fakeInputs(["name", "tags", "notes", "overrides"] as const, written);
    // Values may hold more than the inputs: the rest is the form's to keep elsewhere.
    const values = { overrides: "{}", notes: "n", tags: "a, b", name: "x", extra: "kept out" };
    writeValues(inputs, values);
    expect(written).toEqual(["name", "tags", "notes", "overrides"]);
    expect(readValues(inputs)).toEqual({ name: "x", tags: "a, b", notes: "n", overrides: "{}" });
    expect(Object.keys(readValues(inputs))).toEqual(["name", "tags", "notes", "overrides"]);
  });

  it("round-trips the run form's text fields through its spec", () => {
    const inputs = fakeInputs(["name", "tags", "notes", "overrides"] as const);
    writeValues(
      inputs,
      textFields({ name: "r1", tags: ["a", "b"], env: { name: "PointReach", overrides: { impl: "jax" } } }),
    );
    const { spec, problems } = buildRunSpec(runFormInput({ text: readValues(inputs) }));
    expect(problems).toEqual([]);
    expect(spec).toMatchObject({ name: "r1", tags: ["a", "b"], env: { overrides: { impl: "jax" } } });
  });
});

describe("the sweep form's settings", () => {
  it("are written from a body's state and read back typed, in the order of SETTING_KEYS", () => {
    const written: string[] = [];
    const inputs = fakeInputs<SettingKey>(SETTING_KEYS, written);
    const state = bodyToForm({
      spec: {} as RunSpec,
      space: {},
      name: "s",
      method: "grid",
      max_trials: 8,
      objective: { metric: "eval/episode_reward", mode: "min" },
      pruner: { kind: "asha", reduction_factor: 2 },
    });
    writeValues(inputs, state);
    expect(written).toEqual([...SETTING_KEYS]);
    expect(settingsOf(readValues(inputs))).toEqual({
      name: "s",
      method: "grid",
      maxTrials: "8",
      parallel: "",
      metric: "eval/episode_reward",
      mode: "min",
      pruner: "asha",
    });
  });

  it("maximises unless the mode says min", () => {
    const values = {
      name: "",
      method: "tpe",
      maxTrials: "",
      parallel: "",
      metric: "m",
      mode: "",
      pruner: "off",
    };
    expect(settingsOf(values).mode).toBe("max");
    expect(settingsOf({ ...values, mode: "max" }).mode).toBe("max");
    expect(settingsOf({ ...values, mode: "min" }).mode).toBe("min");
  });
});

describe("the run form's prefill", () => {
  const query = (text: string) => new URLSearchParams(text);

  it("resumes, or teaches, the run its query names, at the step it names", () => {
    expect(prefillOf(query("resume=r1&step=163840"))).toEqual({ from: "resume", run: "r1", step: 163840 });
    expect(prefillOf(query("teacher=t1&step=0"))).toEqual({ from: "teacher", run: "t1", step: 0 });
    // No step, or a blank one: the newest checkpoint.
    expect(prefillOf(query("teacher=t1"))).toEqual({ from: "teacher", run: "t1", step: null });
    expect(prefillOf(query("resume=r1&step="))).toEqual({ from: "resume", run: "r1", step: null });
    // Resume wins over teacher; a blank run is none.
    expect(prefillOf(query("resume=r1&teacher=t1"))).toMatchObject({ from: "resume", run: "r1" });
    expect(prefillOf(query("resume=&teacher=t1"))).toMatchObject({ from: "teacher", run: "t1" });
    expect(prefillOf(query(""))).toEqual({ from: "preset" });
    expect(prefillOf(query("resume=&step=5"))).toEqual({ from: "preset" });
  });

  it("makes a student of the teacher's checkpoint on its env", () => {
    const teacher = { id: "t1", name: "walker", spec: { env: { name: "WalkerWalk", randomize: true } } };
    expect(studentSpec(teacher, 3_000)).toEqual({
      kind: "distillation",
      name: "walker-student",
      env: { name: "WalkerWalk", randomize: true },
      teacher: { run_id: "t1", step: 3_000 },
    });
    expect(studentSpec(teacher, null).teacher).toEqual({ run_id: "t1", step: null });
  });
});

describe("a form's own check", () => {
  it("says how many marked problems to fix first", () => {
    expect(fixFirstMessage(1, "marked field")).toBe("Fix the 1 marked field first.");
    expect(fixFirstMessage(3, "marked problem")).toBe("Fix the 3 marked problems first.");
  });
});
