import type { WireNumber } from "./types";

/** Turns a wire number (a JSON number or "NaN"/"Infinity"/"-Infinity") into a JS number.
 * `null` stays `null` (no value); anything else unexpected becomes NaN, so that it shows. */
export function decodeNumber(value: WireNumber | null | undefined): number | null {
  if (value === null || value === undefined) return null;
  if (typeof value === "number") return value;
  switch (value) {
    case "NaN":
      return Number.NaN;
    case "Infinity":
      return Number.POSITIVE_INFINITY;
    case "-Infinity":
      return Number.NEGATIVE_INFINITY;
    default:
      return Number.NaN;
  }
}

export function decodeNumbers(values: readonly (WireNumber | null)[]): (number | null)[] {
  return values.map(decodeNumber);
}

/** A compact human form: 3 significant digits, thousands separators for large integers. */
export function formatNumber(value: number | null | undefined): string {
  if (value === null || value === undefined) return "–";
  if (Number.isNaN(value)) return "NaN";
  if (!Number.isFinite(value)) return value > 0 ? "+Inf" : "-Inf";
  const abs = Math.abs(value);
  if (Number.isInteger(value) && abs < 1e9) return value.toLocaleString("en-US");
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) return value.toExponential(2);
  if (abs >= 1000) return Math.round(value).toLocaleString("en-US");
  const fixed = value.toPrecision(3);
  return fixed.includes(".") ? fixed.replace(/0+$/, "").replace(/\.$/, "") : fixed;
}

export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB"];
  let size = bytes;
  let unit = 0;
  while (size >= 1024 && unit < units.length - 1) {
    size /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? size : size.toFixed(1)} ${units[unit]}`;
}
