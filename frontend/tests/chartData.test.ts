import { describe, expect, it } from "vitest";

import { decodeNumber, formatNumber } from "../src/api/numbers";
import type { MetricsEvent } from "../src/api/types";
import { alignSeries, toPlotData, type ViewSettings } from "../src/charts/plotData";
import {
  appendEvent,
  appendPoint,
  isDownsampled,
  nonFinitePoints,
  seriesFromWire,
  truncateAfter,
  type Series,
} from "../src/charts/series";
import { smoothEma } from "../src/charts/smoothing";
import { WallClock } from "../src/charts/wallClock";

const plain: ViewSettings = { xAxis: "step", smoothing: 0, logScale: false };

describe("wire numbers", () => {
  it("decodes the server's strings for non-finite values", () => {
    expect(decodeNumber("NaN")).toBeNaN();
    expect(decodeNumber("Infinity")).toBe(Infinity);
    expect(decodeNumber("-Infinity")).toBe(-Infinity);
    expect(decodeNumber(1.5)).toBe(1.5);
    expect(decodeNumber(null)).toBeNull();
  });
  it("formats numbers compactly", () => {
    expect(formatNumber(120.4)).toBe("120");
    expect(formatNumber(0.5)).toBe("0.5");
    expect(formatNumber(20480)).toBe("20,480");
    expect(formatNumber(Number.NaN)).toBe("NaN");
    expect(formatNumber(-Infinity)).toBe("-Inf");
    expect(formatNumber(1.2345e-5)).toBe("1.23e-5");
  });
});

describe("merging downsampled history with live points", () => {
  // History downsampled into 3 buckets ending at steps 100, 200, 300.
  const history = (): Series =>
    seriesFromWire({
      step: [100, 200, 300],
      value: [1, 2, "NaN"],
      min: [0.5, 2, 1],
      max: [1.5, 2, "Infinity"],
    });

  it("drops the points after a rewind's step, then takes the retrained ones", () => {
    const series = history();
    expect(truncateAfter(series, 300)).toBe(false); // nothing after it
    expect(truncateAfter(series, 150)).toBe(true);
    expect(series.step).toEqual([100]);
    expect([series.wall, series.value, series.min, series.max].map((c) => c.length)).toEqual([1, 1, 1, 1]);
    expect(appendPoint(series, 200, 7)).toBe(true); // the step stored before the rewind, again
    expect(series.value).toEqual([1, 7]);
  });

  it("appends only points newer than the history's last step", () => {
    const series = history();
    expect(appendPoint(series, 250, 9)).toBe(false); // inside the history: already counted
    expect(appendPoint(series, 300, 9)).toBe(false); // the history's last step
    expect(appendPoint(series, 400, 4)).toBe(true);
    expect(appendPoint(series, 400, 5)).toBe(false); // replayed
    expect(series.step).toEqual([100, 200, 300, 400]);
    expect(series.value.slice(0, 2)).toEqual([1, 2]);
    expect(series.value[2]).toBeNaN();
    expect(series.value[3]).toBe(4);
    // A live point is its own bucket: min = max = value.
    expect(series.min[3]).toBe(4);
    expect(series.max[3]).toBe(4);
  });

  it("appends a metrics event to each of its keys, creating new keys", () => {
    const store = new Map<string, Series>([["losses/total", history()]]);
    const event: MetricsEvent = {
      seq: 9,
      type: "metrics",
      time: 0,
      step: 400,
      wall_time: 0,
      values: { "losses/total": 3, "eval/episode_reward": "-Infinity" },
    };
    expect(appendEvent(store, event).sort()).toEqual(["eval/episode_reward", "losses/total"]);
    expect(store.get("eval/episode_reward")?.value).toEqual([-Infinity]);
    expect(appendEvent(store, event)).toEqual([]); // the same event again changes nothing
  });

  it("knows when a series was downsampled", () => {
    expect(isDownsampled(history())).toBe(true);
    const exact = seriesFromWire({ step: [1, 2], value: [1, "NaN"], min: [1, "NaN"], max: [1, "NaN"] });
    expect(isDownsampled(exact)).toBe(false);
  });
});

