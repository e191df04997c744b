/** A sweep's page: its trials live (the sweep's stream), sortable, filtered by brushing the
 * parallel-coordinates plot; the objective over trial number with the running best; compare
 * the best N trials; cancel and delete. */

import { api, sweepStreamUrl } from "../api/client";
import { ApiError } from "../api/http";
import { formatNumber } from "../api/numbers";
import {
  SWEEP_FINISHED,
  type ObjectiveMode,
  type SweepDetail,
  type SweepEvent,
  type Trial,
} from "../api/types";
import { LineChart } from "../charts/lineChart";
import { h, replaceChildren, timeAgo } from "../dom";
import { navigate } from "../nav";
import type { RouteContext } from "../router";
import { SeqStream, type StreamState } from "../stream/seqStream";
import {
  axisOfEntry,
  categoryLabel,
  filterByBrushes,
  objectiveAxis,
  type Axis,
  type Brush,
} from "../sweeps/parallelAxes";
import { ParallelPlot } from "../sweeps/parallelPlot";
import {
  bestTrials,
  nextSort,
  objectiveSeries,
  sameKey,
  sortTrials,
  stableJson,
  type SortKey,
  type SortState,
} from "../sweeps/trials";
import { describeError, errorBox, loading, PALETTE, statusBadge } from "./common";
import { cancelButton as makeCancelButton, deleteButton as makeDeleteButton } from "./actionButtons";
import { confirmAction } from "./confirmDialog";

const REFRESH_MS = 300;

export function trialsDone(sweep: { trial_counts: Record<string, number> }): number {
  return ["succeeded", "failed", "cancelled", "pruned"].reduce((n, s) => n + (sweep.trial_counts[s] ?? 0), 0);
}

export function paramText(value: unknown): string {
  if (typeof value === "number") return formatNumber(value);
  if (value === undefined) return "–";
  return categoryLabel(stableJson(value));
}

