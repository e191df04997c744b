// The pure parts of the big views: spec building and 422 mapping (the run and sweep forms),
// selection (the runs list), the sweep page's table and chart, the run page's tabs.
import { afterEach, describe, expect, it, vi } from "vitest";

import { ApiError } from "../src/api/http";
import type { MetricsEvent, Run, SweepDetail, Trial } from "../src/api/types";
import type { FieldDef } from "../src/form/fields";
import { buildRunSpec, fieldValue, parseOverrides, parseTags, textFields } from "../src/form/runSpec";
import { groupProblems } from "../src/form/serverProblems";
import {
  bulkState,
  compareHref,
  deletable,
  deletePrompt,
  pruneSelection,
  taggedMessage,
  tagUpdates,
} from "../src/runs/selection";
import {
  baseRunChoices,
  baseRunLabel,
  defaultSweepName,
  knownPaths,
  rowMessage,
} from "../src/sweeps/sweepChoices";
import {
  bestCountOf,
  brushNote,
  newestFirst,
  objectiveChart,
  paramText,
  sortMark,
  sweepAxes,
  trialColumns,
  trialsDone,
} from "../src/sweeps/sweepView";
import { liveStateText, plural } from "../src/views/liveState";
import { loadErrorMessage } from "../src/views/loadError";
import { actionsKey, applyMetrics, logLines, tabAfterKey, tabOf, throttle } from "../src/views/runPageState";

import { runFormInput } from "./runFormInput";
const run = (id: string, extra: Partial<Run> = {}): Run =>
  ({
    id,
    kind: "ppo",
    name: `run-${id}`,
    status: "succeeded",
    spec: { env: { name: "PointReach" } },
    tags: [],
    notes: "",
    created_at: 0,
    steps: 0,
    total_steps: 100,
    latest_metrics: {},
    cancel_requested: false,
    ...extra,
  }) as Run;

const trial = (n: number, objective: number | null, params: Record<string, unknown> = {}): Trial =>
  ({ trial: n, run_id: `r${n}`, status: "succeeded", params, objective, steps: 0, total_steps: 0 }) as Trial;

describe("the live marker", () => {
  it("says why a run's page reconnects, and not a list's", () => {
    expect(liveStateText("reconnecting", "page", "closed 1006")).toBe("reconnecting (closed 1006)…");
    expect(liveStateText("reconnecting", "list", "closed 1006")).toBe("reconnecting…");
    expect(liveStateText("failed", "page")).toBe("stream unavailable");
    expect(liveStateText("failed", "list")).toBe("live updates unavailable");
  });
  it("says a page's stream finished, and nothing for a list's", () => {
    expect(liveStateText("ended", "page")).toBe("finished");
    expect(liveStateText("ended", "list")).toBe("");
    expect(liveStateText("open", "list")).toBe("● live");
    expect(liveStateText("stopped", "page")).toBe("");
  });
  it("counts in words", () => {
    expect([0, 1, 2].map((n) => plural(n, "run"))).toEqual(["0 runs", "1 run", "2 runs"]);
  });
});

describe("a page's first load failing", () => {
  it("names a missing thing, leaves a 401 to the access page, else says why", () => {
    expect(loadErrorMessage(new ApiError(404, null, "not found"), "run", "abc")).toBe("There is no run abc.");
    expect(loadErrorMessage(new ApiError(401, null, "no token"), "sweep", "s1")).toBeNull();
    expect(loadErrorMessage(new Error("offline"), "sweep", "s1")).toBe("Could not load the sweep: offline");
  });
});

