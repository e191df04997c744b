/**
 * A uPlot line chart that follows live data: lines, an optional min/max band, and markers
 * for non-finite values. Drag to zoom into an x range, double-click to zoom out; while
 * zoomed, new data does not reset the view. Focused, the keyboard zooms (`+`/`-`), pans
 * (arrows) and resets (`0`, Escape); on a touch screen two fingers pinch-zoom. The shown x
 * range is in the container's `data-x-min`/`data-x-max`; `toPng` renders it as an image.
 */

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

import { formatNumber } from "../api/numbers";
import { formatX, WALL_INCREMENTS, yAxisSize } from "./axes";
import { keyZoom, pinchZoom, type Range } from "./chartZoom";
import type { Marker, XAxis } from "./plotData";

export interface ChartLine {
  label: string;
  color: string;
  values: (number | null | undefined)[];
  /** Drawn thin and translucent (the raw values behind a smoothed line). */
  faint?: boolean;
  /** Each value drawn as a dot as well (few, far-apart points such as a sweep's trials). */
  points?: boolean;
}

export interface ChartInput {
  x: number[];
  lines: ChartLine[];
  /** Band edges of lines[0] (downsampled buckets' min and max). */
  band?: { min: (number | null)[]; max: (number | null)[] } | null;
  /** Shaded bands between two value arrays (quantiles), in lines[0]'s colour, outermost
   * first. */
  bands?: ShadedBand[];
  markers: Marker[];
  xAxis: XAxis;
  logScale: boolean;
  /** Where the x range starts when the data start later (the wall-time axis's 0, the
   * run's start): a point without values is drawn there. */
  xFrom?: number;
  /** Ticks at whole x values only (trial numbers). */
  integerX?: boolean;
}

export interface ShadedBand {
  label: string;
  lower: (number | null | undefined)[];
  upper: (number | null | undefined)[];
  /** Fill opacity in [0, 1]. */
  opacity: number;
}

const HEIGHT = 220;
const AXIS_FONT = "12px system-ui, -apple-system, sans-serif";

let measureContext: CanvasRenderingContext2D | null | undefined;
/** A label's width in CSS px in the axes' font (a rough estimate without a canvas). */
function measureLabel(label: string): number {
  if (measureContext === undefined) {
    measureContext = document.createElement("canvas").getContext("2d");
    if (measureContext) measureContext.font = AXIS_FONT;
  }
  return measureContext ? measureContext.measureText(label).width : label.length * 7;
}

/** uPlot's axis `size`: as wide as the widest tick label of the values it draws. */
function fittedAxisSize(u: uPlot, values: string[] | null): number {
  const labels = values ?? [];
  const widest = labels.reduce((w, label) => Math.max(w, measureLabel(label)), 0);
  if (u.root) u.root.dataset.yWidest = String(Math.ceil(widest));
  return yAxisSize(labels, measureLabel);
}
const MARKER_COLOR = "#d62728";

function shapeKey(input: ChartInput): string {
  const lines = input.lines
    .map((l) => `${l.label}|${l.color}|${l.faint ? 1 : 0}|${l.points ? 1 : 0}`)
    .join(",");
  const bands = (input.bands ?? []).map((b) => `${b.label}@${b.opacity}`).join(",");
  return `${lines};${bands};${input.band ? 1 : 0};${input.xAxis};${input.logScale ? 1 : 0};${input.integerX ? 1 : 0}`;
}

/** Axis text and grid in the page's colours (light or dark scheme). */
function axisColors(): Pick<uPlot.Axis, "stroke" | "grid" | "ticks"> {
  const style = getComputedStyle(document.documentElement);
  const text = style.getPropertyValue("--muted").trim() || "#5c6670";
  const line = style.getPropertyValue("--line").trim() || "#d8dde3";
  return { stroke: text, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 } };
}

function alphaHex(opacity: number): string {
  const byte = Math.round(Math.min(1, Math.max(0, opacity)) * 255);
  return byte.toString(16).padStart(2, "0");
}

export class LineChart {
  private plot: uPlot | null = null;
  private shape = "";
  private zoomed = false;
  private markers: Marker[] = [];
  private readonly resizeObserver: ResizeObserver;

  constructor(
    private readonly container: HTMLElement,
    private readonly syncKey: string | null = null,
  ) {
    this.resizeObserver = new ResizeObserver(() => this.resize());
    this.resizeObserver.observe(container);
    container.addEventListener("dblclick", () => this.setZoomed(false));
    container.tabIndex = 0;
    container.setAttribute("aria-keyshortcuts", "+ - ArrowLeft ArrowRight 0 Escape");
    container.setAttribute("aria-label", "Chart: + and - zoom, arrow keys pan, 0 or Escape resets");
    container.addEventListener("keydown", (event) => this.onKey(event));
    container.addEventListener("touchstart", (event) => this.onTouch(event), { passive: false });
    container.addEventListener("touchmove", (event) => this.onTouch(event), { passive: false });
    container.addEventListener("touchend", () => (this.pinch = null));
  }

