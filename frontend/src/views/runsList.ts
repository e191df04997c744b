/** The runs list: live from the service-wide events (no polling), filters and search kept
 * in the URL, and bulk actions on the selected runs (compare, tag, delete). */

import { api, eventsUrl } from "../api/client";
import { formatNumber } from "../api/numbers";
import { RUN_STATUSES, type Run, type ServiceEvent } from "../api/types";
import { h, replaceChildren } from "../dom";
import { navigate } from "../nav";
import type { RouteContext } from "../router";
import { LiveRuns } from "../runs/liveRuns";
import {
  bulkState,
  compareHref,
  deletable,
  deletedMessage,
  deletePrompt,
  pruneSelection,
  taggedMessage,
  tagUpdates,
} from "../runs/selection";
import { SeqStream } from "../stream/seqStream";
import { FILTER_KEYS, filtersFromQuery, filtersToQuery, type FilterKey } from "../urlState";
import {
  createdTime,
  describeError,
  envName,
  errorBox,
  latestEvalReward,
  progressBar,
  setLiveState,
  kindLabel,
  statusBadge,
} from "./common";
import { confirmAction } from "./confirmDialog";
import { plural } from "./liveState";

const LIMIT = 200;
const RETRY_MS = 5000;
const COLUMNS = ["Name", "Status", "Kind", "Env", "Progress", "Eval reward", "Created"];

