import { describe, expect, it } from "vitest";

import type { RunSpec, SweepCreate, Trial } from "../src/api/types";
import {
  axisOfEntry,
  brushBetween,
  filterByBrushes,
  objectiveAxis,
  OBJECTIVE,
  ticks,
  toUnit,
  type Brush,
} from "../src/sweeps/parallelAxes";
import {
  baseSpec,
  bodyToForm,
  emptyRow,
  formToBody,
  parseValues,
  rowToEntry,
  valuesText,
} from "../src/sweeps/sweepBody";
import { bestTrials, nextSort, objectiveSeries, runningBest, sortTrials } from "../src/sweeps/trials";

const LR = "config.ppo.learning_rate";
const SIZES = "network.actor_hidden_sizes";

function trial(
  number: number,
  status: Trial["status"],
  objective: number | null,
  lr: number,
  sizes: number[],
): Trial {
  return {
    trial: number,
    run_id: `r${number}`,
    status,
    params: { [LR]: lr, [SIZES]: sizes },
    objective,
    steps: 0,
    total_steps: 1000,
    error: null,
    created_at: number,
    started_at: null,
    finished_at: null,
  };
}

const TRIALS: Trial[] = [
  trial(0, "succeeded", -2, 1e-4, [16]),
  trial(1, "succeeded", -1, 1e-2, [32, 32]),
  trial(2, "pruned", -5, 1e-3, [16]),
  trial(3, "running", null, 3e-3, [32, 32]),
  trial(4, "succeeded", -0.5, 1e-3, [32, 32]),
];

describe("parallel-coordinates axes", () => {
  it("puts log_uniform values in log space", () => {
    const axis = axisOfEntry(LR, { log_uniform: [1e-4, 1e-2] });
    expect(axis.kind).toBe("log");
    // log10: -4 .. -2, so 1e-3 is halfway and 1e-4 at the bottom
    expect(toUnit(axis, 1e-3)).toBeCloseTo(0.5, 12);
    expect(toUnit(axis, 1e-4)).toBe(0);
    expect(toUnit(axis, 1e-2)).toBeCloseTo(1, 12);
    // sqrt(10) * 1e-4 is a quarter of the way (log10 = -3.5)
    expect(toUnit(axis, Math.sqrt(10) * 1e-4)).toBeCloseTo(0.25, 12);
    // the ends and the decade between them
    expect(ticks(axis).map((t) => t.label)).toEqual(["1.00e-4", "1e-3", "0.01"]);
    expect(toUnit(axis, 0)).toBeNull();
  });

  it("scales uniform and int_uniform ranges linearly and clamps to the domain", () => {
    const axis = axisOfEntry("config.ppo.entropy_cost", { uniform: [0, 0.02] });
    expect(toUnit(axis, 0.005)).toBeCloseTo(0.25, 12);
    expect(toUnit(axis, 1)).toBe(1);
    const ints = axisOfEntry("config.ppo.n_epochs", { int_uniform: [2, 6] });
    expect(ints.kind).toBe("linear");
    expect(toUnit(ints, 5)).toBeCloseTo(0.75, 12); // (5 - 2) / (6 - 2)
    expect(toUnit(ints, "5")).toBeNull();
  });

  it("spaces choice values evenly and matches lists by value", () => {
    const axis = axisOfEntry(SIZES, { choice: [[16], [32, 32], [64, 64]] });
    expect(axis.kind).toBe("categorical");
    expect(toUnit(axis, [16])).toBe(0);
    expect(toUnit(axis, [32, 32])).toBe(0.5);
    expect(toUnit(axis, [64, 64])).toBe(1);
    expect(toUnit(axis, [8])).toBeNull();
    expect(ticks(axis).map((t) => t.label)).toEqual(["16", "32,32", "64,64"]);
    // objects match whatever the order of their keys
    const objects = axisOfEntry("env.overrides.x", { grid: [{ a: 1, b: 2 }] });
    expect(toUnit(objects, { b: 2, a: 1 })).toBe(0.5);
  });

  it("spans the objective's values, or a unit around a single one", () => {
    expect(objectiveAxis("reward", [-2, null, 3]).domain).toEqual([-2, 3]);
    expect(objectiveAxis("reward", [4]).domain).toEqual([3.5, 4.5]);
  });

  it("filters trials by the brushes of every brushed axis", () => {
    const lr = axisOfEntry(LR, { log_uniform: [1e-4, 1e-2] });
    const sizes = axisOfEntry(SIZES, { choice: [[16], [32, 32]] });
    const objective = objectiveAxis(
      "reward",
      TRIALS.map((t) => t.objective),
    );
    const axes = [lr, sizes, objective];
    const brushes = new Map<string, Brush>();
    expect(filterByBrushes(TRIALS, axes, brushes)).toHaveLength(5);
    // the upper half of the lr axis: 1e-3 and above (1e-3 sits exactly at 0.5)
    brushes.set(LR, brushBetween(1.1, 0.5)); // dragged past the top: clamped to 1
    expect(filterByBrushes(TRIALS, axes, brushes).map((t) => t.trial)).toEqual([1, 2, 3, 4]);
    // and the [32, 32] slot (unit 1)
    brushes.set(SIZES, brushBetween(0.8, 1.2));
    expect(filterByBrushes(TRIALS, axes, brushes).map((t) => t.trial)).toEqual([1, 3, 4]);
    // and an objective in the top fifth: -5..-0.5, so >= -1.4; trial 3 has none
    brushes.set(OBJECTIVE, brushBetween(0.8, 1));
    expect(filterByBrushes(TRIALS, axes, brushes).map((t) => t.trial)).toEqual([1, 4]);
    brushes.clear();
    expect(filterByBrushes(TRIALS, axes, brushes)).toHaveLength(5);
  });
});

