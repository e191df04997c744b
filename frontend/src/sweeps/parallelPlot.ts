/**
 * The parallel-coordinates plot of a sweep (SVG): an axis per parameter and one for the
 * objective, a line per trial coloured by its objective (pruned and failed trials grey,
 * dashed). Dragging along an axis brushes a range of it; a click on an axis without
 * dragging clears that axis's brush. Focused, an axis takes the keyboard: ArrowUp/ArrowDown
 * move its brush (a fifth of the axis, started at the middle), Delete or Escape clears it.
 */

import type { Trial } from "../api/types";
import {
  brushBetween,
  filterByBrushes,
  OBJECTIVE,
  ticks,
  toUnit,
  trialValue,
  type Axis,
  type Brush,
} from "./parallelAxes";

const SVG = "http://www.w3.org/2000/svg";
const HEIGHT = 280;
const PAD = { top: 42, bottom: 24, left: 46, right: 46 };
const KEY_BRUSH = 0.2;

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attributes: Record<string, string | number> = {},
  text?: string,
): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

/** Objective colour: low (blue) to high (orange) along the objective axis. */
function colour(unit: number): string {
  const hue = 220 - 190 * unit;
  return `hsl(${hue.toFixed(0)} 70% 45%)`;
}

function ellipsize(text: string, chars: number): string {
  return text.length <= chars ? text : `${text.slice(0, chars - 1)}…`;
}

export class ParallelPlot {
  readonly element: HTMLElement;
  private readonly svgElement: SVGSVGElement;
  private axes: Axis[] = [];
  private trials: Trial[] = [];
  private readonly brushes = new Map<string, Brush>();
  private drag: { key: string; from: number } | null = null;
  private readonly resizeObserver: ResizeObserver;

  constructor(private readonly onBrush: (brushes: ReadonlyMap<string, Brush>) => void) {
    this.svgElement = svg("svg", { class: "parallel-plot", role: "group", height: HEIGHT });
    this.svgElement.setAttribute(
      "aria-label",
      "Parallel coordinates of the trials' parameters and objective",
    );
    this.element = document.createElement("div");
    this.element.className = "parallel-box";
    this.element.append(this.svgElement);
    this.resizeObserver = new ResizeObserver(() => this.draw());
    this.resizeObserver.observe(this.element);
    window.addEventListener("pointermove", this.onMove);
    window.addEventListener("pointerup", this.onUp);
  }

  get activeBrushes(): ReadonlyMap<string, Brush> {
    return this.brushes;
  }

  update(axes: Axis[], trials: Trial[]): void {
    this.axes = axes;
    this.trials = trials;
    for (const key of [...this.brushes.keys()])
      if (!axes.some((a) => a.key === key)) this.brushes.delete(key);
    this.draw();
  }

  clearBrushes(): void {
    this.brushes.clear();
    this.draw();
    this.onBrush(this.brushes);
  }

  destroy(): void {
    this.resizeObserver.disconnect();
    window.removeEventListener("pointermove", this.onMove);
    window.removeEventListener("pointerup", this.onUp);
  }

  private width(): number {
    return Math.max(280, Math.floor(this.element.clientWidth || 600));
  }

  private x(index: number): number {
    const inner = this.width() - PAD.left - PAD.right;
    return this.axes.length < 2 ? PAD.left + inner / 2 : PAD.left + (inner * index) / (this.axes.length - 1);
  }

  private spacing(): number {
    return this.axes.length < 2 ? Infinity : (this.width() - PAD.left - PAD.right) / (this.axes.length - 1);
  }

  /** The characters an axis title has room for (alternate rows give the middle ones two
   * spacings; the end ones, anchored at their axis, about one). */
  private titleRoom(index: number): number {
    const spacing = this.spacing();
    if (!Number.isFinite(spacing)) return 80;
    const alternate = spacing < 170;
    const middle = index > 0 && index < this.axes.length - 1;
    const px = middle && alternate && index % 2 ? 2 * spacing : spacing;
    return Math.max(6, Math.floor((px - 8) / 7.5));
  }

  private y(unit: number): number {
    return PAD.top + (1 - unit) * (HEIGHT - PAD.top - PAD.bottom);
  }

  private unitAt(clientY: number): number {
    const top = this.svgElement.getBoundingClientRect().top;
    return 1 - (clientY - top - PAD.top) / (HEIGHT - PAD.top - PAD.bottom);
  }

  private setBrush(key: string, brush: Brush | null): void {
    if (brush) this.brushes.set(key, brush);
    else this.brushes.delete(key);
    this.draw();
    this.onBrush(this.brushes);
  }

  private readonly onMove = (event: PointerEvent): void => {
    if (!this.drag) return;
    const unit = this.unitAt(event.clientY);
    if (Math.abs(unit - this.drag.from) * (HEIGHT - PAD.top - PAD.bottom) < 3) return;
    this.brushes.set(this.drag.key, brushBetween(this.drag.from, unit));
    this.draw();
  };

  private readonly onUp = (event: PointerEvent): void => {
    if (!this.drag) return;
    const { key, from } = this.drag;
    this.drag = null;
    const unit = this.unitAt(event.clientY);
    const moved = Math.abs(unit - from) * (HEIGHT - PAD.top - PAD.bottom) >= 3;
    this.setBrush(key, moved ? brushBetween(from, unit) : null);
  };