describe("smoothing", () => {
  it("is a bias-corrected EMA", () => {
    // w = 0.5: s1 = 0.5*1 = 0.5, /(1-0.5) = 1; s2 = 0.25 + 1.5 = 1.75, /(1-0.25) = 2.3333;
    // s3 = 0.875 + 2.5 = 3.375, /(1-0.125) = 3.857142...
    const out = smoothEma([1, 3, 5], 0.5);
    expect(out[0]).toBeCloseTo(1, 12);
    expect(out[1]).toBeCloseTo(7 / 3, 12);
    expect(out[2]).toBeCloseTo(27 / 7, 12);
  });

  it("passes NaN and missing values through without poisoning the average", () => {
    const out = smoothEma([1, Number.NaN, null, 3], 0.5);
    expect(out[0]).toBeCloseTo(1, 12);
    expect(out[1]).toBeNaN();
    expect(out[2]).toBeNull();
    expect(out[3]).toBeCloseTo(7 / 3, 12); // as if the NaN and the null were not there
  });

  it("with weight 0 returns the values unchanged", () => {
    expect(smoothEma([1, 2, 3], 0)).toEqual([1, 2, 3]);
  });
});

describe("plot data", () => {
  it("turns non-finite values into gaps with a visible marker each", () => {
    const series = seriesFromWire({
      step: [10, 20, 30, 40],
      value: [1, "NaN", "Infinity", 2],
      min: [1, "NaN", "Infinity", 2],
      max: [1, "NaN", "Infinity", 2],
    });
    const data = toPlotData(series, plain);
    expect(data.x).toEqual([10, 20, 30, 40]);
    expect(data.line).toEqual([1, null, null, 2]);
    expect(data.markers).toEqual([
      { x: 20, label: "NaN" },
      { x: 30, label: "+Inf" },
    ]);
    expect(data.band).toBeNull();
    expect(nonFinitePoints(series).map((p) => p.step)).toEqual([20, 30]);
  });

  it("keeps the min/max band of downsampled buckets", () => {
    const series = seriesFromWire({ step: [100, 200], value: [1, 2], min: [0, 2], max: [3, 2] });
    const data = toPlotData(series, plain);
    expect(data.band).toEqual({ min: [0, 2], max: [3, 2] });
  });

  it("on a log scale hides values <= 0 and counts them", () => {
    const series = seriesFromWire({
      step: [1, 2, 3],
      value: [-1, 0, 10],
      min: [-1, 0, 10],
      max: [-1, 0, 10],
    });
    const data = toPlotData(series, { ...plain, logScale: true });
    expect(data.line).toEqual([null, null, 10]);
    expect(data.hiddenNonPositive).toBe(2);
  });

  it("draws the smoothed line over the raw values", () => {
    const series = seriesFromWire({ step: [1, 2], value: [1, 3], min: [1, 3], max: [1, 3] });
    const data = toPlotData(series, { ...plain, smoothing: 0.5 });
    expect(data.raw).toEqual([1, 3]);
    expect(data.line[1]).toBeCloseTo(7 / 3, 12);
  });

  it("puts points on a wall-time axis in seconds since the first event", () => {
    const clock = new WallClock();
    clock.record(100, 5000);
    clock.record(300, 5010);
    const series = seriesFromWire({
      step: [50, 100, 200, 300],
      value: [0, 1, 2, 3],
      min: [0, 1, 2, 3],
      max: [0, 1, 2, 3],
    });
    const data = toPlotData(series, { ...plain, xAxis: "wall" }, clock);
    // Step 50 predates the clock's knowledge: left out. Step 200 is interpolated:
    // 5000 + 10 * (200 - 100) / (300 - 100) = 5005, i.e. 5 s after the start.
    expect(data.x).toEqual([0, 5, 10]);
    expect(data.line).toEqual([1, 2, 3]);
    expect(data.withoutTime).toBe(1);
  });
});

describe("wall clock", () => {
  it("ignores steps that do not increase", () => {
    const clock = new WallClock();
    clock.record(10, 1);
    clock.record(10, 2);
    clock.record(5, 3);
    expect(clock.at(10)).toBe(1);
    expect(clock.at(11)).toBeNull();
  });
});

describe("aligning runs for the compare chart", () => {
  it("puts every run on the union of x values, undefined where a run has no point", () => {
    const { x, ys } = alignSeries([
      { x: [0, 10, 20], y: [1, null, 3] },
      { x: [10, 15], y: [7, 8] },
    ]);
    expect(x).toEqual([0, 10, 15, 20]);
    expect(ys[0]).toEqual([1, null, undefined, 3]);
    expect(ys[1]).toEqual([undefined, 7, 8, undefined]);
  });
});
