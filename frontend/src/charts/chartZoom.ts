/**
 * The x range of a chart under keyboard and pinch zoom, as pure functions of the current
 * view and the data's bounds: zoom in/out around a point, pan, and the key bindings
 * (`+`/`=` in, `-` out, arrows pan, `0`/Escape reset).
 */

export interface Range {
  min: number;
  max: number;
}

export const ZOOM_STEP = 0.5;
export const PAN_STEP = 0.2;
/** The narrowest view, as a fraction of the data's range. */
const MIN_FRACTION = 1e-4;

/** The view scaled by `factor` (< 1 zooms in) around `center`, within `bounds`. */
export function zoomBy(
  view: Range,
  bounds: Range,
  factor: number,
  center = (view.min + view.max) / 2,
): Range {
  const full = bounds.max - bounds.min;
  if (!(full > 0)) return { ...bounds };
  const width = Math.min(full, Math.max(full * MIN_FRACTION, (view.max - view.min) * factor));
  const share = view.max > view.min ? (center - view.min) / (view.max - view.min) : 0.5;
  const min = center - width * Math.min(1, Math.max(0, share));
  return clamp({ min, max: min + width }, bounds);
}

/** The view moved by `fraction` of its width (negative: left), within `bounds`. */
export function panBy(view: Range, bounds: Range, fraction: number): Range {
  const shift = (view.max - view.min) * fraction;
  return clamp({ min: view.min + shift, max: view.max + shift }, bounds);
}

function clamp(view: Range, bounds: Range): Range {
  const width = Math.min(view.max - view.min, bounds.max - bounds.min);
  let min = Math.max(bounds.min, view.min);
  if (min + width > bounds.max) min = bounds.max - width;
  return { min, max: min + width };
}

/** What a key does to the view: a new range, "reset", or null (not a zoom key). */
export function keyZoom(key: string, view: Range, bounds: Range): Range | "reset" | null {
  switch (key) {
    case "+":
    case "=":
      return zoomBy(view, bounds, ZOOM_STEP);
    case "-":
    case "_":
      return zoomBy(view, bounds, 1 / ZOOM_STEP);
    case "ArrowLeft":
      return panBy(view, bounds, -PAN_STEP);
    case "ArrowRight":
      return panBy(view, bounds, PAN_STEP);
    case "0":
    case "Escape":
      return "reset";
    default:
      return null;
  }
}

/** The view after a pinch: the fingers were `before` apart and are `after` apart, around
 * x value `center`. */
export function pinchZoom(view: Range, bounds: Range, before: number, after: number, center: number): Range {
  if (!(before > 0) || !(after > 0)) return view;
  return zoomBy(view, bounds, before / after, center);
}