describe("a 422's problems sorted to the form's places", () => {
  it("puts each under the longest target its path starts with", () => {
    const { byTarget, general } = groupProblems(
      [
        { path: "config.ppo.learning_rate", message: "must be > 0" },
        { path: "config.ppo.clip.eps", message: "too big" },
        { path: "env", message: "unknown env" },
        { path: "", message: "bad body" },
        { path: "config.ppo.learning_rate", message: "not a number" },
      ],
      ["config", "config.ppo", "config.ppo.learning_rate", "env"],
    );
    expect([...byTarget.entries()]).toEqual([
      ["config.ppo.learning_rate", ["must be > 0", "not a number"]],
      // Below its target: the message names the path.
      ["config.ppo", ["config.ppo.clip.eps: too big"]],
      ["env", ["unknown env"]],
    ]);
    expect(general).toEqual(["bad body"]);
  });
  it("keeps a sweep's space entries apart from the space", () => {
    const { byTarget } = groupProblems(
      [{ path: "space.config.ppo.lr.low", message: "must be < high" }],
      ["space", "space.config.ppo.lr"],
    );
    expect(byTarget.get("space.config.ppo.lr")).toEqual(["space.config.ppo.lr.low: must be < high"]);
    expect(byTarget.has("space")).toBe(false);
  });
});

describe("the new-run form's spec", () => {
  const lr: FieldDef = { name: "learning_rate", kind: "float", default: 3e-4, help: "" };
  const clip: FieldDef = { name: "clip", kind: "optionalFloat", default: 0.2, help: "" };
  const input = runFormInput;

  it("sends only what differs from the library's defaults, and the typed texts", () => {
    const { spec, problems } = buildRunSpec(
      input({
        text: { name: "  first ", tags: "a, b,, c", notes: "  ", overrides: ' {"impl": "jax"} ' },
        network: "lstm",
        controls: [
          { path: "config.ppo.learning_rate", def: lr, result: { ok: true, value: 1e-3 } },
          { path: "config.ppo.clip", def: clip, result: { ok: true, value: 0.2 } },
        ],
      }),
    );
    expect(problems).toEqual([]);
    expect(spec).toEqual({
      kind: "ppo",
      env: { name: "PointReach", overrides: { impl: "jax" } },
      name: "first",
      tags: ["a", "b", "c"],
      network: { kind: "lstm" },
      config: { ppo: { learning_rate: 1e-3 } }, // clip is at its default: left out
      preset: false,
    });
  });

  it("names each field it cannot read, in the form's order", () => {
    const { problems } = buildRunSpec(
      input({
        kind: "distillation",
        text: { name: "", tags: "", notes: "", overrides: "[1, 2]" },
        controls: [
          { path: "config.ppo.learning_rate", def: lr, result: { ok: false, message: "not a number" } },
        ],
      }),
    );
    expect(problems).toEqual([
      { path: "env.overrides", message: 'must be a JSON object, e.g. {"impl": "jax"}' },
      { path: "config.ppo.learning_rate", message: "not a number" },
      { path: "teacher", message: "pick the teacher run" },
    ]);
  });

  it("keeps the teacher and the checkpoint resumed from", () => {
    const ref = { run_id: "t1", step: 40 };
    const { spec } = buildRunSpec(
      input({ kind: "distillation", teacher: ref, resume: { run_id: "r0", step: null } }),
    );
    expect(spec.teacher).toEqual(ref);
    expect(spec.resume_from).toEqual({ run_id: "r0", step: null });
  });

  it("parses tags and overrides as typed", () => {
    expect(parseTags(" x ,y,")).toEqual(["x", "y"]);
    expect(parseOverrides("  ")).toBeUndefined();
    expect(parseOverrides("{oops")).toBeNull();
    expect(parseOverrides("null")).toBeNull();
    expect(parseOverrides('{"a": 1}')).toEqual({ a: 1 });
  });

  it("shows a spec's texts and fields back", () => {
    expect(textFields({ name: "n", tags: ["a", "b"], env: { name: "E", overrides: { k: 1 } } })).toEqual({
      name: "n",
      tags: "a, b",
      notes: "",
      overrides: '{"k":1}',
    });
    expect(textFields({ env: { name: "E", overrides: {} } }).overrides).toBe("");
    expect(fieldValue(lr, undefined)).toBe(3e-4);
    expect(fieldValue(lr, null)).toBe(3e-4); // null is no value of a float field
    expect(fieldValue(clip, null)).toBeNull(); // but is one of an optional float
    const segment: FieldDef = { name: "segment", kind: "optionalInt", default: null, help: "" };
    expect(fieldValue(segment, null)).toBeNull(); // and of an optional integer
    expect(fieldValue(segment, 30)).toBe(30);
    expect(fieldValue(lr, 0.5)).toBe(0.5);
  });
});

