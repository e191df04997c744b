/** A run's page: live charts from the history plus the event stream, status, config,
 * videos, checkpoints, logs, cancel. */

import { api, streamUrl } from "../api/client";
import { formatNumber } from "../api/numbers";
import { TERMINAL_STATUSES, type Run, type RunEvent } from "../api/types";
import { h, replaceChildren, timeAgo } from "../dom";
import { navigate } from "../nav";
import type { RouteContext } from "../router";
import { RecordingsTab } from "../recordings/tab";
import { RunStream, type StreamState } from "../stream/runStream";
import {
  describeError,
  envName,
  errorBox,
  fact,
  latestEvalReward,
  loading,
  progressBar,
  setLiveState,
  kindLabel,
  statusBadge,
} from "./common";
import { cancelButton as makeCancelButton, deleteButton as makeDeleteButton } from "./actionButtons";
import { confirmAction } from "./confirmDialog";
import { RunCharts } from "./runCharts";
import { RunMeta } from "./runMeta";
import { PhaseIndicator } from "./runPhase";
import { loadErrorMessage } from "./loadError";
import {
  actionsKey,
  applyMetrics,
  logLines,
  tabAfterKey,
  tabLabel,
  tabOf,
  TABS,
  throttle,
  type Tab,
} from "./runPageState";
import { renderCheckpoints, renderConfig, renderLogs, renderVideos } from "./runPanels";

const MAX_POINTS = 1000;
const LOG_TAIL = 200;