  private pinch: { distance: number; view: Range; center: number } | null = null;

  /** The x range shown, and the data's. */
  private ranges(): { view: Range; bounds: Range } | null {
    const u = this.plot;
    const xs = u?.data[0];
    const min = u?.scales.x?.min;
    const max = u?.scales.x?.max;
    if (!u || !xs || xs.length < 2 || min == null || max == null) return null;
    return { view: { min, max }, bounds: { min: xs[0] as number, max: xs[xs.length - 1] as number } };
  }

  private onKey(event: KeyboardEvent): void {
    if (event.target !== this.container || event.altKey || event.ctrlKey || event.metaKey) return;
    const ranges = this.ranges();
    if (!ranges) return;
    const next = keyZoom(event.key, ranges.view, ranges.bounds);
    if (next === null) return;
    event.preventDefault();
    if (next === "reset") this.resetZoom();
    else this.plot?.setScale("x", next);
  }

  private onTouch(event: TouchEvent): void {
    const ranges = this.ranges();
    const u = this.plot;
    if (event.touches.length !== 2 || !ranges || !u) {
      this.pinch = null;
      return;
    }
    event.preventDefault(); // the pinch zooms the chart, not the page
    const [a, b] = [event.touches[0] as Touch, event.touches[1] as Touch];
    const distance = Math.abs(a.clientX - b.clientX);
    if (!this.pinch) {
      const left = u.over.getBoundingClientRect().left;
      const center = u.posToVal((a.clientX + b.clientX) / 2 - left, "x");
      this.pinch = { distance, view: ranges.view, center };
      return;
    }
    const { view, center } = this.pinch;
    u.setScale("x", pinchZoom(view, ranges.bounds, this.pinch.distance, distance, center));
  }

  /** The chart as a PNG: the plot on the page's background, with a title and legend. */
  toPng(title: string): Promise<Blob | null> {
    const source = this.plot?.ctx.canvas;
    if (!this.plot || !source) return Promise.resolve(null);
    const scale = source.width / Math.max(1, this.plot.width);
    const head = Math.round(24 * scale);
    const canvas = document.createElement("canvas");
    canvas.width = source.width;
    canvas.height = source.height + head;
    const ctx = canvas.getContext("2d");
    if (!ctx) return Promise.resolve(null);
    const style = getComputedStyle(document.documentElement);
    ctx.fillStyle = style.getPropertyValue("--bg").trim() || "#ffffff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.drawImage(source, 0, head);
    ctx.font = `${Math.round(12 * scale)}px sans-serif`;
    ctx.textBaseline = "middle";
    ctx.fillStyle = style.getPropertyValue("--fg").trim() || "#1b1f24";
    ctx.fillText(title, 4 * scale, head / 2);
    let x = 4 * scale + ctx.measureText(title).width + 16 * scale;
    const plot = this.plot;
    plot.series.forEach((series, index) => {
      const label = String(series.label ?? "");
      if (!index || !label || label === "min" || label === "max" || series.show === false) return;
      const stroke = series.stroke as unknown;
      const color =
        typeof stroke === "function" ? (stroke as (u: uPlot, i: number) => unknown)(plot, index) : stroke;
      ctx.fillStyle = typeof color === "string" ? color : "#888";
      ctx.fillRect(x, head / 2 - 2 * scale, 12 * scale, 4 * scale);
      x += 16 * scale;
      ctx.fillText(label, x, head / 2);
      x += ctx.measureText(label).width + 12 * scale;
    });
    return new Promise((resolve) => canvas.toBlob(resolve, "image/png"));
  }

  /** Back to the whole x range (as a double-click does). */
  resetZoom(): void {
    if (!this.plot) return;
    this.setZoomed(false);
    this.plot.setData(this.plot.data, true);
  }

  private setZoomed(zoomed: boolean): void {
    this.zoomed = zoomed;
    this.container.dataset.zoomed = String(zoomed);
  }

  update(input: ChartInput): void {
    this.markers = input.markers;
    const data = this.alignedData(input);
    const key = shapeKey(input);
    if (!this.plot || key !== this.shape) {
      this.plot?.destroy();
      this.shape = key;
      this.setZoomed(false);
      this.plot = new uPlot(this.options(input), data, this.container);
      return;
    }
    this.plot.setData(data, !this.zoomed);
  }

  destroy(): void {
    this.resizeObserver.disconnect();
    this.plot?.destroy();
    this.plot = null;
  }

  private alignedData(input: ChartInput): uPlot.AlignedData {
    const columns: (number | null | undefined)[][] = input.lines.map((l) => l.values);
    if (input.band) columns.push(input.band.min, input.band.max);
    for (const band of input.bands ?? []) columns.push(band.lower, band.upper);
    const first = input.x[0];
    this.container.dataset.xFirst = first === undefined ? "" : String(first);
    if (input.xFrom !== undefined && first !== undefined && first > input.xFrom) {
      return [[input.xFrom, ...input.x], ...columns.map((c) => [null, ...c])];
    }
    return [input.x, ...columns];
  }