describe("the new-sweep form's choices", () => {
  it("offers runs of no sweep, and the run it was opened for first", () => {
    const plain = run("a");
    const trialRun = run("b", { sweep_id: "s1" });
    const from = run("c", { sweep_id: "s2" });
    expect(baseRunChoices([plain, trialRun], null).map((r) => r.id)).toEqual(["a"]);
    expect(baseRunChoices([plain, trialRun], from).map((r) => r.id)).toEqual(["c", "a"]);
    expect(baseRunChoices([plain, trialRun], trialRun).map((r) => r.id)).toEqual(["a", "b"]);
    expect(baseRunLabel(run("x", { name: "" }))).toBe("x (PointReach)");
    expect(defaultSweepName(run("x"))).toBe("run-x-sweep");
  });
  it("suggests each spec path once, sorted", () => {
    const paths = knownPaths();
    expect(paths).toContain("config.ppo.learning_rate");
    expect(paths).toEqual([...new Set(paths)].sort());
  });
  it("puts a row's problems on one line", () => {
    const problems = [
      { row: 0, field: "high", message: "not a number" },
      { row: 1, field: "path", message: "empty" },
      { row: 0, field: "values", message: "empty" },
    ];
    expect(rowMessage(problems, 0)).toBe("high: not a number; values: empty");
  });
});

describe("the runs list's selection", () => {
  const runs = new Map([
    ["a", run("a", { tags: ["x"] })],
    ["b", run("b", { status: "running" })],
    ["c", run("c")],
  ]);
  it("forgets runs no longer listed", () => {
    const selected = new Set(["a", "gone"]);
    expect(pruneSelection(selected, (id) => runs.get(id)).map((r) => r.id)).toEqual(["a"]);
    expect([...selected]).toEqual(["a"]);
  });
  it("enables each action for what it can do", () => {
    const shown = [...runs.values()];
    const one = bulkState(new Set(["b"]), [runs.get("b") as Run], shown);
    expect(one).toMatchObject({ compareDisabled: true, tagDisabled: false, deleteDisabled: true });
    expect(one).toMatchObject({ deleteLabel: "Delete selected (0)", allChecked: false, someChecked: true });
    const all = bulkState(new Set(["a", "b", "c"]), shown, shown);
    expect(all).toMatchObject({ compareDisabled: false, compareLabel: "Compare selected (3)" });
    expect(all).toMatchObject({ deleteLabel: "Delete selected (2)", allChecked: true, someChecked: false });
    expect(bulkState(new Set(), [], [])).toMatchObject({ allChecked: false, someChecked: false });
  });
  it("tags only the runs without the tag and deletes only finished runs", () => {
    expect(tagUpdates([...runs.values()], "x")).toEqual([
      { id: "b", tags: ["x"] },
      { id: "c", tags: ["x"] },
    ]);
    expect(taggedMessage(1, "x")).toBe("Tagged 1 run “x”.");
    expect(deletable([...runs.values()]).map((r) => r.id)).toEqual(["a", "c"]);
    const prompt = deletePrompt(
      ["1", "2", "3", "4", "5", "6"].map((id) => run(id)),
      1,
    );
    expect(prompt.title).toBe("Delete 6 runs?");
    expect(prompt.body).toMatch(/^run-1, run-2, run-3, run-4, run-5, …: their metrics/);
    expect(prompt.body).toMatch(/ 1 selected run\(s\) still active are left alone\.$/);
    expect(deletePrompt([run("1")], 0).body).not.toMatch(/left alone/);
    expect(compareHref(["a b", "c"])).toBe("/compare?ids=a%20b,c");
  });
});

