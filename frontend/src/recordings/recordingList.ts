/** The run's recordings as a table: status, checkpoint step, envs, steps, size; open a
 * recording that succeeded, cancel one that is queued or running, download its data. */

import { api } from "../api/client";
import { formatBytes, formatNumber } from "../api/numbers";
import { RECORDING_ACTIVE, type Recording } from "../api/types";
import { h } from "../dom";
import { createdTime, statusBadge } from "../views/common";

export interface ListActions {
  selected: number | null;
  open(recording: Recording): void;
  cancel(recording: Recording, button: HTMLButtonElement): void;
}

/** The size column: the stored size once it succeeded, else "~" the estimate. */
export function recordingSize(recording: Pick<Recording, "bytes" | "estimated_bytes">): string {
  return recording.bytes !== null && recording.bytes !== undefined
    ? formatBytes(recording.bytes)
    : `~${formatBytes(recording.estimated_bytes)}`;
}

function actionsCell(recording: Recording, actions: ListActions): HTMLElement {
  const cell = h("td", { class: "rec-actions" });
  if (recording.status === "succeeded") {
    const selected = recording.id === actions.selected;
    cell.append(
      h(
        "button",
        {
          type: "button",
          class: selected ? "primary" : "secondary",
          "aria-pressed": String(selected),
          on: { click: () => actions.open(recording) },
        },
        `Open #${recording.id}`,
      ),
      h(
        "a",
        {
          class: "button secondary",
          href: api.recordingDataUrl(recording.run_id, recording.id),
          download: `${recording.run_id}-recording-${recording.id}.npz`,
        },
        ".npz",
      ),
    );
  }
  if (RECORDING_ACTIVE.includes(recording.status)) {
    const button = h(
      "button",
      { type: "button", class: "danger", on: { click: () => actions.cancel(recording, button) } },
      recording.cancel_requested ? "Cancelling…" : `Cancel #${recording.id}`,
    );
    button.disabled = recording.cancel_requested;
    cell.append(button);
  }
  return cell;
}

export function renderRecordingList(box: HTMLElement, items: Recording[], actions: ListActions): void {
  if (!items.length) {
    box.replaceChildren(h("p", { class: "muted" }, "No recordings yet: record one below."));
    return;
  }
  const sorted = [...items].sort((a, b) => b.id - a.id);
  const rows = sorted.map((r) =>
    h(
      "tr",
      { "data-recording": r.id, "data-status": r.status },
      h("td", null, `#${r.id}`),
      h("td", null, statusBadge(r.status), r.error ? h("div", { class: "rec-error muted" }, r.error) : null),
      h("td", { class: "num" }, formatNumber(r.step)),
      h("td", { class: "num" }, formatNumber(r.n_envs)),
      h("td", { class: "num" }, formatNumber(r.episode_length)),
      h("td", null, r.video ? "yes" : "no"),
      h("td", { class: "num" }, recordingSize(r)),
      h("td", null, createdTime(r.created_at)),
      actionsCell(r, actions),
    ),
  );
  const head = ["Id", "Status", "Checkpoint", "Envs", "Steps", "Video", "Size", "Created", "Actions"];
  box.replaceChildren(
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "recordings" },
        h("caption", { class: "visually-hidden" }, "Recordings, newest first"),
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            head.map((c) => h("th", { scope: "col" }, c)),
          ),
        ),
        h("tbody", null, rows),
      ),
    ),
  );
}