  private width(): number {
    return Math.max(200, Math.floor(this.container.clientWidth || 300));
  }

  private resize(): void {
    if (this.plot && Math.abs(this.plot.width - this.width()) > 1) {
      this.plot.setSize({ width: this.width(), height: HEIGHT });
    }
  }

  private options(input: ChartInput): uPlot.Options {
    const series: uPlot.Series[] = [
      {
        label: input.xAxis === "wall" ? "time" : "step",
        value: (_u, v) => (v === null ? "–" : formatX(input.xAxis, v)),
      },
      ...input.lines.map((line): uPlot.Series => ({
        label: line.label,
        stroke: line.color,
        width: line.faint ? 1 : 1.75,
        alpha: line.faint ? 0.35 : 1,
        points: { show: line.points ?? false, size: 6 },
        value: (_u, v) => formatNumber(v),
      })),
    ];
    const bands: uPlot.Band[] = [];
    if (input.band) {
      const base = series.length;
      const color = input.lines[0]?.color ?? "#888";
      series.push(
        {
          label: "min",
          stroke: color,
          alpha: 0.2,
          width: 0.5,
          points: { show: false },
          value: (_u, v) => formatNumber(v),
        },
        {
          label: "max",
          stroke: color,
          alpha: 0.2,
          width: 0.5,
          points: { show: false },
          value: (_u, v) => formatNumber(v),
        },
      );
      bands.push({ series: [base + 1, base], fill: `${color}33` });
    }
    for (const band of input.bands ?? []) {
      const base = series.length;
      const color = input.lines[0]?.color ?? "#888888";
      const edge = (label: string): uPlot.Series => ({
        label,
        stroke: color,
        alpha: 0.25,
        width: 0.5,
        points: { show: false },
        value: (_u, v) => formatNumber(v),
      });
      const [lower, upper] = band.label.split("–");
      series.push(edge(lower ?? band.label), edge(upper ?? band.label));
      bands.push({ series: [base + 1, base], fill: `${color}${alphaHex(band.opacity)}` });
    }
    return {
      width: this.width(),
      height: HEIGHT,
      series,
      bands,
      scales: {
        x: { time: false },
        y: input.logScale ? { distr: 3, log: 10 } : { auto: true },
      },
      axes: [
        {
          ...axisColors(),
          values: (_u, splits) => splits.map((v) => formatX(input.xAxis, v)),
          ...(input.integerX ? { incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] } : {}),
          ...(input.xAxis === "wall" ? { incrs: WALL_INCREMENTS } : {}),
        },
        {
          ...axisColors(),
          font: AXIS_FONT,
          values: (_u, splits) => splits.map((v) => formatNumber(v)),
          size: fittedAxisSize,
        },
      ],
      cursor: {
        drag: { x: true, y: false },
        ...(this.syncKey ? { sync: { key: this.syncKey } } : {}),
      },
      legend: { live: true },
      hooks: {
        // Zoomed = the x scale shows less than the data's x range (after a drag, or after
        // new data arrived while zoomed: setData then keeps the scale).
        setScale: [
          (u, scaleKey) => {
            const xs = u.data[0];
            if (scaleKey !== "x" || !xs.length) return;
            const min = u.scales.x?.min;
            const max = u.scales.x?.max;
            if (min === undefined || max === undefined || min === null || max === null) return;
            this.setZoomed(min > (xs[0] as number) || max < (xs[xs.length - 1] as number));
            this.container.dataset.xMin = String(min);
            this.container.dataset.xMax = String(max);
          },
        ],
        draw: [(u) => this.drawMarkers(u)],
      },
    };
  }

  /** A dashed vertical line and a label at each non-finite value. */
  private drawMarkers(u: uPlot): void {
    if (!this.markers.length) return;
    const { ctx } = u;
    const { left, top, width, height } = u.bbox;
    ctx.save();
    ctx.strokeStyle = MARKER_COLOR;
    ctx.fillStyle = MARKER_COLOR;
    ctx.lineWidth = Math.max(1, devicePixelRatio);
    ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
    ctx.font = `${11 * devicePixelRatio}px sans-serif`;
    let lastLabelX = -Infinity;
    let row = 0;
    for (const marker of this.markers) {
      const x = u.valToPos(marker.x, "x", true);
      if (x < left || x > left + width) continue;
      ctx.beginPath();
      ctx.moveTo(x, top);
      ctx.lineTo(x, top + height);
      ctx.stroke();
      // Labels of close markers go on successive rows instead of overprinting.
      row = x - lastLabelX < 32 * devicePixelRatio ? (row + 1) % 4 : 0;
      lastLabelX = x;
      ctx.fillText(marker.label, x + 3 * devicePixelRatio, top + (12 + 12 * row) * devicePixelRatio);
    }
    ctx.restore();
  }
}
