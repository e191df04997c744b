/** The run page's charts: one per metric, grouped by prefix, updated live; a family of
 * percentile metrics (`…_p0` … `…_p100`) is one chart with its median and quantile bands.
 * The wall-time axis counts from the run's start. */

import { formatNumber } from "../api/numbers";
import type { MetricsEvent } from "../api/types";
import { groupKeys } from "../charts/groups";
import { wallOrigin } from "../charts/axes";
import { LineChart, type ShadedBand } from "../charts/lineChart";
import { alignSeries, firstWallTime, toPlotData, type PlotData, type ViewSettings } from "../charts/plotData";
import { familyId, quantileFamilies, quantileLayout, type QuantileFamily } from "../charts/quantiles";
import { seriesCsv } from "../charts/chartExport";
import { appendEvent, emptySeries, seriesFromWire, truncateAfter, type Series } from "../charts/series";
import { WallClock } from "../charts/wallClock";
import { formatDuration, h } from "../dom";
import type { WireSeries } from "../api/types";
import { createChartControls } from "./chartControls";
import { chartDownloads } from "./chartDownloads";
import { PALETTE } from "./common";

interface ChartCard {
  element: HTMLElement;
  chart: LineChart;
  notes: HTMLElement;
}

export class RunCharts {
  readonly element: HTMLElement;
  private readonly store = new Map<string, Series>();
  private readonly clock = new WallClock();
  private readonly cards = new Map<string, ChartCard>();
  /** Chart id of each metric key drawn in a family's chart. */
  private readonly chartOf = new Map<string, string>();
  private readonly families = new Map<string, QuantileFamily>();
  private startedAt: number | null = null;
  private readonly groupsBox = h("div", { class: "chart-groups" });
  private readonly empty: HTMLElement;
  private readonly settings: ViewSettings = { xAxis: "step", smoothing: 0, logScale: false };
  private filter = "";
  private dirty = new Set<string>();
  private frame: number | null = null;
  private layoutStale = true;

  /** `waiting`: what the run is doing, shown while there are no metrics. */
  constructor(
    private readonly runId: string,
    waiting: HTMLElement | null = null,
  ) {
    this.empty = h(
      "p",
      { class: "muted run-charts-empty" },
      "No metrics yet: they appear here as the run reports them. ",
      waiting,
    );
    const filter = h("input", { id: "metric-filter", type: "search", placeholder: "filter metrics" });
    filter.addEventListener("input", () => {
      this.filter = filter.value.trim().toLowerCase();
      this.layoutStale = true;
      this.markAll();
    });
    const controls = createChartControls(
      this.settings,
      () => this.markAll(),
      [h("div", { class: "field inline" }, h("label", { for: "metric-filter" }, "Metrics"), filter)],
      true,
      () => this.cards.forEach((card) => card.chart.resetZoom()),
    );
    this.element = h("div", { class: "run-charts" }, controls, this.empty, this.groupsBox);
  }

  /** The run's start (epoch seconds): where the wall-time axis begins. */
  setStart(startedAt: number | null): void {
    if (startedAt === this.startedAt) return;
    this.startedAt = startedAt;
    if (this.settings.xAxis === "wall") this.markAll();
  }

  /** The downsampled history (GET /metrics). */
  setHistory(series: Record<string, WireSeries>): void {
    for (const [key, wire] of Object.entries(series)) this.store.set(key, seriesFromWire(wire));
    this.layoutStale = true;
    this.markAll();
  }

  /** A `rewind` event: the points after `step` are gone from the run's history. */
  rewind(step: number): void {
    for (const [key, series] of this.store) if (truncateAfter(series, step)) this.dirty.add(key);
    this.schedule();
  }

  /** A live (or replayed) metrics event from the stream. */
  addEvent(event: MetricsEvent): void {
    this.clock.record(event.step, event.wall_time);
    const before = this.store.size;
    appendEvent(this.store, event).forEach((key) => this.dirty.add(key));
    if (this.store.size !== before) this.layoutStale = true;
    // Wall-time positions of the history become known as events arrive.
    if (this.settings.xAxis === "wall") this.markAll();
    else this.schedule();
  }

  destroy(): void {
    if (this.frame !== null) cancelAnimationFrame(this.frame);
    this.cards.forEach((card) => card.chart.destroy());
    this.cards.clear();
  }

  private markAll(): void {
    this.store.forEach((_, key) => this.dirty.add(key));
    this.schedule();
  }

  private schedule(): void {
    if (this.frame === null) this.frame = requestAnimationFrame(() => this.draw());
  }

  private visibleKeys(): string[] {
    return [...this.store.keys()].filter((key) => !this.filter || key.toLowerCase().includes(this.filter));
  }

  /** The charts' ids of the visible keys: a percentile family's is one id. */
  private chartIds(): string[] {
    const { families, others } = quantileFamilies(this.visibleKeys());
    this.chartOf.clear();
    this.families.clear();
    for (const family of families) {
      const id = familyId(family.base);
      this.families.set(id, family);
      family.members.forEach(([, key]) => this.chartOf.set(key, id));
    }
    return [...others, ...families.map((f) => familyId(f.base))];
  }