export function runsListView(main: HTMLElement, { query }: RouteContext): () => void {
  const filters = filtersFromQuery(query);
  const model = new LiveRuns(LIMIT);
  const selected = new Set<string>();
  const rows = new Map<string, HTMLTableRowElement>();
  let stopped = false;
  let stream: SeqStream<ServiceEvent> | null = null;

  const tbody = h("tbody");
  const total = h("span", { class: "muted", "aria-live": "polite" });
  const liveState = h("span", { class: "live-state muted", "aria-live": "polite" });
  const problem = h("div");
  const selectAll = h("input", { type: "checkbox", "aria-label": "select all shown runs" });
  const compareButton = h("button", { type: "button" }, "Compare selected");
  const tagInput = h("input", {
    type: "text",
    id: "bulk-tag",
    placeholder: "tag",
    maxlength: 64,
    "aria-label": "Tag to add to the selected runs",
  });
  const tagButton = h("button", { type: "button", class: "secondary" }, "Add tag");
  const deleteButton = h("button", { type: "button", class: "danger" }, "Delete selected");
  const bulkStatus = h("span", { class: "muted", "aria-live": "polite" });

  const selectedRuns = (): Run[] => pruneSelection(selected, (id) => model.get(id));

  const refreshBulk = (): void => {
    const state = bulkState(selected, selectedRuns(), model.items);
    compareButton.disabled = state.compareDisabled;
    compareButton.textContent = state.compareLabel;
    tagButton.disabled = state.tagDisabled;
    deleteButton.disabled = state.deleteDisabled;
    deleteButton.textContent = state.deleteLabel;
    selectAll.checked = state.allChecked;
    selectAll.indeterminate = state.someChecked;
  };

  compareButton.addEventListener("click", () => navigate(compareHref(selected)));
  selectAll.addEventListener("change", () => {
    for (const run of model.items) {
      if (selectAll.checked) selected.add(run.id);
      else selected.delete(run.id);
    }
    render();
  });
  const addTag = async (): Promise<void> => {
    const tag = tagInput.value.trim();
    if (!tag) {
      tagInput.focus();
      return;
    }
    const runs = selectedRuns();
    tagButton.disabled = true;
    try {
      await Promise.all(tagUpdates(runs, tag).map(({ id, tags }) => api.updateRun(id, { tags })));
      bulkStatus.textContent = taggedMessage(runs.length, tag);
      tagInput.value = "";
    } catch (error) {
      problem.replaceChildren(errorBox(`Could not tag: ${describeError(error)}`));
    }
    refreshBulk();
  };
  tagButton.addEventListener("click", () => void addTag());
  tagInput.addEventListener("keydown", (event) => {
    if (event.key === "Enter") void addTag();
  });
  deleteButton.addEventListener("click", async () => {
    const runs = deletable(selectedRuns());
    const prompt = deletePrompt(runs, selected.size - runs.length);
    const ok = await confirmAction(prompt.title, prompt.body, "Delete");
    if (!ok || stopped) return;
    const results = await Promise.allSettled(runs.map((run) => api.deleteRun(run.id)));
    const failed = results.filter((r) => r.status === "rejected").length;
    bulkStatus.textContent = deletedMessage(runs.length - failed);
    if (failed) problem.replaceChildren(errorBox(`${failed} run(s) could not be deleted.`));
  });

  const filterBar = h(
    "form",
    { class: "filters", role: "search", on: { submit: (e) => e.preventDefault() } },
    labelled(
      "Search",
      h("input", { type: "search", name: "q", placeholder: "name", props: { value: filters.q } }),
    ),
    labelled(
      "Status",
      h(
        "select",
        { name: "status" },
        h("option", { value: "" }, "any"),
        RUN_STATUSES.map((s) => h("option", { value: s, props: { selected: filters.status === s } }, s)),
      ),
    ),
    labelled(
      "Kind",
      h(
        "select",
        { name: "kind" },
        h("option", { value: "" }, "any"),
        ["ppo", "distillation"].map((k) =>
          h("option", { value: k, props: { selected: filters.kind === k } }, k),
        ),
      ),
    ),
    labelled(
      "Tag",
      h("input", { type: "text", name: "tag", placeholder: "tag", props: { value: filters.tag } }),
    ),
  );
  let debounce: ReturnType<typeof setTimeout> | undefined;
  filterBar.addEventListener("input", (event) => {
    const field = event.target as HTMLInputElement | HTMLSelectElement;
    if (!(FILTER_KEYS as readonly string[]).includes(field.name)) return;
    filters[field.name as FilterKey] = field.value.trim();
    const qs = filtersToQuery(filters);
    history.replaceState(null, "", qs ? `/?${qs}` : "/");
    clearTimeout(debounce);
    debounce = setTimeout(() => void load(), 250);
  });

  const table = h(
    "table",
    { class: "runs-table" },
    h("caption", { class: "visually-hidden" }, "Runs, newest first"),
    h(
      "thead",
      null,
      h(
        "tr",
        null,
        h("th", { scope: "col" }, selectAll),
        COLUMNS.map((c) => h("th", { scope: "col" }, c)),
      ),
    ),
    tbody,
  );

  main.append(
    h(
      "section",
      { "aria-labelledby": "runs-title" },
      h(
        "div",
        { class: "page-head" },
        h("h1", { id: "runs-title" }, "Runs"),
        total,
        liveState,
        h("a", { href: "/runs/new", class: "button" }, "New run"),
      ),
      filterBar,
      problem,
      h(
        "div",
        { class: "actions bulk-actions", role: "group", "aria-label": "Selected runs" },
        compareButton,
        h("span", { class: "bulk-tag" }, tagInput, tagButton),
        deleteButton,
        bulkStatus,
      ),
      h("div", { class: "table-wrap" }, table),
    ),
  );

  const renderRow = (run: Run): HTMLTableRowElement => {
    let row = rows.get(run.id);
    if (!row) {
      const checkbox = h("input", {
        type: "checkbox",
        class: "select-run",
        "aria-label": `select ${run.name}`,
        on: {
          change: (e) => {
            if ((e.target as HTMLInputElement).checked) selected.add(run.id);
            else selected.delete(run.id);
            refreshBulk();
          },
        },
      });
      row = h("tr", { "data-run-id": run.id }, h("td", { "data-label": "Select" }, checkbox));
      for (let i = 0; i < COLUMNS.length; i++) row.append(h("td"));
      rows.set(run.id, row);
    }
    const checkbox = row.querySelector<HTMLInputElement>("input.select-run");
    if (checkbox) {
      checkbox.checked = selected.has(run.id);
      checkbox.setAttribute("aria-label", `select ${run.name}`);
    }
    row.dataset.status = run.status;
    const cells = [...row.cells].slice(1);
    const content = [
      [
        h("a", { href: `/runs/${encodeURIComponent(run.id)}` }, run.name || run.id),
        run.tags.length
          ? h(
              "span",
              { class: "tags" },
              run.tags.map((t) => h("span", { class: "tag" }, t)),
            )
          : null,
      ],
      statusBadge(run.status),
      kindLabel(run),
      envName(run),
      progressBar(run.steps, run.total_steps),
      formatNumber(latestEvalReward(run)),
      createdTime(run.created_at),
    ];
    cells.forEach((cell, i) => {
      cell.setAttribute("data-label", COLUMNS[i] as string);
      // Replace a cell only when it changed, so keyboard focus inside the table survives updates.
      const scratch = h("td", null, content[i]);
      if (scratch.innerHTML !== cell.innerHTML) replaceChildren(cell, ...scratch.childNodes);
    });
    return row;
  };

  let frame: number | null = null;
  function render(): void {
    if (frame !== null) cancelAnimationFrame(frame);
    frame = null;
    const items = model.items;
    total.textContent = plural(model.total, "run");
    tbody.replaceChildren(...items.map(renderRow));
    for (const id of [...rows.keys()]) if (!model.get(id)) rows.delete(id);
    if (!items.length) tbody.append(h("tr", null, h("td", { colspan: 8, class: "muted" }, "No runs match.")));
    refreshBulk();
  }
  const renderSoon = (): void => {
    if (frame === null) frame = requestAnimationFrame(render);
  };

  const follow = (afterSeq: number): void => {
    stream = new SeqStream<ServiceEvent>({
      url: eventsUrl,
      afterSeq,
      onEvent: (event) => {
        if (model.apply(event)) renderSoon();
        if (model.stale) {
          clearTimeout(debounce);
          debounce = setTimeout(() => void load(), 250);
        }
      },
      onState: (state) => setLiveState(liveState, state, "list"),
      // The events since our list are gone (pruned, or another database): list again.
      onResync: () => {
        stream = null;
        void load();
      },
    });
    stream.start();
  };

  let loads = 0;
  let retry: ReturnType<typeof setTimeout> | undefined;
  async function load(): Promise<void> {
    const mine = ++loads;
    try {
      const page = await api.listRuns({
        limit: LIMIT,
        ...filters,
        status: (filters.status || undefined) as Run["status"] | undefined,
      });
      if (stopped || mine !== loads) return;
      problem.replaceChildren();
      model.setSnapshot(page.items, page.total, page.events_seq, filters);
      render();
      if (!stream) follow(model.seq);
    } catch (error) {
      if (stopped || mine !== loads) return;
      problem.replaceChildren(errorBox(`Could not load the runs: ${describeError(error)}`));
      clearTimeout(retry);
      retry = setTimeout(() => void load(), RETRY_MS); // until the list loads once
    }
  }
  void load();

  return () => {
    stopped = true;
    stream?.stop();
    clearTimeout(debounce);
    clearTimeout(retry);
    if (frame !== null) cancelAnimationFrame(frame);
  };
}

function labelled(text: string, control: HTMLInputElement | HTMLSelectElement): HTMLElement {
  const id = `filter-${control.name}`;
  control.id = id;
  return h("div", { class: "field inline" }, h("label", { for: id }, text), control);
}
