/** A sweep's page: its trials live (the sweep's stream), sortable, filtered by brushing the
 * parallel-coordinates plot; the objective over trial number with the running best; compare
 * the best N trials; cancel and delete. */

import { api, sweepStreamUrl } from "../api/client";
import { formatNumber } from "../api/numbers";
import { SWEEP_FINISHED, type SweepDetail, type SweepEvent, type Trial } from "../api/types";
import { LineChart } from "../charts/lineChart";
import { h, replaceChildren, timeAgo } from "../dom";
import { navigate } from "../nav";
import type { RouteContext } from "../router";
import { SeqStream } from "../stream/seqStream";
import { filterByBrushes, type Axis, type Brush } from "../sweeps/parallelAxes";
import { ParallelPlot } from "../sweeps/parallelPlot";
import {
  bestCountOf,
  brushNote as brushNoteText,
  deleteSweepText,
  noTrialsText,
  objectiveChart,
  objectiveMetric,
  objectiveMode,
  paramText,
  searchSpace,
  sortMark,
  sweepAxes,
  trialColumns,
  trialsDone,
} from "../sweeps/sweepView";
import { bestTrials, nextSort, sortTrials, type SortState } from "../sweeps/trials";
import { errorBox, fact, loading, PALETTE, setLiveState, statusBadge } from "./common";
import { cancelButton as makeCancelButton, deleteButton as makeDeleteButton } from "./actionButtons";
import { confirmAction } from "./confirmDialog";
import { loadErrorMessage } from "./loadError";

const REFRESH_MS = 300;

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
    const best = bestTrials(sweep.trials, mode(), bestCountOf(bestCount.value));
    if (!best.length) {
      problem.replaceChildren(errorBox("No trial has succeeded with an objective yet."));
      return;
    }
    navigate(`/compare?ids=${best.map((t) => encodeURIComponent(t.run_id)).join(",")}`);
  });

  const mode = () => objectiveMode(sweep);
  const metric = () => objectiveMetric(sweep);
  const paths = (): string[] => Object.keys(searchSpace(sweep));

  const renderBrushNote = (): void => {
    const all = sweep?.trials.length ?? 0;
    const shown = sweep ? filterByBrushes(sweep.trials, axes, brushes).length : 0;
    clearButton.disabled = brushes.size === 0;
    brushNote.textContent = brushNoteText(shown, all, brushes.size);
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
        const ok = await confirmAction(
          `Delete ${sweep?.name ?? sweepId}?`,
          deleteSweepText(sweep?.trials.length ?? 0),
          "Delete",
        );
        return ok && !left;
      },
      remove: () => api.deleteSweep(sweepId),
      done: () => navigate("/sweeps"),
      errorSlot: problem,
    });

  const columns = () => trialColumns(paths(), metric());

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
          const mark = sortMark(sort, col.key);
          return h(
            "th",
            { scope: "col", "aria-sort": mark.ariaSort, title: col.title },
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
              h("span", { "aria-hidden": "true" }, mark.arrow),
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
        h("tr", null, h("td", { colspan: cols.length, class: "muted" }, noTrialsText(sweep.trials.length))),
      );
  }

  const render = (): void => {
    if (!sweep) return;
    renderHeader();
    axes = sweepAxes(sweep);
    plot.update(axes, sweep.trials);
    brushes = plot.activeBrushes;
    renderBrushNote();
    renderTable();
    const data = objectiveChart(sweep.trials, mode(), metric(), PALETTE);
    chart.update(data);
    chartBox.dataset.points = String(data.x.length);
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

  const load = async (): Promise<void> => {
    try {
      await refresh();
    } catch (error) {
      const message = loadErrorMessage(error, "sweep", sweepId);
      if (!left && message) header.replaceChildren(errorBox(message));
      return;
    }
    if (!sweep || SWEEP_FINISHED.includes(sweep.status)) return;
    // Every event after the state just read; each one means the sweep changed: read it again.
    stream = new SeqStream<SweepEvent>({
      url: (after) => sweepStreamUrl(sweepId, after),
      afterSeq: sweep.last_seq,
      isFinal: (event) => event.type === "status" && SWEEP_FINISHED.includes(event.status),
      onEvent: refreshSoon,
      onState: (state, detail) => setLiveState(liveState, state, "page", detail),
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