  private onKey(axis: Axis, event: KeyboardEvent): void {
    const current = this.brushes.get(axis.key);
    if (event.key === "Escape" || event.key === "Delete" || event.key === "Backspace") {
      if (!current) return;
      event.preventDefault();
      this.setBrush(axis.key, null);
      return;
    }
    const step = event.key === "ArrowUp" ? 1 : event.key === "ArrowDown" ? -1 : 0;
    if (!step) return;
    event.preventDefault();
    const low = current ? current.low + (step * KEY_BRUSH) / 2 : 0.5 - KEY_BRUSH / 2;
    const start = Math.min(1 - KEY_BRUSH, Math.max(0, low));
    this.setBrush(axis.key, { low: start, high: start + KEY_BRUSH });
    this.focusAxis(axis.key);
  }

  private focusAxis(key: string): void {
    const target = [...this.svgElement.querySelectorAll<SVGGElement>("g.axis")].find(
      (g) => g.dataset.key === key,
    );
    target?.focus();
  }

  private draw(): void {
    const root = this.svgElement;
    const width = this.width();
    root.setAttribute("width", String(width));
    root.setAttribute("viewBox", `0 0 ${width} ${HEIGHT}`);
    root.replaceChildren();
    if (!this.axes.length) return;
    const objectiveAxis = this.axes.find((a) => a.key === OBJECTIVE);

    const lines = svg("g", { class: "lines" });
    const shown = new Set(filterByBrushes(this.trials, this.axes, this.brushes).map((t) => t.trial));
    for (const trial of this.trials) {
      const points: string[] = [];
      this.axes.forEach((axis, i) => {
        const unit = toUnit(axis, trialValue(axis, trial));
        if (unit !== null) points.push(`${this.x(i).toFixed(1)},${this.y(unit).toFixed(1)}`);
      });
      if (points.length < 2) continue;
      const objectiveUnit = objectiveAxis ? toUnit(objectiveAxis, trial.objective) : null;
      const ended = trial.status === "succeeded";
      const line = svg("polyline", {
        points: points.join(" "),
        fill: "none",
        stroke: ended && objectiveUnit !== null ? colour(objectiveUnit) : "var(--muted, #888)",
        "stroke-width": 1.75,
        "stroke-dasharray": ended || trial.status === "running" ? "" : "4 3",
        opacity: shown.has(trial.trial) ? 0.9 : 0.12,
        "data-trial": trial.trial,
      });
      line.append(svg("title", {}, `trial ${trial.trial} (${trial.status})`));
      lines.append(line);
    }
    root.append(lines);

    this.axes.forEach((axis, i) => {
      const x = this.x(i);
      const last = i === this.axes.length - 1;
      const g = svg("g", {
        class: "axis",
        tabindex: 0,
        role: "slider",
        "data-key": axis.key,
        "aria-label": `${axis.key === OBJECTIVE ? "objective" : axis.key} axis: drag or ArrowUp/ArrowDown to brush, Escape clears`,
      });
      const brush = this.brushes.get(axis.key);
      g.setAttribute("aria-valuetext", brush ? "brushed" : "not brushed");
      g.append(
        svg("line", { x1: x, x2: x, y1: this.y(0), y2: this.y(1), class: "axis-line" }),
        svg(
          "text",
          {
            x: i === 0 ? x - 6 : last ? x + 6 : x,
            // Close axes: titles on alternate rows, so that they do not overprint.
            y: PAD.top - 12 - (i % 2 && this.spacing() < 170 ? 16 : 0),
            "text-anchor": i === 0 ? "start" : last ? "end" : "middle",
            class: "axis-title",
          },
          ellipsize(axis.label + (axis.kind === "log" ? " (log)" : ""), this.titleRoom(i)),
        ),
      );
      g.firstChild?.appendChild(svg("title", {}, axis.key === OBJECTIVE ? axis.label : axis.key));
      const anchor = last ? "end" : "start";
      for (const tick of ticks(axis)) {
        const y = this.y(tick.at);
        g.append(
          svg("line", { x1: x - 3, x2: x + 3, y1: y, y2: y, class: "axis-line" }),
          svg(
            "text",
            { x: anchor === "end" ? x - 5 : x + 5, y: y + 4, "text-anchor": anchor, class: "tick" },
            tick.label,
          ),
        );
      }
      if (brush) {
        g.append(
          svg("rect", {
            class: "brush",
            x: x - 8,
            width: 16,
            y: this.y(brush.high),
            height: Math.max(2, this.y(brush.low) - this.y(brush.high)),
          }),
        );
      }
      const hit = svg("rect", {
        class: "axis-hit",
        x: x - 14,
        width: 28,
        y: this.y(1) - 6,
        height: this.y(0) - this.y(1) + 12,
        fill: "transparent",
      });
      hit.addEventListener("pointerdown", (event) => {
        event.preventDefault();
        this.drag = { key: axis.key, from: this.unitAt(event.clientY) };
      });
      g.append(hit);
      g.addEventListener("keydown", (event) => this.onKey(axis, event));
      root.append(g);
    });
  }
}
