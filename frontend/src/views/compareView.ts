/** Compare: one metric of several runs overlaid (by env steps or by wall time since each
 * run's first point; smoothing, log scale, zoom), and the runs' config differences. The
 * runs, metric and settings are kept in the URL. */

import { api } from "../api/client";
import { TERMINAL_STATUSES, type Run } from "../api/types";
import { LineChart } from "../charts/lineChart";
import { compareCsv } from "../charts/chartExport";
import { alignSeries, firstWallTime, toPlotData, type Marker, type ViewSettings } from "../charts/plotData";
import { seriesFromWire, type Series } from "../charts/series";
import { h } from "../dom";
import { differingKeys, flatten } from "../flatten";
import type { RouteContext } from "../router";
import { compareFromQuery, compareToQuery } from "../urlState";
import { chartDownloads } from "./chartDownloads";
import { createChartControls } from "./chartControls";
import { describeError, errorBox, PALETTE, statusBadge } from "./common";

const POLL_MS = 5000;
const MAX_POINTS = 1000;

export function compareView(main: HTMLElement, { query }: RouteContext): () => void {
  const state = compareFromQuery(query);
  const ids = new Set(state.ids);
  let metric = state.metric;
  const runs = new Map<string, Run>();
  const series = new Map<string, Record<string, Series>>();
  const settings: ViewSettings = { xAxis: state.xAxis, smoothing: state.smoothing, logScale: state.logScale };
  let left = false;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const picker = h("fieldset", { class: "run-picker" }, h("legend", null, "Runs"));
  const metricSelect = h("select", { id: "compare-metric" });
  const problem = h("div");
  const chartBox = h("div", { class: "chart-box" });
  const chart = new LineChart(chartBox);
  const chartNotes = h("p", { class: "chart-notes" });
  const diffBox = h("div");
  const controls = createChartControls(
    settings,
    () => {
      syncUrl();
      draw();
    },
    [h("div", { class: "field inline" }, h("label", { for: "compare-metric" }, "Metric"), metricSelect)],
    true,
    () => chart.resetZoom(),
  );
  const csvRuns = () =>
    selectedRuns()
      .filter((run) => series.get(run.id)?.[metric])
      .map((run) => ({
        id: run.id,
        name: run.name || run.id,
        series: series.get(run.id)?.[metric] as Series,
      }));
  const downloads = chartDownloads(
    chart,
    () => metric || "compare",
    () => compareCsv(csvRuns()),
    "compare",
  );

  main.append(
    h(
      "section",
      { class: "compare", "aria-labelledby": "compare-title" },
      h("h1", { id: "compare-title" }, "Compare runs"),
      problem,
      picker,
      controls,
      h(
        "figure",
        { class: "chart-card wide" },
        h("figcaption", null, h("span", { id: "compare-caption" }, "Pick runs and a metric"), downloads),
        chartBox,
        chartNotes,
      ),
      h("h2", null, "Config differences"),
      diffBox,
    ),
  );
  metricSelect.addEventListener("change", () => {
    metric = metricSelect.value;
    syncUrl();
    draw();
  });

  const syncUrl = (): void => {
    const qs = compareToQuery({ ...settings, ids: [...ids], metric });
    history.replaceState(null, "", `/compare${qs ? `?${qs}` : ""}`);
  };

  const selectedRuns = (): Run[] =>
    [...ids].map((id) => runs.get(id)).filter((r): r is Run => r !== undefined);

  let pickerSignature = "";
  const renderPicker = (all: Run[]): void => {
    const known = new Map(all.map((r) => [r.id, r]));
    ids.forEach((id) => {
      const run = runs.get(id);
      if (!known.has(id) && run) known.set(id, run);
    });
    // Rebuild only on a change, so keyboard focus in the picker survives polls.
    const signature = [...known.values()].map((r) => `${r.id}:${r.status}:${ids.has(r.id)}`).join(",");
    if (signature === pickerSignature) return;
    pickerSignature = signature;
    const boxes = [...known.values()].map((run) => {
      const box = h("input", { type: "checkbox", id: `cmp-${run.id}`, props: { checked: ids.has(run.id) } });
      box.addEventListener("change", () => {
        if (box.checked) ids.add(run.id);
        else ids.delete(run.id);
        syncUrl();
        void refresh();
      });
      return h(
        "span",
        { class: "pick" },
        box,
        h("label", { for: box.id }, run.name || run.id, " ", statusBadge(run.status)),
      );
    });
    picker.replaceChildren(
      h("legend", null, "Runs"),
      ...(boxes.length ? boxes : [h("p", { class: "muted" }, "No runs yet.")]),
    );
  };

  function draw(): void {
    const chosen = selectedRuns();
    const keys = new Set<string>();
    chosen.forEach((run) => Object.keys(series.get(run.id) ?? {}).forEach((k) => keys.add(k)));
    const sortedKeys = [...keys].sort();
    if (!metric || !keys.has(metric))
      metric = sortedKeys.find((k) => k.includes("reward")) ?? sortedKeys[0] ?? "";
    metricSelect.replaceChildren(...sortedKeys.map((k) => h("option", { value: k }, k)));
    metricSelect.value = metric;
    const caption = document.getElementById("compare-caption");
    if (caption) caption.textContent = metric || "Pick runs and a metric";

    const withMetric = chosen.filter((run) => series.get(run.id)?.[metric]);
    // On the wall-time axis each run starts at 0: its first point of any metric.
    const plots = withMetric.map((run) => {
      const all = series.get(run.id) ?? {};
      const t0 = firstWallTime(Object.values(all)) ?? 0;
      return toPlotData(all[metric] as Series, settings, null, t0);
    });
    const aligned = alignSeries(plots.map((p) => ({ x: p.x, y: p.line })));
    const markers: Marker[] = plots.flatMap((p) => p.markers);
    chart.update({
      x: aligned.x,
      lines: withMetric.map((run, i) => ({
        label: run.name || run.id,
        color: PALETTE[i % PALETTE.length] as string,
        values: aligned.ys[i] ?? [],
      })),
      markers,
      xAxis: settings.xAxis,
      logScale: settings.logScale,
    });
    chartNotes.textContent = markers.length ? `${markers.length} non-finite value(s), marked in red` : "";
    renderDiff(chosen);
  }

  const renderDiff = (chosen: Run[]): void => {
    if (chosen.length < 2) {
      diffBox.replaceChildren(
        h("p", { class: "muted" }, "Pick two runs or more to see how their configs differ."),
      );
      return;
    }
    const flats = chosen.map((run) => flatten(run.spec));
    const keys = differingKeys(flats).filter((k) => k !== "name");
    diffBox.replaceChildren(
      keys.length
        ? h(
            "div",
            { class: "table-wrap" },
            h(
              "table",
              { class: "diff-table" },
              h(
                "thead",
                null,
                h(
                  "tr",
                  null,
                  h("th", { scope: "col" }, "Field"),
                  chosen.map((run, i) =>
                    h(
                      "th",
                      { scope: "col" },
                      h("span", { class: "swatch", style: `background:${PALETTE[i % PALETTE.length]}` }),
                      run.name || run.id,
                    ),
                  ),
                ),
              ),
              h(
                "tbody",
                null,
                keys.map((key) =>
                  h(
                    "tr",
                    null,
                    h("th", { scope: "row" }, key),
                    flats.map((f) => h("td", null, h("code", null, f.get(key) ?? "(default)"))),
                  ),
                ),
              ),
            ),
          )
        : h("p", { class: "muted" }, "The specs are identical (apart from the names)."),
    );
  };

  async function refresh(): Promise<void> {
    clearTimeout(timer);
    try {
      const [list, ...details] = await Promise.all([
        api.listRuns({ limit: 50 }),
        ...[...ids].map((id) => api.getRun(id)),
      ]);
      if (left) return;
      details.forEach((run) => runs.set(run.id, run));
      renderPicker(list.items);
      const metrics = await Promise.all([...ids].map((id) => api.metrics(id, { max_points: MAX_POINTS })));
      if (left) return;
      [...ids].forEach((id, i) => {
        const wire = metrics[i]?.series ?? {};
        series.set(id, Object.fromEntries(Object.entries(wire).map(([k, s]) => [k, seriesFromWire(s)])));
      });
      problem.replaceChildren();
      draw();
    } catch (error) {
      if (!left) problem.replaceChildren(errorBox(`Could not load: ${describeError(error)}`));
    }
    const active = selectedRuns().some((r) => !TERMINAL_STATUSES.includes(r.status));
    if (!left && active) timer = setTimeout(() => void refresh(), POLL_MS);
  }
  void refresh();

  return () => {
    left = true;
    clearTimeout(timer);
    chart.destroy();
  };
}
