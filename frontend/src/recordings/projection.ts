/** One population's trajectory on its first two principal components (the server's PCA),
 * coloured by time, with the shared cursor as a ring; a click moves the cursor to the
 * nearest point's step. Drawn on a canvas. */

import type { RecordingPca } from "../api/types";
import { h } from "../dom";
import { colourAt, css } from "./colour";
import { pointOfStep, type Cursor } from "./cursor";

const SIZE = 220;
const PAD = 10;
const CURSOR_COLOUR = "#ff9800";

/** The map from PC space to a `size` square with `pad` around: one scale for both axes
 * (distances stay true), centred. */
export function projectionFrame(
  points: readonly (readonly number[])[],
  size: number,
  pad: number,
): (p: readonly number[]) => [number, number] {
  const xs = points.map((p) => p[0] ?? 0);
  const ys = points.map((p) => p[1] ?? 0);
  const [x0, x1] = [Math.min(...xs, 0), Math.max(...xs, 0)];
  const [y0, y1] = [Math.min(...ys, 0), Math.max(...ys, 0)];
  const span = Math.max(x1 - x0, y1 - y0) || 1;
  const scale = (size - 2 * pad) / span;
  const cx = (x0 + x1) / 2;
  const cy = (y0 + y1) / 2;
  return (p) => [size / 2 + ((p[0] ?? 0) - cx) * scale, size / 2 - ((p[1] ?? 0) - cy) * scale];
}

export class Projection {
  readonly element: HTMLElement;
  private readonly canvas: HTMLCanvasElement;
  private readonly stop: () => void;
  private readonly place: (p: readonly number[]) => [number, number];

  constructor(
    private readonly pca: RecordingPca,
    private readonly cursor: Cursor,
  ) {
    this.canvas = h("canvas", {
      class: "rec-projection",
      role: "img",
      "data-key": pca.key,
      "aria-label": `${pca.key} on its first two principal components, coloured by time`,
    });
    const [a = 0, b = 0] = pca.explained_variance;
    this.element = h(
      "figure",
      { class: "rec-projection-figure" },
      this.canvas,
      h(
        "figcaption",
        { class: "muted" },
        `PC1 ${(a * 100).toFixed(0)}% · PC2 ${(b * 100).toFixed(0)}% of variance`,
      ),
    );
    this.place = projectionFrame(pca.points, SIZE, PAD);
    this.stop = cursor.subscribe(() => this.draw());
    this.canvas.addEventListener("click", (event) => {
      const box = this.canvas.getBoundingClientRect();
      const x = ((event.clientX - box.left) / box.width) * SIZE;
      const y = ((event.clientY - box.top) / box.height) * SIZE;
      let best = 0;
      let bestDistance = Infinity;
      pca.points.forEach((p, i) => {
        const [px, py] = this.place(p);
        const d = (px - x) ** 2 + (py - y) ** 2;
        if (d < bestDistance) [best, bestDistance] = [i, d];
      });
      this.cursor.set(pca.steps[best] ?? 0, this);
    });
    this.draw();
  }

  draw(): void {
    const { canvas, pca } = this;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = SIZE * ratio;
    canvas.height = SIZE * ratio;
    const at = pointOfStep(pca.steps, this.cursor.step);
    canvas.dataset.cursorPoint = String(at);
    const context = canvas.getContext("2d");
    if (!context) return;
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.clearRect(0, 0, SIZE, SIZE);
    const n = pca.points.length;
    const colour = (i: number): string => css(colourAt(n > 1 ? i / (n - 1) : 0));
    context.lineWidth = 1.5;
    for (let i = 1; i < n; i++) {
      const [x0, y0] = this.place(pca.points[i - 1] as number[]);
      const [x1, y1] = this.place(pca.points[i] as number[]);
      context.strokeStyle = colour(i);
      context.beginPath();
      context.moveTo(x0, y0);
      context.lineTo(x1, y1);
      context.stroke();
    }
    const point = pca.points[at];
    if (!point) return;
    const [x, y] = this.place(point);
    context.strokeStyle = CURSOR_COLOUR;
    context.lineWidth = 2.5;
    context.beginPath();
    context.arc(x, y, 5, 0, 2 * Math.PI);
    context.stroke();
  }

  destroy(): void {
    this.stop();
  }
}
