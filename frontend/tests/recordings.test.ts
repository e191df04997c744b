import { describe, expect, it } from "vitest";

import { decodeBase64, LEVELS, NON_FINITE, sliceLevels } from "../src/recordings/codes";
import { colourAt, heatmapPixels } from "../src/recordings/colour";
import { Cursor, frameAt, pointOfStep, stepAtX, timeOfFrame, xOfStep } from "../src/recordings/cursor";
import { peakPoints, unitOrder } from "../src/recordings/ordering";

describe("the order of a heatmap's units", () => {
  // [units][points]: unit 0 peaks at point 2, unit 1 at 0, unit 2 at 1.
  const values = [
    [0, 1, 5, 2],
    [9, 1, 0, 0],
    [0, 3, 1, 1],
  ];
  it("is the index order by default", () => {
    expect(unitOrder("index", values)).toEqual([0, 1, 2]);
  });
  it("sorts by the point of each unit's peak, earliest first", () => {
    expect(peakPoints(values)).toEqual([2, 0, 1]);
    expect(unitOrder("peak", values)).toEqual([1, 2, 0]);
  });
  it("takes the first of equal peaks, skips NaN and puts an all-NaN unit last", () => {
    expect(
      peakPoints([
        [1, 3, 3],
        [NaN, 2, NaN],
        [NaN, NaN],
      ]),
    ).toEqual([1, 1, Infinity]);
    // Units 0 and 1 both peak at point 1: they keep their index order.
    expect(
      unitOrder("peak", [
        [1, 3, 3],
        [NaN, 2, NaN],
        [NaN, NaN],
      ]),
    ).toEqual([0, 1, 2]);
  });
  it("sorts by the first component's loading, largest first", () => {
    expect(unitOrder("pc1", values, [0.1, -0.7, 0.7])).toEqual([2, 0, 1]);
  });
  it("falls back to the index order without a loading per unit", () => {
    expect(unitOrder("pc1", values, null)).toEqual([0, 1, 2]);
    expect(unitOrder("pc1", values, [1, 2])).toEqual([0, 1, 2]);
  });
});

describe("the colour scale", () => {
  it("runs from dark to bright, through the stops", () => {
    expect(colourAt(0)).toEqual([68, 1, 84]);
    expect(colourAt(1)).toEqual([253, 231, 37]);
    // Halfway is the middle stop (index 2 of 5).
    expect(colourAt(0.5)).toEqual([33, 145, 140]);
    // An eighth is halfway between stops 0 and 1: (68+59)/2 = 63.5 -> 64, (1+82)/2 = 41.5 -> 42.
    expect(colourAt(0.125)).toEqual([64, 42, 112]);
    expect(colourAt(NaN)).toEqual([128, 128, 128]);
  });
  it("fills the heatmap's pixels row by row, a level per colour", () => {
    const pixels = heatmapPixels([
      [0, LEVELS],
      [LEVELS / 2, NaN],
    ]);
    expect(pixels.length).toBe(2 * 2 * 4);
    expect(Array.from(pixels.slice(0, 4))).toEqual([68, 1, 84, 255]);
    expect(Array.from(pixels.slice(4, 8))).toEqual([253, 231, 37, 255]);
    // Level 127 of 254 is halfway: the middle stop.
    expect(Array.from(pixels.slice(8, 12))).toEqual([33, 145, 140, 255]);
    expect(Array.from(pixels.slice(12, 16))).toEqual([128, 128, 128, 255]);
  });
  it("paints a flat population in the middle of the map", () => {
    expect(Array.from(heatmapPixels([[0]], true))).toEqual([33, 145, 140, 255]);
  });
});

describe("a slice's one-byte codes", () => {
  it("decodes base64", () => {
    // "AP8K" is the bytes 0x00 0xff 0x0a.
    expect(Array.from(decodeBase64("AP8K"))).toEqual([0, 255, 10]);
  });
  it("reads [units][points] row by row, a non-finite code as NaN", () => {
    // 2 units x 3 points: bytes 0 1 2 | 254 255 7, base64 "AAEC/v8H".
    const rows = sliceLevels({ codes: "AAEC/v8H", units: 2, points: 3 });
    expect(rows.map((r) => Array.from(r))).toEqual([
      [0, 1, 2],
      [LEVELS, NaN, 7],
    ]);
    expect(NON_FINITE).toBe(255);
    expect(() => sliceLevels({ codes: "AAEC", units: 2, points: 3 })).toThrow(/2 × 3/);
  });
});

describe("the time cursor's mappings", () => {
  it("maps a video time to its frame and back", () => {
    // 50 fps: 0.1 s is frame 5; frame 5 is shown from 0.1 s to 0.12 s, its middle 0.11 s.
    expect(frameAt(0.1, 50, 100)).toBe(5);
    expect(timeOfFrame(5, 50)).toBeCloseTo(0.11);
    expect(frameAt(timeOfFrame(5, 50), 50, 100)).toBe(5);
    expect(frameAt(-1, 50, 100)).toBe(0);
    expect(frameAt(99, 50, 100)).toBe(99); // past the end: the last frame
  });
  it("maps a drawing's x to a step and back", () => {
    // 200 px over steps [0, 100): 2 px per step; x = 51 is in step 25, whose middle is 51.
    expect(stepAtX(51, 200, 0, 100)).toBe(25);
    expect(xOfStep(25, 200, 0, 100)).toBe(51);
    expect(stepAtX(-5, 200, 0, 100)).toBe(0);
    expect(stepAtX(200, 200, 0, 100)).toBe(99);
    expect(stepAtX(10, 100, 50, 60)).toBe(51); // a window starting at step 50
  });
  it("finds the downsampled point that holds a step", () => {
    const steps = [0, 3, 6, 9];
    expect(pointOfStep(steps, 0)).toBe(0);
    expect(pointOfStep(steps, 5)).toBe(1);
    expect(pointOfStep(steps, 6)).toBe(2);
    expect(pointOfStep(steps, 100)).toBe(3);
    expect(pointOfStep([], 3)).toBe(0);
  });
});

describe("the shared cursor", () => {
  it("tells every listener the new step and who moved it", () => {
    const cursor = new Cursor(0, 10);
    const seen: [number, unknown][] = [];
    cursor.subscribe((step, source) => seen.push([step, source]));
    cursor.set(4, "video");
    cursor.set(4, "heatmap"); // the same step: nothing to tell (a seeked echo ends here)
    cursor.set(42, "slider"); // clamped to the last step
    expect(seen).toEqual([
      [4, "video"],
      [9, "slider"],
    ]);
    expect(cursor.step).toBe(9);
  });
  it("stops telling a listener that unsubscribed", () => {
    const cursor = new Cursor(0, 10);
    let calls = 0;
    const stop = cursor.subscribe(() => (calls += 1));
    cursor.set(1);
    stop();
    cursor.set(2);
    expect(calls).toBe(1);
  });
});
