/** Colours of the recordings' drawings: a heatmap's levels (a value's place in its
 * population's range, `codes.ts`) and the time colour of a projection's points. Pure. */

import { LEVELS } from "./codes";

type Rgb = readonly [number, number, number];

/** A perceptually ordered map (dark blue, teal, green, yellow), sampled at even steps. */
const STOPS: readonly Rgb[] = [
  [68, 1, 84],
  [59, 82, 139],
  [33, 145, 140],
  [94, 201, 98],
  [253, 231, 37],
];

/** The map's colour at `f` in 0..1 (linear between stops); grey for NaN. */
export function colourAt(f: number): Rgb {
  if (Number.isNaN(f)) return [128, 128, 128];
  const x = Math.min(1, Math.max(0, f)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(x));
  const t = x - i;
  const a = STOPS[i] as Rgb;
  const b = STOPS[i + 1] as Rgb;
  return [0, 1, 2].map((c) =>
    Math.round((a[c] as number) + ((b[c] as number) - (a[c] as number)) * t),
  ) as unknown as Rgb;
}

export function css([r, g, b]: Rgb): string {
  return `rgb(${r}, ${g}, ${b})`;
}

/** A colour per level, `0 .. LEVELS` on the map, and grey for NaN; a `flat` population
 * (min = max) is all the map's middle. */
function levelPalette(flat: boolean): Uint8Array {
  const palette = new Uint8Array((LEVELS + 2) * 3);
  for (let level = 0; level <= LEVELS + 1; level++) {
    const f = level > LEVELS ? NaN : flat ? 0.5 : level / LEVELS;
    palette.set(colourAt(f), level * 3);
  }
  return palette;
}

/** The RGBA pixels of a heatmap, `rows` (in drawing order, each `[points]` of levels,
 * `codes.ts`'s `sliceLevels`) top to bottom. */
export function heatmapPixels(
  rows: readonly ArrayLike<number>[],
  flat = false,
): Uint8ClampedArray<ArrayBuffer> {
  const width = rows[0]?.length ?? 0;
  const palette = levelPalette(flat);
  const pixels = new Uint8ClampedArray(new ArrayBuffer(rows.length * width * 4));
  rows.forEach((row, y) => {
    for (let x = 0; x < width; x++) {
      const level = row[x] as number;
      const p = (Number.isNaN(level) ? LEVELS + 1 : Math.min(LEVELS, Math.max(0, Math.round(level)))) * 3;
      const o = (y * width + x) * 4;
      pixels[o] = palette[p] as number;
      pixels[o + 1] = palette[p + 1] as number;
      pixels[o + 2] = palette[p + 2] as number;
      pixels[o + 3] = 255;
    }
  });
  return pixels;
}
