/** The runs list: live status and progress (polled), filters, search, pick runs to compare. */

import { api, type RunFilters } from "../api/client";
import { formatNumber } from "../api/numbers";
import { RUN_STATUSES, type Run } from "../api/types";
import { h, replaceChildren, timeAgo } from "../dom";
import { navigate } from "../nav";
import type { RouteContext } from "../router";
import { describeError, envName, errorBox, latestEvalReward, progressBar, statusBadge } from "./common";

const POLL_MS = 2000;
const FILTER_KEYS = ["status", "kind", "tag", "q"] as const;

export function runsListView(main: HTMLElement, { query }: RouteContext): () => void {
  const filters: Record<(typeof FILTER_KEYS)[number], string> = { status: "", kind: "", tag: "", q: "" };
  for (const key of FILTER_KEYS) filters[key] = query.get(key) ?? "";
  const asQuery = (): RunFilters => ({
    limit: 200,
    ...filters,
    status: (filters.status || undefined) as RunFilters["status"],
  });
  const selected = new Set<string>();
  const rows = new Map<string, HTMLTableRowElement>();

  const tbody = h("tbody");
  const total = h("span", { class: "muted", "aria-live": "polite" });
  const problem = h("div");
  const compareButton = h(
    "button",
    {
      type: "button",
      props: { disabled: true },
      on: { click: () => navigate(`/compare?ids=${[...selected].map(encodeURIComponent).join(",")}`) },
    },
    "Compare selected",
  );

  const refreshCompare = () => {
    compareButton.disabled = selected.size < 2;
    compareButton.textContent = `Compare selected (${selected.size})`;
  };

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
    const key = field.name as (typeof FILTER_KEYS)[number];
    filters[key] = field.value;
    const params = new URLSearchParams();
    for (const k of FILTER_KEYS) if (filters[k]) params.set(k, filters[k]);
    history.replaceState(null, "", params.toString() ? `/?${params}` : "/");
    clearTimeout(debounce);
    debounce = setTimeout(() => void poll(), 250);
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
        ["Compare", "Name", "Status", "Kind", "Env", "Progress", "Eval reward", "Created"].map((c) =>
          h("th", { scope: "col" }, c),
        ),
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
        h("a", { href: "/runs/new", class: "button" }, "New run"),
      ),
      filterBar,
      problem,
      h("div", { class: "table-wrap" }, table),
      h("div", { class: "actions" }, compareButton),
    ),
  );
  refreshCompare();

  const renderRow = (run: Run): HTMLTableRowElement => {
    let row = rows.get(run.id);
    if (!row) {
      const checkbox = h("input", {
        type: "checkbox",
        "aria-label": `compare ${run.name}`,
        props: { checked: selected.has(run.id) },
        on: {
          change: (e) => {
            if ((e.target as HTMLInputElement).checked) selected.add(run.id);
            else selected.delete(run.id);
            refreshCompare();
          },
        },
      });
      row = h("tr", { "data-run-id": run.id }, h("td", { "data-label": "Compare" }, checkbox));
      for (let i = 0; i < 7; i++) row.append(h("td"));
      rows.set(run.id, row);
    }
    const cells = [...row.cells].slice(1);
    const content = [
      h("a", { href: `/runs/${encodeURIComponent(run.id)}` }, run.name || run.id),
      statusBadge(run.status),
      run.kind,
      envName(run),
      progressBar(run.steps, run.total_steps),
      formatNumber(latestEvalReward(run)),
      h(
        "time",
        {
          datetime: new Date(run.created_at * 1000).toISOString(),
          title: new Date(run.created_at * 1000).toLocaleString(),
        },
        timeAgo(run.created_at),
      ),
    ];
    const labels = ["Name", "Status", "Kind", "Env", "Progress", "Eval reward", "Created"];
    cells.forEach((cell, i) => {
      cell.setAttribute("data-label", labels[i] as string);
      // Replace a cell only when it changed, so keyboard focus inside the table survives polls.
      const scratch = h("td", null, content[i]);
      if (scratch.innerHTML !== cell.innerHTML) replaceChildren(cell, ...scratch.childNodes);
    });
    return row;
  };

  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  async function poll(): Promise<void> {
    clearTimeout(timer);
    try {
      const page = await api.listRuns(asQuery());
      if (stopped) return;
      problem.replaceChildren();
      total.textContent = `${page.total} run${page.total === 1 ? "" : "s"}`;
      const ordered = page.items.map(renderRow);
      tbody.replaceChildren(...ordered);
      if (!page.items.length) {
        tbody.append(h("tr", null, h("td", { colspan: 8, class: "muted" }, "No runs match.")));
      }
    } catch (error) {
      if (stopped) return;
      problem.replaceChildren(errorBox(`Could not load the runs: ${describeError(error)}`));
    }
    if (!stopped) timer = setTimeout(() => void poll(), POLL_MS);
  }
  void poll();

  return () => {
    stopped = true;
    clearTimeout(timer);
    clearTimeout(debounce);
  };
}

function labelled(text: string, control: HTMLInputElement | HTMLSelectElement): HTMLElement {
  const id = `filter-${control.name}`;
  control.id = id;
  return h("div", { class: "field inline" }, h("label", { for: id }, text), control);
}
