import { describe, expect, it } from "vitest";

import {
  MIN_SPAN,
  describeWindow,
  isWhole,
  parseWindow,
  wholeEpisode,
  windowBetween,
} from "../src/recordings/timeWindow";

describe("a recording's time window", () => {
  it("is typed as inclusive steps inside the episode", () => {
    expect(parseWindow("10", "19", 60)).toEqual({ t0: 10, t1: 20 });
    expect(parseWindow(" 0", "59 ", 60)).toEqual({ t0: 0, t1: 60 });
    expect(parseWindow("", "19", 60)).toEqual({ error: "whole step numbers, please" });
    expect(parseWindow("1.5", "19", 60)).toEqual({ error: "whole step numbers, please" });
    expect(parseWindow("-1", "19", 60)).toEqual({ error: "steps run from 0 to 59" });
    expect(parseWindow("10", "60", 60)).toEqual({ error: "steps run from 0 to 59" });
    expect(parseWindow("10", "10", 60)).toEqual({ error: '"to" must be at least 1 after "from"' });
    expect(parseWindow("12", "10", 60)).toHaveProperty("error");
  });

  it("is dragged either way, at least MIN_SPAN wide, inside the episode", () => {
    expect(windowBetween(30, 10, 60)).toEqual({ t0: 10, t1: 31 });
    expect(windowBetween(10, 30, 60)).toEqual({ t0: 10, t1: 31 });
    expect(windowBetween(59, 59, 60)).toEqual({ t0: 60 - MIN_SPAN, t1: 60 });
    expect(windowBetween(0, 0, 60)).toEqual({ t0: 0, t1: MIN_SPAN });
    expect(windowBetween(-5, 99, 60)).toEqual(wholeEpisode(60));
    expect(windowBetween(0, 0, 1)).toEqual({ t0: 0, t1: 1 }); // a one-step episode
  });

  it("says what it shows", () => {
    expect(isWhole(wholeEpisode(60), 60)).toBe(true);
    expect(isWhole({ t0: 1, t1: 60 }, 60)).toBe(false);
    expect(describeWindow(wholeEpisode(60), 60)).toBe("all 60 steps");
    expect(describeWindow({ t0: 10, t1: 20 }, 60)).toBe("steps 10–19 of 60");
  });
});
