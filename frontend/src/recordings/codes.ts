/** A `/slice`'s one-byte codes: base64 of `units` × `points` bytes, `[units][points]` row
 * by row; byte c ≤ `LEVELS` is the value `min + c * (max - min) / LEVELS`, `NON_FINITE` a
 * NaN or infinite one (server/recording/reads.py's `quantize`). Pure. */

import type { RecordingSlice } from "../api/types";

export const LEVELS = 254;
export const NON_FINITE = 255;

/** The bytes of a base64 text. */
export function decodeBase64(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** The slice's rows, one per unit: each point's level, 0 (`min`) to `LEVELS` (`max`), or
 * NaN for a non-finite value. Levels order as the values do. */
export function sliceLevels(slice: Pick<RecordingSlice, "codes" | "units" | "points">): Float32Array[] {
  const bytes = decodeBase64(slice.codes);
  if (bytes.length !== slice.units * slice.points)
    throw new Error(`a slice of ${slice.units} × ${slice.points} came with ${bytes.length} codes`);
  return Array.from({ length: slice.units }, (_, unit) => {
    const row = new Float32Array(slice.points);
    const offset = unit * slice.points;
    for (let x = 0; x < slice.points; x++) {
      const code = bytes[offset + x] as number;
      row[x] = code === NON_FINITE ? NaN : code;
    }
    return row;
  });
}