  private layout(): void {
    const groups = groupKeys(this.chartIds());
    this.empty.hidden = this.store.size > 0;
    const open = new Map(
      [...this.groupsBox.querySelectorAll("details")].map((d) => [d.dataset.group ?? "", d.open]),
    );
    this.groupsBox.replaceChildren(
      ...groups.map(([group, keys]) =>
        h(
          "details",
          { class: "chart-group", "data-group": group, props: { open: open.get(group) ?? true } },
          h(
            "summary",
            null,
            h("h2", null, group),
            h("span", { class: "muted" }, ` ${keys.length} chart${keys.length === 1 ? "" : "s"}`),
          ),
          h(
            "div",
            { class: "chart-grid" },
            keys.map((key) => this.card(key).element),
          ),
        ),
      ),
    );
    this.layoutStale = false;
  }

  private card(key: string): ChartCard {
    let card = this.cards.get(key);
    if (!card) {
      const box = h("div", { class: "chart-box" });
      const notes = h("p", { class: "chart-notes" });
      const chart = new LineChart(box, `run-${this.runId}`);
      const downloads = chartDownloads(
        chart,
        () => key,
        () =>
          seriesCsv(
            this.store.get(this.families.get(key)?.members.find(([q]) => q === 50)?.[1] ?? key) ??
              emptySeries(),
          ),
        this.runId,
      );
      const element = h(
        "figure",
        { class: "chart-card", "data-metric": key },
        h("figcaption", null, h("span", null, key), downloads),
        box,
        notes,
      );
      card = { element, chart, notes };
      this.cards.set(key, card);
    }
    return card;
  }

  private draw(): void {
    this.frame = null;
    if (this.layoutStale) this.layout();
    const start = wallOrigin(this.startedAt, firstWallTime(this.store.values()), this.clock.start);
    const drawn = new Set<string>();
    for (const key of this.dirty) {
      const id = this.chartOf.get(key);
      if (id !== undefined) {
        if (!drawn.has(id)) this.drawFamily(id, start);
        drawn.add(id);
        continue;
      }
      const series = this.store.get(key);
      const card = this.cards.get(key);
      if (!series || !card || !card.element.isConnected) continue;
      const data = toPlotData(series, this.settings, this.clock, start);
      card.chart.update({
        x: data.x,
        lines: data.raw
          ? [
              { label: "smoothed", color: PALETTE[0] as string, values: data.line },
              { label: "raw", color: PALETTE[0] as string, values: data.raw, faint: true },
            ]
          : [{ label: "value", color: PALETTE[0] as string, values: data.line }],
        band: data.band,
        markers: data.markers,
        xAxis: this.settings.xAxis,
        ...(this.settings.xAxis === "wall" ? { xFrom: 0 } : {}),
        logScale: this.settings.logScale,
      });
      card.notes.replaceChildren(...this.notesFor(data));
      card.element.dataset.points = String(series.step.length);
    }
    this.dirty.clear();
  }

  /** A percentile family's chart: the median line and the quantile bands. */
  private drawFamily(id: string, start: number): void {
    const family = this.families.get(id);
    const card = this.cards.get(id);
    if (!family || !card || !card.element.isConnected) return;
    const settings = { ...this.settings, smoothing: 0 };
    const plotted = new Map(
      family.members.map(([, key]) => [
        key,
        toPlotData(this.store.get(key) ?? emptySeries(), settings, this.clock, start),
      ]),
    );
    const keys = [...plotted.keys()];
    const aligned = alignSeries(keys.map((key) => ({ x: plotted.get(key)!.x, y: plotted.get(key)!.line })));
    const column = new Map(keys.map((key, i) => [key, aligned.ys[i] ?? []]));
    const layout = quantileLayout(family);
    const bands: ShadedBand[] = layout.bands.map((band) => ({
      label: band.label,
      lower: column.get(band.lower) ?? [],
      upper: column.get(band.upper) ?? [],
      opacity: band.opacity,
    }));
    const median = layout.median ? (column.get(layout.median) ?? []) : [];
    card.chart.update({
      x: aligned.x,
      lines: [{ label: layout.median ? "p50" : "(no p50)", color: PALETTE[0] as string, values: median }],
      bands,
      markers: [...plotted.values()].flatMap((data) => data.markers),
      xAxis: this.settings.xAxis,
      ...(this.settings.xAxis === "wall" ? { xFrom: 0 } : {}),
      logScale: this.settings.logScale,
    });
    card.notes.replaceChildren(
      h("span", null, `median line; bands ${layout.bands.map((b) => b.label).join(", ")}`),
    );
    card.element.dataset.points = String(aligned.x.length);
    card.element.dataset.bands = String(bands.length);
  }

  private notesFor(data: PlotData): HTMLElement[] {
    const notes: HTMLElement[] = [];
    if (data.markers.length) {
      const where = data.markers
        .slice(0, 3)
        .map(
          (m) =>
            `${m.label} at ${this.settings.xAxis === "wall" ? formatDuration(m.x) : `step ${formatNumber(m.x)}`}`,
        );
      notes.push(
        h(
          "span",
          { class: "nonfinite" },
          `${data.markers.length} non-finite: ${where.join(", ")}${data.markers.length > 3 ? ", …" : ""}`,
        ),
      );
    }
    if (data.band) notes.push(h("span", null, "downsampled: the band shows each bucket's min and max"));
    if (data.hiddenNonPositive)
      notes.push(h("span", null, `${data.hiddenNonPositive} value(s) ≤ 0 not shown on the log scale`));
    if (data.withoutTime)
      notes.push(h("span", null, `${data.withoutTime} point(s) without a known wall time`));
    return notes;
  }
}