describe("trial table and objective", () => {
  it("sorts by a column with missing values last, and flips on a second click", () => {
    let sort = nextSort({ key: { kind: "trial" }, descending: false }, { kind: "objective" }, "max");
    expect(sort.descending).toBe(true); // maximising: best first
    expect(sortTrials(TRIALS, sort).map((t) => t.trial)).toEqual([4, 1, 0, 2, 3]);
    sort = nextSort(sort, { kind: "objective" }, "max");
    expect(sortTrials(TRIALS, sort).map((t) => t.trial)).toEqual([2, 0, 1, 4, 3]);
    // a parameter: numbers numerically (ties by trial number)
    sort = nextSort(sort, { kind: "param", path: LR }, "max");
    expect(sortTrials(TRIALS, sort).map((t) => t.trial)).toEqual([0, 2, 4, 3, 1]);
    // lists element by element
    const bySizes = sortTrials(TRIALS, { key: { kind: "param", path: SIZES }, descending: true });
    expect(bySizes.map((t) => t.trial)).toEqual([1, 3, 4, 0, 2]);
    expect(TRIALS.map((t) => t.trial)).toEqual([0, 1, 2, 3, 4]); // not sorted in place
  });

  it("keeps the running best of finished trials only", () => {
    const points = [
      { objective: -3, counts: true },
      { objective: -1, counts: false }, // pruned: not a best
      { objective: -2, counts: true },
      { objective: null, counts: true },
      { objective: -2.5, counts: true },
    ];
    expect(runningBest(points, "max")).toEqual([-3, -3, -2, -2, -2]);
    expect(runningBest(points, "min")).toEqual([-3, -3, -3, -3, -3]);
    expect(runningBest([{ objective: 1, counts: false }], "max")).toEqual([null]);
  });

  it("draws ended trials against their number", () => {
    const series = objectiveSeries(TRIALS, "max");
    expect(series.x).toEqual([0, 1, 2, 4]);
    expect(series.objective).toEqual([-2, -1, -5, -0.5]);
    expect(series.best).toEqual([-2, -1, -1, -0.5]);
  });

  it("picks the best N succeeded trials", () => {
    expect(bestTrials(TRIALS, "max", 2).map((t) => t.run_id)).toEqual(["r4", "r1"]);
    expect(bestTrials(TRIALS, "min", 2).map((t) => t.run_id)).toEqual(["r0", "r1"]);
    expect(bestTrials(TRIALS, "max", 10)).toHaveLength(3);
  });
});

