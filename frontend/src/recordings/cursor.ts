/** The time cursor that the video, the step slider, every heatmap and every projection
 * share, and the mappings between a step and a video time or a drawing's x. Pure (no DOM). */

/** The frame (= step) shown at `seconds` of a video of `fps` frames per second, clamped to
 * `0 .. frames - 1`. */
export function frameAt(seconds: number, fps: number, frames: number): number {
  const frame = Math.floor(seconds * fps + 1e-6);
  return Math.max(0, Math.min(frames - 1, frame));
}

/** The video time that shows `frame`: its middle, so that rounding never lands on a
 * neighbour. */
export function timeOfFrame(frame: number, fps: number): number {
  return (frame + 0.5) / fps;
}

/** The step under `x` of a drawing `width` wide spanning steps `[t0, t1)`, clamped. */
export function stepAtX(x: number, width: number, t0: number, t1: number): number {
  if (width <= 0 || t1 <= t0) return t0;
  const step = t0 + Math.floor((x / width) * (t1 - t0));
  return Math.max(t0, Math.min(t1 - 1, step));
}

/** The x of the middle of `step` on a drawing `width` wide spanning steps `[t0, t1)`. */
export function xOfStep(step: number, width: number, t0: number, t1: number): number {
  if (t1 <= t0) return 0;
  return ((step - t0 + 0.5) / (t1 - t0)) * width;
}

/** The index of the point (of first steps `steps`, ascending) that holds `step`: the last
 * one starting at or before it (0 before the first). */
export function pointOfStep(steps: readonly number[], step: number): number {
  let lo = 0;
  let hi = steps.length - 1;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if ((steps[mid] as number) <= step) lo = mid;
    else hi = mid - 1;
  }
  return Math.max(0, lo);
}

export type CursorListener = (step: number, source: unknown) => void;

/** The shared step: `set` tells every listener but a no-op (same step) tells none, so that
 * a listener that echoes the step back (a video's `seeked`) ends the loop. */
export class Cursor {
  private listeners = new Set<CursorListener>();

  constructor(
    private current: number,
    readonly length: number,
  ) {}

  get step(): number {
    return this.current;
  }

  /** Moves to `step` (clamped to the recording); `source` is passed to the listeners so
   * that one can skip its own moves. */
  set(step: number, source: unknown = null): void {
    const next = Math.max(0, Math.min(this.length - 1, Math.round(step)));
    if (next === this.current) return;
    this.current = next;
    this.listeners.forEach((listener) => listener(next, source));
  }

  subscribe(listener: CursorListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