export function runPageView(main: HTMLElement, { params, query }: RouteContext): () => void {
  const runId = params.id as string;
  let run: Run | null = null;
  let left = false;
  let stream: RunStream | null = null;
  const phase = new PhaseIndicator();
  const charts = new RunCharts(runId, phase.copy);
  const recordingId = Number(query.get("recording"));
  const recordings = new RecordingsTab(
    runId,
    Number.isInteger(recordingId) && query.has("recording") ? recordingId : null,
  );

  const header = h("div", { class: "run-header" });
  const errorSlot = h("div");
  const liveState = h("span", { class: "live-state muted", "aria-live": "polite" });
  const panels: Record<Tab, HTMLElement> = {
    charts: charts.element,
    videos: h("div", null, loading()),
    checkpoints: h("div", null, loading()),
    recordings: recordings.element,
    config: h("div", null, loading()),
    logs: h("div", null, loading()),
  };
  let current: Tab = tabOf(query.get("tab"));
  const tabButtons = TABS.map((tab) =>
    h(
      "button",
      {
        type: "button",
        role: "tab",
        id: `tab-${tab}`,
        "aria-controls": `panel-${tab}`,
        "aria-selected": String(tab === current),
        tabindex: tab === current ? 0 : -1,
        on: { click: () => select(tab) },
      },
      tabLabel(tab),
    ),
  );
  const panelBoxes = TABS.map((tab) =>
    h(
      "div",
      {
        role: "tabpanel",
        id: `panel-${tab}`,
        "aria-labelledby": `tab-${tab}`,
        hidden: tab !== current,
        tabindex: 0,
      },
      panels[tab],
    ),
  );
  const tabList = h("div", { role: "tablist", class: "tabs", "aria-label": "Run sections" }, tabButtons);
  tabList.addEventListener("keydown", (event) => {
    const next = tabAfterKey(current, event.key);
    if (!next) return;
    select(next);
    tabButtons[TABS.indexOf(next)]?.focus();
  });
  function select(tab: Tab): void {
    current = tab;
    TABS.forEach((t, i) => {
      tabButtons[i]?.setAttribute("aria-selected", String(t === tab));
      if (tabButtons[i]) tabButtons[i].tabIndex = t === tab ? 0 : -1;
      if (panelBoxes[i]) panelBoxes[i].hidden = t !== tab;
    });
    if (tab === "logs") refreshLogs.call();
    const url = new URL(window.location.href);
    url.searchParams.set("tab", tab);
    history.replaceState(null, "", url.pathname + url.search);
  }

  main.append(h("section", { class: "run-page" }, header, errorSlot, tabList, ...panelBoxes));

  const meta = new RunMeta(runId, (saved) => {
    if (!run) return;
    run = { ...run, name: saved.name, tags: saved.tags, notes: saved.notes };
    renderHeader();
  });
  const badgeSlot = h("span");
  const facts = h("dl", { class: "run-facts" });
  const actions = h("div", { class: "actions" });
  let actionsState = "";
  header.replaceChildren(loading());

  const cancelButton = (): HTMLButtonElement =>
    makeCancelButton({
      label: "Cancel run",
      cancel: () => api.cancelRun(runId),
      refresh: refreshRun,
      errorSlot,
    });

  const deleteButton = (): HTMLButtonElement =>
    makeDeleteButton({
      label: "Delete run",
      confirm: async () => {
        const ok = await confirmAction(
          `Delete ${run?.name || runId}?`,
          "Its metrics, checkpoints and videos are deleted for good.",
          "Delete",
        );
        return ok && !left;
      },
      remove: () => api.deleteRun(runId),
      done: () => navigate("/"),
      errorSlot,
    });

  /** Updates the header in place; the action buttons are rebuilt only when they change,
   * so keyboard focus survives live updates. */
  const renderHeader = (): void => {
    if (!run) return;
    if (!meta.title.isConnected) {
      header.replaceChildren(
        h("div", { class: "page-head" }, meta.title, badgeSlot, phase.element, liveState),
        facts,
        meta.details,
        actions,
      );
    }
    meta.update(run);
    if (badgeSlot.textContent !== run.status) badgeSlot.replaceChildren(statusBadge(run.status));
    phase.setActive(run.status === "running");
    replaceChildren(
      facts,
      fact("Kind", kindLabel(run)),
      fact("Env", envName(run)),
      fact("Progress", progressBar(run.steps, run.total_steps)),
      fact("Eval reward", formatNumber(latestEvalReward(run))),
      fact("Created", timeAgo(run.created_at)),
      fact("Id", h("code", null, run.id)),
    );
    const active = !TERMINAL_STATUSES.includes(run.status);
    const state = actionsKey(run);
    if (state !== actionsState) {
      actionsState = state;
      const cancel = active ? cancelButton() : null;
      const remove = active ? null : deleteButton();
      if (cancel && run.cancel_requested) {
        cancel.disabled = true;
        cancel.textContent = "Cancelling…";
      }
      replaceChildren(
        actions,
        cancel,
        remove,
        h("a", { class: "button secondary", href: `/compare?ids=${encodeURIComponent(run.id)}` }, "Compare…"),
        h(
          "a",
          { class: "button secondary", href: `/sweeps/new?from=${encodeURIComponent(run.id)}` },
          "Sweep around this run",
        ),
        h(
          "a",
          { class: "button secondary", href: api.metricsCsvUrl(run.id), download: `${run.id}-metrics.csv` },
          "metrics.csv",
        ),
      );
    }
    const error = run.error;
    if ((errorSlot.dataset.error ?? "") !== (error ?? "")) {
      errorSlot.dataset.error = error ?? "";
      errorSlot.replaceChildren(
        ...(error
          ? [
              h(
                "div",
                { class: "error-box run-error", role: "alert" },
                h("strong", null, "Error: "),
                h("pre", null, error),
              ),
            ]
          : []),
      );
    }
  };

  const refreshRun = async (): Promise<void> => {
    const fresh = await api.getRun(runId);
    if (left) return;
    run = fresh;
    renderHeader();
    charts.setStart(fresh.started_at ?? null);
    renderConfig(panels.config, fresh);
  };
  const refreshVideos = throttle(
    () =>
      void api
        .videos(runId)
        .then((page) => !left && renderVideos(panels.videos, page.items))
        .catch(() => {}),
    500,
  );
  const refreshCheckpoints = throttle(
    () =>
      void api
        .checkpoints(runId)
        .then((page) => {
          if (!run || left) return;
          renderCheckpoints(panels.checkpoints, run, page.items);
          recordings.setCheckpoints(page.items.map((c) => c.step));
        })
        .catch(() => {}),
    500,
  );
  const refreshLogs = throttle(
    () =>
      void api
        .logs(runId, LOG_TAIL)
        .then((text) => !left && renderLogs(panels.logs, logLines(text), LOG_TAIL))
        .catch(() => {}),
    1000,
  );
  const refreshRunSoon = throttle(() => void refreshRun().catch(() => {}), 300);

  const onEvent = (event: RunEvent): void => {
    switch (event.type) {
      case "metrics":
        charts.addEvent(event);
        if (run && applyMetrics(run, event)) refreshRunSoon.call();
        break;
      case "status":
        refreshLogs.call();
        if (run) {
          run.status = event.status;
          run.error = event.error;
          renderHeader();
        }
        refreshRunSoon.call();
        break;
      case "video":
        refreshVideos.call();
        break;
      case "checkpoint":
        refreshCheckpoints.call();
        break;
      case "log":
        refreshLogs.call();
        break;
      case "phase":
        phase.set(event);
        break;
      case "recording":
        recordings.upsert(event.recording);
        break;
      case "rewind":
        charts.rewind(event.step);
        refreshRunSoon.call();
        break;
    }
  };
  const describeState = (state: StreamState, detail?: string): void =>
    setLiveState(liveState, state, "page", detail);

  /** Whether the run has ended with no event after `seq` (the run as read after it). */
  const endedBy = async (seq: number): Promise<boolean> => {
    if (run && !TERMINAL_STATUSES.includes(run.status)) await refreshRun().catch(() => {});
    return run !== null && TERMINAL_STATUSES.includes(run.status) && run.last_seq <= seq;
  };

  const load = async (): Promise<void> => {
    try {
      await refreshRun();
    } catch (error) {
      const message = loadErrorMessage(error, "run", runId);
      if (!left && message) header.replaceChildren(errorBox(message));
      return;
    }
    const [metrics, videos, checkpoints] = await Promise.allSettled([
      api.metrics(runId, { max_points: MAX_POINTS }),
      api.videos(runId),
      api.checkpoints(runId),
    ]);
    if (left || !run) return;
    if (metrics.status === "fulfilled") charts.setHistory(metrics.value.series);
    else errorSlot.append(errorBox(`Could not load the metrics: ${describeError(metrics.reason)}`));
    if (videos.status === "fulfilled") renderVideos(panels.videos, videos.value.items);
    if (checkpoints.status === "fulfilled") {
      renderCheckpoints(panels.checkpoints, run, checkpoints.value.items);
      recordings.setCheckpoints(checkpoints.value.items.map((c) => c.step));
    }
    void recordings.refresh();
    refreshLogs.call();
    // The history has every metric (with its wall time) of the events up to its last_seq,
    // and the run's phase as of then: follow from there. Before the first metric the few
    // events from the start are replayed; without a history, all of them.
    const history = metrics.status === "fulfilled" ? metrics.value : null;
    const afterSeq = history && Object.keys(history.series).length ? history.last_seq : 0;
    if (history?.phase && afterSeq > 0)
      phase.set({ type: "phase", seq: afterSeq, time: history.phase.since, ...history.phase });
    if (afterSeq > 0 && (await endedBy(afterSeq))) {
      if (!left) describeState("ended"); // the server would close the stream at once
      return;
    }
    if (left) return;
    stream = new RunStream({
      url: (after) => streamUrl(runId, after),
      onEvent,
      onState: describeState,
      afterSeq,
    });
    stream.start();
  };
  void load();

  return () => {
    left = true;
    stream?.stop();
    charts.destroy();
    phase.destroy();
    recordings.destroy();
    [refreshVideos, refreshCheckpoints, refreshLogs, refreshRunSoon].forEach((t) => t.cancel());
  };
}
