import { describe, expect, it } from "vitest";

import { formatWallTime, formatX, WALL_INCREMENTS, wallOrigin, yAxisSize } from "../src/charts/axes";
import { familyId, quantileFamilies, quantileLayout } from "../src/charts/quantiles";
import { phaseText } from "../src/views/runPhase";

describe("the wall-time axis", () => {
  it("writes every tick in one format, short spans included", () => {
    // Before: 7.5 read "7.5 s" and 10 read "0:10" on the same axis.
    expect([0, 5, 10, 15].map(formatWallTime)).toEqual(["0:00", "0:05", "0:10", "0:15"]);
    expect(formatX("wall", 7)).toBe("0:07");
    expect(formatX("wall", 3725)).toBe("1:02:05"); // 1 h 2 min 5 s
    expect(formatX("step", 20480)).toBe("20,480");
  });
  it("puts ticks at whole seconds only, so none needs a fraction", () => {
    expect(WALL_INCREMENTS.every((step) => Number.isInteger(step) && step >= 1)).toBe(true);
    expect(WALL_INCREMENTS).toContain(60);
  });
  it("starts at the run's start, before its first metric", () => {
    // Started at 1000 s, compiled for 40 s: the first metric at 1040 is drawn at 0:40.
    expect(wallOrigin(1000, 1040, 1041)).toBe(1000);
    expect(wallOrigin(null, 1040, 1038)).toBe(1038); // unknown start: the earliest known
    expect(wallOrigin(undefined, null, null)).toBe(0);
    // A requeued run's started_at is its second attempt's: the first attempt's metrics
    // (from 900) stay on the axis.
    expect(wallOrigin(1000, 900, 1041)).toBe(900);
  });
});

describe("the y axis's width", () => {
  const sevenPx = (label: string) => 7 * label.length;
  it("fits the widest tick label", () => {
    // "1,250,000" is 9 characters = 63 px, + 15 px of tick and gap + 6 px margin = 84 px.
    expect(yAxisSize(["0", "500,000", "1,250,000"], sevenPx)).toBe(84);
    // Before, every axis was 60 px: a 9-character label (63 px) did not fit.
    expect(yAxisSize(["1,250,000"], sevenPx)).toBeGreaterThan(60);
  });
  it("keeps a minimum for short labels and no labels", () => {
    expect(yAxisSize(["1", "2"], sevenPx)).toBe(36);
    expect(yAxisSize([], sevenPx)).toBe(36);
  });
});

describe("percentile metrics", () => {
  const keys = [
    "eval/episode_length",
    "eval/episode_reward",
    "eval/episode_reward_p0",
    "eval/episode_reward_p100",
    "eval/episode_reward_p25",
    "eval/episode_reward_p50",
    "eval/episode_reward_p75",
    "losses/total",
    "other/lonely_p50",
  ];
  it("group into one family per metric, the rest left as they are", () => {
    const { families, others } = quantileFamilies(keys);
    expect(families).toEqual([
      {
        base: "eval/episode_reward",
        members: [
          [0, "eval/episode_reward_p0"],
          [25, "eval/episode_reward_p25"],
          [50, "eval/episode_reward_p50"],
          [75, "eval/episode_reward_p75"],
          [100, "eval/episode_reward_p100"],
        ],
      },
    ]);
    // A single percentile of a metric is an ordinary chart.
    expect(others).toEqual([
      "eval/episode_length",
      "eval/episode_reward",
      "losses/total",
      "other/lonely_p50",
    ]);
    expect(familyId("eval/episode_reward")).toBe("eval/episode_reward_p*");
  });
  it("draw the median as the line and symmetric pairs as bands, inner ones darker", () => {
    const [family] = quantileFamilies(keys).families;
    const layout = quantileLayout(family!);
    expect(layout.median).toBe("eval/episode_reward_p50");
    expect(layout.bands.map((b) => [b.label, b.lower, b.upper])).toEqual([
      ["p0–p100", "eval/episode_reward_p0", "eval/episode_reward_p100"],
      ["p25–p75", "eval/episode_reward_p25", "eval/episode_reward_p75"],
    ]);
    expect(layout.bands[1]!.opacity).toBeGreaterThan(layout.bands[0]!.opacity);
  });
  it("leave a percentile without its mirror out of the bands", () => {
    const layout = quantileLayout({
      base: "r",
      members: [
        [10, "r_p10"],
        [50, "r_p50"],
        [75, "r_p75"],
      ],
    });
    expect(layout.bands).toEqual([]);
    expect(layout.median).toBe("r_p50");
  });
});

describe("the run's phase", () => {
  it("says what the run does and for how long", () => {
    expect(phaseText("compiling", 1000, 1042.7)).toBe("Compiling… 42 s");
    expect(phaseText("evaluating", 1000, 1125)).toBe("Evaluating… 2:05");
    expect(phaseText("checkpointing", 1000, 999)).toBe("Writing a checkpoint… 0 s"); // clock skew
  });
});
