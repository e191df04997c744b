/** The sweeps list, live without polling: each active sweep's own stream
 * (`WS /api/sweeps/{id}/stream`) says when to read it again, and the service-wide events
 * (`WS /api/events`) show a new sweep by its first trial's run (and a deleted one by its
 * runs going). */

import { api, eventsUrl, sweepStreamUrl } from "../api/client";
import { formatNumber } from "../api/numbers";
import { SWEEP_FINISHED, type ServiceEvent, type Sweep, type SweepEvent } from "../api/types";
import { h, replaceChildren } from "../dom";
import type { RouteContext } from "../router";
import { SeqStream } from "../stream/seqStream";
import { newestFirst, trialsDone } from "../sweeps/sweepView";
import { createdTime, describeError, errorBox, setLiveState, statusBadge } from "./common";
import { plural } from "./liveState";

const LIMIT = 100;
const RETRY_MS = 5000;
const COLUMNS = ["Name", "Env", "Method", "Status", "Trials", "Best", "Created"];

export function sweepsListView(main: HTMLElement, _context: RouteContext): () => void {
  const sweeps = new Map<string, Sweep>();
  const followed = new Map<string, SeqStream<SweepEvent>>();
  const pending = new Map<string, ReturnType<typeof setTimeout>>();
  let events: SeqStream<ServiceEvent> | null = null;
  let stopped = false;
  let total = 0;

  const tbody = h("tbody");
  const count = h("span", { class: "muted", "aria-live": "polite" });
  const liveState = h("span", { class: "live-state muted", "aria-live": "polite" });
  const problem = h("div");
  main.append(
    h(
      "section",
      { "aria-labelledby": "sweeps-title" },
      h(
        "div",
        { class: "page-head" },
        h("h1", { id: "sweeps-title" }, "Sweeps"),
        count,
        liveState,
        h("a", { href: "/sweeps/new", class: "button" }, "New sweep"),
      ),
      problem,
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { class: "runs-table sweeps-table" },
          h("caption", { class: "visually-hidden" }, "Sweeps, newest first"),
          h(
            "thead",
            null,
            h(
              "tr",
              null,
              COLUMNS.map((c) => h("th", { scope: "col" }, c)),
            ),
          ),
          tbody,
        ),
      ),
    ),
  );

  const row = (sweep: Sweep): HTMLTableRowElement => {
    const cells = [
      [
        h("a", { href: `/sweeps/${encodeURIComponent(sweep.id)}` }, sweep.name),
        " ",
        h("code", { class: "muted" }, sweep.id),
      ],
      sweep.env,
      sweep.method,
      statusBadge(sweep.status),
      `${trialsDone(sweep)} / ${sweep.max_trials}`,
      sweep.best
        ? h(
            "a",
            { href: `/runs/${encodeURIComponent(sweep.best.run_id)}` },
            `${formatNumber(sweep.best.objective)} (#${sweep.best.trial})`,
          )
        : "–",
      createdTime(sweep.created_at),
    ];
    return h(
      "tr",
      { "data-sweep-id": sweep.id, "data-status": sweep.status },
      cells.map((content, i) => h("td", { "data-label": COLUMNS[i] }, content)),
    );
  };

  const render = (): void => {
    const items = newestFirst(sweeps.values());
    count.textContent = plural(total, "sweep");
    replaceChildren(
      tbody,
      items.length
        ? items.map(row)
        : h("tr", null, h("td", { colspan: COLUMNS.length, class: "muted" }, "No sweeps yet.")),
    );
  };

  /** Reads one sweep again (a little later, once for a burst of its events). */
  const refreshSweep = (id: string): void => {
    if (pending.has(id)) return;
    pending.set(
      id,
      setTimeout(async () => {
        pending.delete(id);
        try {
          const fresh = await api.getSweep(id);
          if (stopped) return;
          sweeps.set(id, fresh);
          render();
        } catch {
          if (!stopped) void load(); // gone: list again
        }
      }, 250),
    );
  };

  const follow = (sweep: Sweep): void => {
    if (followed.has(sweep.id) || SWEEP_FINISHED.includes(sweep.status)) return;
    const stream = new SeqStream<SweepEvent>({
      url: (after) => sweepStreamUrl(sweep.id, after),
      afterSeq: sweep.last_seq,
      isFinal: (event) => event.type === "status" && SWEEP_FINISHED.includes(event.status),
      onEvent: () => refreshSweep(sweep.id),
      onState: (state) => {
        if (state === "ended" || state === "failed") followed.delete(sweep.id);
      },
    });
    followed.set(sweep.id, stream);
    stream.start();
  };

  let debounce: ReturnType<typeof setTimeout> | undefined;
  const loadSoon = (): void => {
    clearTimeout(debounce);
    debounce = setTimeout(() => void load(), 250);
  };

  const followEvents = (afterSeq: number): void => {
    events = new SeqStream<ServiceEvent>({
      url: eventsUrl,
      afterSeq,
      onEvent: (event) => {
        const sweepId = event.type === "created" ? event.run.sweep_id : null;
        if ((sweepId && !sweeps.has(sweepId)) || event.type === "deleted") loadSoon();
      },
      onState: (state) => setLiveState(liveState, state, "list"),
      onResync: () => {
        events = null;
        void load();
      },
    });
    events.start();
  };

  let loads = 0;
  let retry: ReturnType<typeof setTimeout> | undefined;
  async function load(): Promise<void> {
    const mine = ++loads;
    try {
      // The runs list's events seq first: no sweep created after the list can be missed.
      const seq = events ? null : (await api.listRuns({ limit: 1 })).events_seq;
      const page = await api.listSweeps({ limit: LIMIT });
      if (stopped || mine !== loads) return;
      problem.replaceChildren();
      total = page.total;
      sweeps.clear();
      page.items.forEach((sweep) => sweeps.set(sweep.id, sweep));
      for (const [id, stream] of followed)
        if (!sweeps.has(id)) {
          stream.stop();
          followed.delete(id);
        }
      page.items.forEach(follow);
      render();
      if (seq !== null && !events) followEvents(seq);
    } catch (error) {
      if (stopped || mine !== loads) return;
      problem.replaceChildren(errorBox(`Could not load the sweeps: ${describeError(error)}`));
      clearTimeout(retry);
      retry = setTimeout(() => void load(), RETRY_MS);
    }
  }
  void load();

  return () => {
    stopped = true;
    events?.stop();
    followed.forEach((stream) => stream.stop());
    pending.forEach((timer) => clearTimeout(timer));
    clearTimeout(debounce);
    clearTimeout(retry);
  };
}