describe("a sweep's page", () => {
  const sweep = {
    objective: { metric: "eval/episode_reward", mode: "min" },
    request: { space: { "config.ppo.learning_rate": { log_uniform: [1e-4, 1e-2] } } },
    trials: [trial(0, 3), trial(1, 5), trial(2, 1)],
    trial_counts: { succeeded: 2, pruned: 1, running: 4 },
  } as unknown as SweepDetail;

  it("has a column per swept path between the trial and its status", () => {
    const cols = trialColumns(["config.ppo.learning_rate"], "eval/episode_reward");
    expect(cols.map((c) => c.label)).toEqual(["Trial", "learning_rate", "Status", "eval/episode_reward"]);
    expect(cols[1]?.title).toBe("config.ppo.learning_rate");
  });
  it("marks the sorted column", () => {
    const sort = { key: { kind: "objective" as const }, descending: true };
    expect(sortMark(sort, { kind: "objective" })).toEqual({ ariaSort: "descending", arrow: " ▼" });
    expect(sortMark(sort, { kind: "trial" })).toEqual({ ariaSort: "none", arrow: "" });
  });
  it("draws an axis per swept path, then the objective, and the running best", () => {
    expect(sweepAxes(sweep).map((a) => a.kind)).toEqual(["log", "linear"]);
    const chart = objectiveChart(sweep.trials, "min", "loss", ["red", "blue"]);
    expect(chart.x).toEqual([0, 1, 2]);
    expect(chart.lines.map((l) => [l.label, l.color, l.values])).toEqual([
      ["loss", "red", [3, 5, 1]],
      ["best so far", "blue", [3, 3, 1]], // minimising: 3, still 3, then 1
    ]);
  });
  it("counts ended trials and writes cells", () => {
    expect(trialsDone(sweep)).toBe(3); // 2 succeeded + 1 pruned; running ones are not done
    expect(paramText(undefined)).toBe("–");
    expect(paramText("relu")).toBe("relu");
    expect(bestCountOf("")).toBe(1);
    expect(bestCountOf("99")).toBe(20);
    expect(bestCountOf("2.6")).toBe(3);
    expect(brushNote(2, 5, 1)).toBe("2 of 5 trials");
    expect(brushNote(5, 5, 0)).toBe("");
    expect(newestFirst([{ created_at: 1 }, { created_at: 3 }, { created_at: 2 }])).toEqual([
      { created_at: 3 },
      { created_at: 2 },
      { created_at: 1 },
    ]);
  });
});

describe("a run's page", () => {
  afterEach(() => vi.useRealTimers());

  it("opens the tab the URL names, else the charts, and moves with the arrows", () => {
    expect(tabOf("logs")).toBe("logs");
    expect(tabOf("nope")).toBe("charts");
    expect(tabOf(null)).toBe("charts");
    expect(tabAfterKey("charts", "ArrowLeft")).toBe("logs"); // wraps round
    expect(tabAfterKey("logs", "ArrowRight")).toBe("charts");
    expect(tabAfterKey("videos", "Enter")).toBeNull();
  });
  it("folds only newer metrics into the run", () => {
    const r = run("a", { steps: 10, latest_metrics: { a: 1, b: 2 } as Run["latest_metrics"] });
    const event = (step: number, values: Record<string, number>) =>
      ({ type: "metrics", step, values }) as MetricsEvent;
    expect(applyMetrics(r, event(10, { a: 9 }))).toBe(false);
    expect(r.latest_metrics).toEqual({ a: 1, b: 2 });
    expect(applyMetrics(r, event(20, { a: 9 }))).toBe(true);
    expect(r.steps).toBe(20);
    expect(r.latest_metrics).toEqual({ a: 9, b: 2 });
  });
  it("drops only the empty line after the log's last newline", () => {
    expect(logLines("a\n\nb\n")).toEqual(["a", "", "b"]);
    expect(logLines("")).toEqual([]);
  });
  it("rebuilds the actions when the run ends or is being cancelled", () => {
    expect(actionsKey({ status: "running", cancel_requested: false })).toBe("true:false");
    expect(actionsKey({ status: "running", cancel_requested: true })).toBe("true:true");
    expect(actionsKey({ status: "failed", cancel_requested: true })).toBe("false:true");
  });
  it("throttles: one call per period, none after cancel", () => {
    vi.useFakeTimers();
    const fn = vi.fn();
    const t = throttle(fn, 100);
    t.call();
    t.call();
    vi.advanceTimersByTime(99);
    expect(fn).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(fn).toHaveBeenCalledTimes(1);
    t.call();
    t.cancel();
    vi.advanceTimersByTime(200);
    expect(fn).toHaveBeenCalledTimes(1);
  });
});
