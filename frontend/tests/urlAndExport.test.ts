import { describe, expect, it } from "vitest";

import { api } from "../src/api/client";
import { compareCsv, csvNumber, fileSafe, seriesCsv } from "../src/charts/chartExport";
import { keyZoom, panBy, pinchZoom, zoomBy } from "../src/charts/chartZoom";
import { firstWallTime, toPlotData } from "../src/charts/plotData";
import { seriesFromWire } from "../src/charts/series";
import {
  compareFromQuery,
  compareToQuery,
  emptyFilters,
  filtersFromQuery,
  filtersToQuery,
  type CompareState,
} from "../src/urlState";

describe("URL state", () => {
  it("round-trips the runs list filters", () => {
    const filters = { q: "cart pole", status: "running", kind: "ppo", tag: "a&b" };
    const qs = filtersToQuery(filters);
    expect(qs).toBe("q=cart+pole&status=running&kind=ppo&tag=a%26b");
    expect(filtersFromQuery(new URLSearchParams(qs))).toEqual(filters);
    expect(filtersToQuery(emptyFilters())).toBe("");
  });

  it("drops values the list cannot filter by", () => {
    const parsed = filtersFromQuery(new URLSearchParams("status=bogus&kind=x&q=%20a%20"));
    expect(parsed).toEqual({ ...emptyFilters(), q: "a" });
  });

  it("round-trips the compare state, defaults left out", () => {
    const state: CompareState = {
      ids: ["abc", "def"],
      metric: "eval/episode_reward",
      xAxis: "wall",
      smoothing: 0.6,
      logScale: true,
    };
    const qs = compareToQuery(state);
    expect(qs).toBe("ids=abc,def&metric=eval%2Fepisode_reward&x=wall&smoothing=0.6&log=1");
    expect(compareFromQuery(new URLSearchParams(qs))).toEqual(state);
    const plain = compareFromQuery(new URLSearchParams("ids=abc,,abc&smoothing=7"));
    expect(plain).toEqual({ ids: ["abc"], metric: "", xAxis: "step", smoothing: 0.99, logScale: false });
    expect(compareToQuery({ ...plain, smoothing: 0 })).toBe("ids=abc");
  });
});

describe("chart CSV", () => {
  const series = seriesFromWire({
    step: [100, 200, 300],
    wall_time: [1700000000.5, 1700000001.25, 1700000002],
    value: [1.5, "NaN", "-Infinity"],
    min: [1, "NaN", "-Infinity"],
    max: [2, "NaN", "-Infinity"],
  });

  it("writes a run's series as /metrics has it", () => {
    expect(seriesCsv(series)).toBe(
      "step,wall_time,value,min,max\n" +
        "100,1700000000.5,1.5,1,2\n" +
        "200,1700000001.25,NaN,NaN,NaN\n" +
        "300,1700000002,-Infinity,-Infinity,-Infinity\n",
    );
    expect(csvNumber(null)).toBe("");
    expect(csvNumber(Infinity)).toBe("Infinity");
  });

  it("writes compared runs in long format, quoting names", () => {
    expect(
      compareCsv([{ id: "r1", name: 'a, "b"', series }])
        .split("\n")
        .slice(0, 2),
    ).toEqual(["run_id,run,step,wall_time,value", 'r1,"a, ""b""",100,1700000000.5,1.5']);
    expect(fileSafe("eval/episode reward")).toBe("eval-episode-reward");
  });

  it("draws against the points' own wall time, from the run's first point", () => {
    expect(firstWallTime([series])).toBe(1700000000.5);
    const data = toPlotData(series, { xAxis: "wall", smoothing: 0, logScale: false });
    expect(data.x).toEqual([0, 0.75, 1.5]); // seconds since the first point
    expect(data.withoutTime).toBe(0);
  });
});

describe("chart zoom", () => {
  const bounds = { min: 0, max: 1000 };
  it("zooms around the centre, pans, and stays inside the data", () => {
    expect(zoomBy(bounds, bounds, 0.5)).toEqual({ min: 250, max: 750 });
    expect(keyZoom("+", { min: 250, max: 750 }, bounds)).toEqual({ min: 375, max: 625 });
    expect(keyZoom("-", { min: 250, max: 750 }, bounds)).toEqual({ min: 0, max: 1000 });
    // Pan by a fifth of the width (100), clamped at the edges.
    expect(keyZoom("ArrowRight", { min: 250, max: 750 }, bounds)).toEqual({ min: 350, max: 850 });
    expect(panBy({ min: 700, max: 900 }, bounds, 2)).toEqual({ min: 800, max: 1000 });
    expect(keyZoom("ArrowLeft", { min: 50, max: 550 }, bounds)).toEqual({ min: 0, max: 500 });
    expect(keyZoom("Escape", bounds, bounds)).toBe("reset");
    expect(keyZoom("0", bounds, bounds)).toBe("reset");
    expect(keyZoom("a", bounds, bounds)).toBeNull();
  });

  it("pinches around the fingers' midpoint", () => {
    // Fingers twice as far apart: half the width, the point under them (x=100) stays put.
    expect(pinchZoom(bounds, bounds, 100, 200, 100)).toEqual({ min: 50, max: 550 });
    expect(pinchZoom(bounds, bounds, 0, 200, 100)).toEqual(bounds);
  });
});

describe("a checkpoint's policy download", () => {
  it("is the policy endpoint of the checkpoint, in each format", () => {
    expect(api.policyUrl("0123456789ab", 8000, "onnx")).toBe(
      "/api/runs/0123456789ab/checkpoints/8000/policy?format=onnx",
    );
    expect(api.policyUrl("0123456789ab", 0, "stablehlo")).toBe(
      "/api/runs/0123456789ab/checkpoints/0/policy?format=stablehlo",
    );
  });
});
