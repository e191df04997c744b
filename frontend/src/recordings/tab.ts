/** The run page's Recordings tab: the run's recordings (followed while any is queued or
 * running: from the run stream's `recording` events, and by polling, since a finished run's
 * stream is closed), the form that starts one, and the recording opened. */

import { api } from "../api/client";
import { RECORDING_ACTIVE, type Recording } from "../api/types";
import { h } from "../dom";
import { describeError, errorBox, loading } from "../views/common";
import { createRecordForm } from "./recordForm";
import { renderRecordingList } from "./recordingList";
import { showRecording } from "./recordingView";

const POLL_MS = 1000;

export class RecordingsTab {
  readonly element: HTMLElement;
  private readonly listBox = h("div", { class: "rec-list" }, loading());
  private readonly problems = h("div", { "aria-live": "polite" });
  private readonly viewBox = h("div", { class: "rec-open" });
  private readonly form;
  private items: Recording[] = [];
  private selected: number | null;
  private closeView: (() => void) | null = null;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private left = false;

  constructor(
    private readonly runId: string,
    selected: number | null,
  ) {
    this.selected = selected;
    this.form = createRecordForm(runId, (recording) => this.upsert(recording));
    this.element = h(
      "div",
      { class: "recordings-tab" },
      h("h2", null, "Recordings"),
      this.problems,
      this.listBox,
      this.form.element,
      this.viewBox,
    );
  }

  /** Reads the list (and opens the recording asked for in the URL once it succeeded). */
  async refresh(): Promise<void> {
    clearTimeout(this.timer);
    try {
      const page = await api.recordings(this.runId);
      if (this.left) return;
      this.items = page.items;
      this.problems.replaceChildren();
      this.render();
    } catch (error) {
      if (!this.left)
        this.problems.replaceChildren(errorBox(`Could not load the recordings: ${describeError(error)}`));
    }
    this.schedule();
  }

  setCheckpoints(steps: number[]): void {
    this.form.setCheckpoints(steps);
  }

  /** A recording as the stream or a request answered it. */
  upsert(recording: Recording): void {
    const at = this.items.findIndex((r) => r.id === recording.id);
    if (at >= 0) this.items[at] = recording;
    else this.items.push(recording);
    this.render();
    this.schedule();
  }

  private schedule(): void {
    clearTimeout(this.timer);
    if (this.left || !this.items.some((r) => RECORDING_ACTIVE.includes(r.status))) return;
    this.timer = setTimeout(() => void this.refresh(), POLL_MS);
  }

  private render(): void {
    renderRecordingList(this.listBox, this.items, {
      selected: this.selected,
      open: (recording) => void this.open(recording.id),
      cancel: (recording, button) => {
        button.disabled = true;
        button.textContent = "Cancelling…";
        api
          .cancelRecording(this.runId, recording.id)
          .then((fresh) => this.upsert(fresh))
          .catch((error) => {
            button.disabled = false;
            this.problems.replaceChildren(
              errorBox(`Could not cancel #${recording.id}: ${describeError(error)}`),
            );
          });
      },
    });
    const wanted = this.items.find((r) => r.id === this.selected);
    if (wanted?.status === "succeeded" && !this.closeView) void this.open(wanted.id);
  }

  /** Opens recording `id` below the list (and names it in the URL). */
  async open(id: number): Promise<void> {
    this.closeView?.();
    this.closeView = () => {};
    this.selected = id;
    this.render();
    const url = new URL(window.location.href);
    url.searchParams.set("recording", String(id));
    history.replaceState(null, "", url.pathname + url.search);
    this.viewBox.replaceChildren(loading(`Loading recording #${id}…`));
    try {
      const detail = await api.recording(this.runId, id);
      if (this.left || this.selected !== id) return;
      this.closeView = showRecording(this.viewBox, this.runId, detail);
    } catch (error) {
      if (this.selected === id)
        this.viewBox.replaceChildren(errorBox(`Could not open recording #${id}: ${describeError(error)}`));
    }
  }

  destroy(): void {
    this.left = true;
    clearTimeout(this.timer);
    this.closeView?.();
  }
}
