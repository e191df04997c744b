/** Colours of the recordings' drawings: a value scaled to its population's range, and the
 * time colour of a projection's points. Pure. */

type Rgb = readonly [number, number, number];

/** A perceptually ordered map (dark blue, teal, green, yellow), sampled at even steps. */
const STOPS: readonly Rgb[] = [
  [68, 1, 84],
  [59, 82, 139],
  [33, 145, 140],
  [94, 201, 98],
  [253, 231, 37],
];

/** `value` on `[min, max]` as 0..1 (clamped); 0.5 for a flat range; NaN for a non-finite
 * value. */
export function scaled(value: number, min: number, max: number): number {
  if (!Number.isFinite(value)) return NaN;
  if (!(max > min)) return 0.5;
  return Math.min(1, Math.max(0, (value - min) / (max - min)));
}

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

/** The RGBA pixels of a heatmap, `rows` (in drawing order, each `[points]`) top to bottom,
 * scaled to `[min, max]`. */
export function heatmapPixels(
  rows: readonly (readonly number[])[],
  min: number,
  max: number,
): Uint8ClampedArray<ArrayBuffer> {
  const width = rows[0]?.length ?? 0;
  const pixels = new Uint8ClampedArray(new ArrayBuffer(rows.length * width * 4));
  rows.forEach((row, y) => {
    for (let x = 0; x < width; x++) {
      const [r, g, b] = colourAt(scaled(row[x] as number, min, max));
      const o = (y * width + x) * 4;
      pixels[o] = r;
      pixels[o + 1] = g;
      pixels[o + 2] = b;
      pixels[o + 3] = 255;
    }
  });
  return pixels;
}