export function sweepPageView(main: HTMLElement, { params }: RouteContext): () => void {
  const sweepId = params.id as string;
  let sweep: SweepDetail | null = null;
  let left = false;
  let stream: SeqStream<SweepEvent> | null = null;
  let sort: SortState = { key: { kind: "trial" }, descending: false };
  let axes: Axis[] = [];
  let brushes: ReadonlyMap<string, Brush> = new Map();

  const header = h("div", { class: "run-header" }, loading());
  const problem = h("div");
  const liveState = h("span", { class: "live-state muted", "aria-live": "polite" });
  const facts = h("dl", { class: "run-facts" });
  const actions = h("div", { class: "actions" });
  const badgeSlot = h("span");
  const title = h("h1", { id: "sweep-title" });
  const bestCount = h("input", {
    type: "number",
    id: "compare-best-n",
    min: 1,
    max: 20,
    props: { value: "3" },
    class: "narrow",
  });
  const compareBest = h("button", { type: "button", class: "secondary" }, "Compare best");
  const compareRow = h(
    "div",
    { class: "field inline compare-best" },
    h("label", { for: "compare-best-n" }, "Best N"),
    bestCount,
    compareBest,
  );
  const plot = new ParallelPlot((next) => {
    brushes = next;
    renderBrushNote();
    renderTable();
  });
  const clearButton = h("button", { type: "button", class: "secondary", disabled: true }, "Clear brushes");
  const brushNote = h("span", { class: "muted", "aria-live": "polite" });
  const chartBox = h("div", { class: "chart-box" });
  const chart = new LineChart(chartBox);
  const thead = h("thead");
  const tbody = h("tbody");

  main.append(
    h(
      "section",
      { class: "sweep-page", "aria-labelledby": "sweep-title" },
      header,
      problem,
      h(
        "figure",
        { class: "chart-card wide" },
        h(
          "figcaption",
          null,
          h("span", null, "Parameters against the objective (drag along an axis to filter the trials)"),
          h("span", { class: "actions" }, brushNote, clearButton),
        ),
        plot.element,
      ),
      h(
        "figure",
        { class: "chart-card wide" },
        h("figcaption", null, h("span", { id: "objective-caption" }, "Objective by trial")),
        chartBox,
      ),
      h("h2", { id: "trials-title" }, "Trials"),
      h(
        "div",
        { class: "table-wrap" },
        h("table", { class: "trials-table", "aria-labelledby": "trials-title" }, thead, tbody),
      ),
    ),
  );
  clearButton.addEventListener("click", () => plot.clearBrushes());
  compareBest.addEventListener("click", () => {
    if (!sweep) return;
    const n = Math.max(1, Math.min(20, Math.round(Number(bestCount.value) || 1)));
    const best = bestTrials(sweep.trials, mode(), n);
    if (!best.length) {
      problem.replaceChildren(errorBox("No trial has succeeded with an objective yet."));
      return;
    }
    navigate(`/compare?ids=${best.map((t) => encodeURIComponent(t.run_id)).join(",")}`);
  });

  const mode = (): ObjectiveMode => (sweep?.objective.mode === "min" ? "min" : "max");
  const metric = (): string => sweep?.objective.metric ?? "objective";
  const paths = (): string[] =>
    Object.keys(((sweep?.request as { space?: Record<string, unknown> } | undefined)?.space ?? {}) as object);

  const renderBrushNote = (): void => {
    const all = sweep?.trials.length ?? 0;
    const shown = sweep ? filterByBrushes(sweep.trials, axes, brushes).length : 0;
    clearButton.disabled = brushes.size === 0;
    brushNote.textContent = brushes.size ? `${shown} of ${all} trials` : "";
  };

  let actionsState = "";
  const renderHeader = (): void => {
    if (!sweep) return;
    if (!title.isConnected)
      header.replaceChildren(h("div", { class: "page-head" }, title, badgeSlot, liveState), facts, actions);
    title.textContent = sweep.name;
    if (badgeSlot.textContent !== sweep.status) badgeSlot.replaceChildren(statusBadge(sweep.status));
    const best = sweep.best;
    replaceChildren(
      facts,
      fact("Env", sweep.env),
      fact("Method", sweep.method),
      fact("Objective", `${sweep.objective.metric} (${sweep.objective.mode})`),
      fact("Trials", `${trialsDone(sweep)} / ${sweep.max_trials} done, ${sweep.parallel} at once`),
      fact(
        "Best",
        best
          ? h(
              "a",
              { href: `/runs/${encodeURIComponent(best.run_id)}` },
              `${formatNumber(best.objective)} (trial ${best.trial})`,
            )
          : "–",
      ),
      fact("Created", timeAgo(sweep.created_at)),
      fact("Id", h("code", null, sweep.id)),
    );
    const active = !SWEEP_FINISHED.includes(sweep.status);
    const state = `${active}:${sweep.status}`;
    if (state !== actionsState) {
      actionsState = state;
      replaceChildren(
        actions,
        active ? cancelButton(sweep.status === "cancelling") : deleteButton(),
        compareRow,
      );
    }
    const error = sweep.error ?? "";
    if ((problem.dataset.error ?? "") !== error) {
      problem.dataset.error = error;
      problem.replaceChildren(...(error ? [errorBox(`Error: ${error}`)] : []));
    }
  };

  const cancelButton = (cancelling: boolean): HTMLButtonElement =>
    makeCancelButton({
      label: "Cancel sweep",
      cancelling,
      cancel: () => api.cancelSweep(sweepId),
      refresh,
      errorSlot: problem,
    });

  const deleteButton = (): HTMLButtonElement =>
    makeDeleteButton({
      label: "Delete sweep",
      confirm: async () => {
        const count = sweep?.trials.length ?? 0;
        const ok = await confirmAction(
          `Delete ${sweep?.name ?? sweepId}?`,
          `The sweep and its ${count} trial run${count === 1 ? "" : "s"} (metrics, checkpoints, videos) are deleted for good.`,
          "Delete",
        );
        return ok && !left;
      },
      remove: () => api.deleteSweep(sweepId),
      done: () => navigate("/sweeps"),
      errorSlot: problem,
    });

  const columns = (): { label: string; key: SortKey; title?: string }[] => [
    { label: "Trial", key: { kind: "trial" } },
    ...paths().map((path) => ({
      label: path.split(".").pop() ?? path,
      key: { kind: "param", path } as SortKey,
      title: path,
    })),
    { label: "Status", key: { kind: "status" } },
    { label: metric(), key: { kind: "objective" } },
  ];

  let headSignature = "";
  const renderHead = (): void => {
    const cols = columns();
    const signature = `${cols.map((c) => c.label).join("|")};${JSON.stringify(sort)}`;
    if (signature === headSignature) return;
    const focused = document.activeElement?.closest("th")?.cellIndex;
    headSignature = signature;
    replaceChildren(
      thead,
      h(
        "tr",
        null,
        cols.map((col) => {
          const current = sameKey(col.key, sort.key);
          return h(
            "th",
            {
              scope: "col",
              "aria-sort": current ? (sort.descending ? "descending" : "ascending") : "none",
              title: col.title,
            },
            h(
              "button",
              {
                type: "button",
                class: "sort",
                on: {
                  click: () => {
                    sort = nextSort(sort, col.key, mode());
                    renderTable();
                  },
                },
              },
              col.label,
              h("span", { "aria-hidden": "true" }, current ? (sort.descending ? " ▼" : " ▲") : ""),
            ),
          );
        }),
      ),
    );
    if (focused !== undefined) thead.querySelectorAll("button")[focused]?.focus();
  };

  function renderTable(): void {
    if (!sweep) return;
    renderHead();
    const cols = columns();
    const shown = sortTrials(filterByBrushes(sweep.trials, axes, brushes), sort);
    tbody.replaceChildren(
      ...shown.map((trial: Trial) =>
        h(
          "tr",
          { "data-trial": trial.trial, "data-status": trial.status },
          h(
            "td",
            { "data-label": "Trial" },
            h("a", { href: `/runs/${encodeURIComponent(trial.run_id)}` }, `#${trial.trial}`),
          ),
          paths().map((path) => h("td", { "data-label": path }, paramText(trial.params[path]))),
          h("td", { "data-label": "Status", title: trial.error ?? "" }, statusBadge(trial.status)),
          h("td", { "data-label": cols[cols.length - 1]?.label ?? "" }, formatNumber(trial.objective)),
        ),
      ),
    );
    if (!shown.length)
      tbody.append(
        h(
          "tr",
          null,
          h(
            "td",
            { colspan: cols.length, class: "muted" },
            sweep.trials.length ? "No trial in the brushed ranges." : "No trials yet.",
          ),
        ),
      );
  }

  const render = (): void => {
    if (!sweep) return;
    renderHeader();
    const space = ((sweep.request as { space?: Record<string, object> }).space ?? {}) as Record<
      string,
      Parameters<typeof axisOfEntry>[1]
    >;
    axes = [
      ...Object.entries(space).map(([path, entry]) => axisOfEntry(path, entry)),
      objectiveAxis(
        metric(),
        sweep.trials.map((t) => t.objective),
      ),
    ];
    plot.update(axes, sweep.trials);
    brushes = plot.activeBrushes;
    renderBrushNote();
    renderTable();
    const series = objectiveSeries(sweep.trials, mode());
    chart.update({
      x: series.x,
      lines: [
        { label: metric(), color: PALETTE[0] as string, values: series.objective, points: true },
        { label: "best so far", color: PALETTE[1] as string, values: series.best },
      ],
      markers: [],
      xAxis: "step",
      logScale: false,
      integerX: true,
    });
    chartBox.dataset.points = String(series.x.length);
  };

  const refresh = async (): Promise<void> => {
    const fresh = await api.getSweep(sweepId);
    if (left) return;
    sweep = fresh;
    render();
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const refreshSoon = (): void => {
    if (timer === undefined)
      timer = setTimeout(() => {
        timer = undefined;
        void refresh().catch(() => {});
      }, REFRESH_MS);
  };

  const describeState = (state: StreamState, detail?: string): void => {
    const text: Record<StreamState, string> = {
      connecting: "connecting…",
      open: "● live",
      reconnecting: `reconnecting${detail ? ` (${detail})` : ""}…`,
      ended: "finished",
      failed: `stream unavailable${detail ? ` (${detail})` : ""}`,
      stopped: "",
    };
    liveState.textContent = text[state];
    liveState.dataset.state = state;
  };

  const load = async (): Promise<void> => {
    try {
      await refresh();
    } catch (error) {
      if (left || (error instanceof ApiError && error.status === 401)) return;
      header.replaceChildren(
        errorBox(
          error instanceof ApiError && error.status === 404
            ? `There is no sweep ${sweepId}.`
            : `Could not load the sweep: ${describeError(error)}`,
        ),
      );
      return;
    }
    if (!sweep || SWEEP_FINISHED.includes(sweep.status)) return;
    // Every event after the state just read; each one means the sweep changed: read it again.
    stream = new SeqStream<SweepEvent>({
      url: (after) => sweepStreamUrl(sweepId, after),
      afterSeq: sweep.last_seq,
      isFinal: (event) => event.type === "status" && SWEEP_FINISHED.includes(event.status),
      onEvent: refreshSoon,
      onState: describeState,
    });
    stream.start();
  };
  void load();

  return () => {
    left = true;
    stream?.stop();
    clearTimeout(timer);
    plot.destroy();
    chart.destroy();
  };
}

function fact(term: string, value: string | Node): HTMLElement {
  return h("div", null, h("dt", null, term), h("dd", null, value));
}