describe("the new-sweep form and its JSON", () => {
  const spec: RunSpec = { kind: "ppo", env: { name: "PointReach" } };

  it("reads values typed with or without JSON", () => {
    expect(parseValues("[32, 32], [64, 64]")).toEqual([
      [32, 32],
      [64, 64],
    ]);
    expect(parseValues("0.1, 0.3")).toEqual([0.1, 0.3]);
    expect(parseValues("relu, tanh")).toEqual(["relu", "tanh"]);
    expect(parseValues('"relu", 3')).toEqual(["relu", 3]);
    expect(parseValues("  ")).toEqual([]);
    expect(parseValues(valuesText([[16], "a", 2, { k: 1 }]))).toEqual([[16], "a", 2, { k: 1 }]);
  });

  it("names the input of a row that cannot be sent", () => {
    expect(rowToEntry({ ...emptyRow(), path: LR, low: "1e-4", high: "x" }).problems).toEqual([
      ["high", "must be a number"],
    ]);
    expect(
      rowToEntry({ ...emptyRow(), kind: "int_uniform", path: "config.seed", low: "1.5", high: "3" }).problems,
    ).toEqual([["low", "must be an integer"]]);
    expect(rowToEntry({ ...emptyRow(), kind: "choice", path: SIZES }).problems[0]?.[0]).toBe("values");
  });

  it("builds the body from the form and back", () => {
    const state = bodyToForm({ spec, space: {} });
    state.name = "lr-and-sizes";
    state.maxTrials = "4";
    state.parallel = "2";
    state.pruner = "median";
    state.space = [
      { ...emptyRow(), path: LR, kind: "log_uniform", low: "1e-4", high: "3e-3" },
      { ...emptyRow(), path: SIZES, kind: "choice", values: "[16], [32, 32]" },
    ];
    const { body, problems } = formToBody(state);
    expect(problems).toEqual([]);
    const expected: SweepCreate = {
      spec,
      name: "lr-and-sizes",
      method: "tpe",
      max_trials: 4,
      parallel: 2,
      objective: { metric: "eval/episode_reward", mode: "max" },
      pruner: { kind: "median" },
      space: { [LR]: { log_uniform: [1e-4, 3e-3] }, [SIZES]: { choice: [[16], [32, 32]] } },
    };
    expect(body).toEqual(expected);
    // through the JSON tab and back: the same body
    const again = formToBody(bodyToForm(JSON.parse(JSON.stringify(body)) as SweepCreate));
    expect(again).toEqual({ body: expected, problems: [] });
  });

  it("keeps a pruner's options and the seed from JSON while its kind is kept", () => {
    const state = bodyToForm({
      spec,
      space: { "config.seed": { grid: [1, 2] } },
      method: "grid",
      seed: 7,
      pruner: { kind: "asha", reduction_factor: 2 },
    });
    expect(state.space[0]).toMatchObject({ kind: "grid", values: "1, 2" });
    expect(formToBody(state).body).toMatchObject({ seed: 7, pruner: { kind: "asha", reduction_factor: 2 } });
    state.pruner = "median";
    expect(formToBody(state).body.pruner).toEqual({ kind: "median" });
    state.pruner = "off";
    expect(formToBody(state).body.pruner).toBeUndefined();
    expect(bodyToForm({ spec, space: {}, pruner: "median" } as unknown as SweepCreate).pruner).toBe("median");
  });

  it("refuses an empty space and a path twice", () => {
    const state = bodyToForm({ spec, space: {} });
    expect(formToBody(state).problems).toEqual([
      { row: null, field: "space", message: "add a parameter to search" },
    ]);
    state.space = [
      { ...emptyRow(), path: "config.seed", kind: "grid", values: "1" },
      { ...emptyRow(), path: "config.seed", kind: "grid", values: "2" },
    ];
    expect(formToBody(state).problems).toEqual([
      { row: 1, field: "path", message: "config.seed is in the space twice" },
    ]);
  });

  it("bases a sweep on a run's spec without its name or resume point", () => {
    const run: RunSpec = { ...spec, name: "base", resume_from: { run_id: "x", step: null }, tags: ["t"] };
    expect(baseSpec(run)).toEqual({ ...spec, tags: ["t"], preset: false });
    // A spec stored with the preset's values keeps its preset section.
    const filled = { name: "PointReach", variant: "cpu" as const, source: "tuned", filled: ["config.seed"] };
    expect(baseSpec({ ...run, preset: filled })).toEqual({ ...spec, tags: ["t"], preset: filled });
  });
});
