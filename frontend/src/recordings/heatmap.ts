/** One population's heatmap: units (rows, in a chosen order) × time (columns, the steps
 * of its slice), colour scaled to the population's range, episode ends marked, and the
 * shared time cursor; a click or drag moves the cursor, as do the arrow keys; a drag with
 * Shift held selects steps to zoom into (`onWindow`). Drawn on a canvas. */

import type { RecordingSlice } from "../api/types";
import { h } from "../dom";
import { sliceLevels } from "./codes";
import { heatmapPixels } from "./colour";
import { stepAtX, xOfStep, type Cursor } from "./cursor";
import { unitOrder, type UnitOrder } from "./ordering";

const CURSOR_COLOUR = "#ff9800";
const DONE_COLOUR = "rgba(255, 255, 255, 0.85)";
const SELECTION_COLOUR = "rgba(255, 152, 0, 0.3)";

/** The drawing's height in CSS pixels: 2 px per unit, between 64 and 240. */
export function heatmapHeight(units: number): number {
  return Math.max(64, Math.min(240, units * 2));
}

export class Heatmap {
  readonly element: HTMLElement;
  private readonly canvas: HTMLCanvasElement;
  private readonly image = document.createElement("canvas");
  /** `[units][points]` levels, 0 (the slice's min) to 254 (its max); NaN: not finite. */
  private readonly levels: Float32Array[];
  private readonly stop: () => void;
  private readonly resize: ResizeObserver;
  private dragging = false;
  /** The steps a Shift-drag went from and to, while it goes on. */
  private selection: [number, number] | null = null;

  constructor(
    private readonly slice: RecordingSlice,
    private readonly cursor: Cursor,
    order: UnitOrder,
    pc1: readonly number[] | null,
    private readonly onWindow: ((from: number, to: number) => void) | null = null,
  ) {
    this.levels = sliceLevels(slice);
    const units = slice.units;
    this.canvas = h("canvas", {
      class: "rec-heatmap",
      tabindex: 0,
      role: "slider",
      "aria-label": `${slice.key}: step`,
      "aria-valuemin": 0,
      "aria-valuemax": cursor.length - 1,
      "data-key": slice.key,
      "data-dones": slice.dones.filter(Boolean).length,
      "data-t0": slice.t0,
      "data-t1": slice.t1,
      style: `height: ${heatmapHeight(units)}px`,
    });
    this.element = this.canvas;
    this.setOrder(order, pc1);
    this.stop = cursor.subscribe(() => this.draw());
    this.resize = new ResizeObserver(() => this.draw());
    this.resize.observe(this.canvas);
    this.canvas.addEventListener("pointerdown", (event) => {
      this.dragging = true;
      this.canvas.setPointerCapture?.(event.pointerId);
      if (event.shiftKey && this.onWindow) {
        const step = this.stepAt(event);
        this.selection = [step, step];
        this.draw();
      } else this.seek(event);
    });
    this.canvas.addEventListener("pointermove", (event) => {
      if (!this.dragging) return;
      if (this.selection) {
        this.selection = [this.selection[0], this.stepAt(event)];
        this.draw();
      } else this.seek(event);
    });
    const end = (): void => {
      this.dragging = false;
      const selected = this.selection;
      this.selection = null;
      if (selected && this.onWindow) this.onWindow(selected[0], selected[1]);
    };
    this.canvas.addEventListener("pointerup", end);
    this.canvas.addEventListener("pointercancel", () => {
      this.dragging = false;
      this.selection = null;
      this.draw();
    });
    this.canvas.addEventListener("keydown", (event) => {
      const by = event.key === "ArrowRight" ? 1 : event.key === "ArrowLeft" ? -1 : 0;
      if (!by) return;
      event.preventDefault();
      this.cursor.set(this.cursor.step + by * (event.shiftKey ? 10 : 1), this);
    });
  }

  /** Re-sorts the rows (`pc1`: the units' loadings on the first component). */
  setOrder(order: UnitOrder, pc1: readonly number[] | null): void {
    const { levels } = this;
    const rows = unitOrder(order, levels, pc1).map((unit) => levels[unit] as Float32Array);
    const width = rows[0]?.length ?? 0;
    this.image.width = Math.max(1, width);
    this.image.height = Math.max(1, rows.length);
    if (width && rows.length) {
      const pixels = heatmapPixels(rows, !(this.slice.max > this.slice.min));
      this.image.getContext("2d")?.putImageData(new ImageData(pixels, width, rows.length), 0, 0);
    }
    this.canvas.dataset.order = order;
    this.draw();
  }

  private stepAt(event: PointerEvent): number {
    const box = this.canvas.getBoundingClientRect();
    return stepAtX(event.clientX - box.left, box.width, this.slice.t0, this.slice.t1);
  }

  private seek(event: PointerEvent): void {
    this.cursor.set(this.stepAt(event), this);
  }

  draw(): void {
    const { canvas, slice } = this;
    const ratio = window.devicePixelRatio || 1;
    const width = Math.round(canvas.clientWidth * ratio);
    const height = Math.round(canvas.clientHeight * ratio);
    const step = this.cursor.step;
    canvas.setAttribute("aria-valuenow", String(step));
    canvas.dataset.cursor = String(step);
    if (!width || !height) return;
    if (canvas.width !== width) canvas.width = width;
    if (canvas.height !== height) canvas.height = height;
    const context = canvas.getContext("2d");
    if (!context) return;
    const span = slice.t1 - slice.t0;
    context.imageSmoothingEnabled = false;
    context.clearRect(0, 0, width, height);
    // Each column is `stride` steps (the last may be shorter, so it overhangs the edge).
    context.drawImage(this.image, 0, 0, (width * slice.steps.length * slice.stride) / span, height);
    context.strokeStyle = DONE_COLOUR;
    context.lineWidth = Math.max(1, ratio);
    context.setLineDash([4 * ratio, 3 * ratio]);
    context.beginPath();
    slice.dones.forEach((done, i) => {
      if (!done) return;
      const x = Math.round(((slice.steps[i] as number) - slice.t0) * (width / span)) + 0.5;
      context.moveTo(x, 0);
      context.lineTo(x, height);
    });
    context.stroke();
    context.setLineDash([]);
    canvas.dataset.painted = "true";
    if (this.selection) {
      const [a, b] = this.selection;
      const left = (Math.min(a, b) - slice.t0) * (width / span);
      context.fillStyle = SELECTION_COLOUR;
      context.fillRect(left, 0, (Math.abs(b - a) + 1) * (width / span), height);
    }
    if (step >= slice.t0 && step < slice.t1) {
      const x = xOfStep(step, width, slice.t0, slice.t1);
      context.strokeStyle = CURSOR_COLOUR;
      context.lineWidth = 2 * ratio;
      context.beginPath();
      context.moveTo(x, 0);
      context.lineTo(x, height);
      context.stroke();
    }
  }

  destroy(): void {
    this.stop();
    this.resize.disconnect();
  }
}
