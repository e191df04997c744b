/** A run's name, tags and notes, editable in place (PATCH /api/runs/{id}). Live updates
 * of the run never overwrite a field while it is being edited. */

import { api } from "../api/client";
import type { Run } from "../api/types";
import { h } from "../dom";
import { describeError } from "./common";

export class RunMeta {
  /** The title (h1) with its rename control. */
  readonly title: HTMLElement;
  /** Tags and notes. */
  readonly details: HTMLElement;
  private run: Run | null = null;
  private readonly heading = h("h1", { class: "run-title" });
  private readonly renameButton = h(
    "button",
    { type: "button", class: "secondary small", "aria-label": "Rename the run" },
    "Rename",
  );
  private readonly nameInput = h("input", {
    type: "text",
    id: "run-name",
    maxlength: 200,
    "aria-label": "Run name",
    class: "name-input",
  });
  private readonly tagsBox = h("span", { class: "tags" });
  private readonly tagInput = h("input", {
    type: "text",
    id: "run-tag",
    placeholder: "add a tag",
    maxlength: 64,
    "aria-label": "Add a tag",
  });
  private readonly notes = h("textarea", {
    id: "run-notes",
    rows: 2,
    maxlength: 10000,
    placeholder: "notes",
  });
  private readonly saveNotes = h("button", { type: "button", class: "secondary small" }, "Save notes");
  private readonly status = h("span", { class: "muted meta-status", "aria-live": "polite" });

  constructor(
    private readonly runId: string,
    private readonly onSaved: (run: Run) => void,
  ) {
    this.nameInput.hidden = true;
    this.title = h("div", { class: "run-title-row" }, this.heading, this.nameInput, this.renameButton);
    this.details = h(
      "div",
      { class: "run-meta" },
      h("div", { class: "field inline" }, h("span", { class: "label" }, "Tags"), this.tagsBox, this.tagInput),
      h(
        "div",
        { class: "field notes-field" },
        h("label", { for: "run-notes" }, "Notes"),
        this.notes,
        h("div", { class: "actions" }, this.saveNotes, this.status),
      ),
    );
    this.renameButton.addEventListener("click", () => this.startRename());
    this.nameInput.addEventListener("keydown", (event) => {
      if (event.key === "Enter") void this.finishRename(true);
      if (event.key === "Escape") void this.finishRename(false);
    });
    this.nameInput.addEventListener("blur", () => void this.finishRename(true));
    this.tagInput.addEventListener("keydown", (event) => {
      if (event.key !== "Enter") return;
      const tag = this.tagInput.value.trim();
      if (!tag || !this.run) return;
      this.tagInput.value = "";
      if (!this.run.tags.includes(tag)) void this.save({ tags: [...this.run.tags, tag] }, "Tag added");
    });
    this.saveNotes.disabled = true;
    this.notes.addEventListener("input", () => {
      this.saveNotes.disabled = this.notes.value === (this.run?.notes ?? "");
    });
    this.saveNotes.addEventListener(
      "click",
      () => void this.save({ notes: this.notes.value }, "Notes saved"),
    );
  }

  update(run: Run): void {
    this.run = run;
    this.heading.textContent = run.name || run.id;
    if (document.activeElement !== this.notes && this.saveNotes.disabled) this.notes.value = run.notes;
    const chips = run.tags.map((tag) =>
      h(
        "span",
        { class: "tag", "data-tag": tag },
        tag,
        h(
          "button",
          {
            type: "button",
            class: "tag-remove",
            "aria-label": `remove tag ${tag}`,
            on: { click: () => void this.save({ tags: run.tags.filter((t) => t !== tag) }, "Tag removed") },
          },
          "×",
        ),
      ),
    );
    const signature = run.tags.join("\u0000");
    if (this.tagsBox.dataset.tags !== signature) {
      this.tagsBox.dataset.tags = signature;
      this.tagsBox.replaceChildren(...(chips.length ? chips : [h("span", { class: "muted" }, "none")]));
    }
  }

  private startRename(): void {
    if (!this.run) return;
    this.nameInput.value = this.run.name;
    this.heading.hidden = this.renameButton.hidden = true;
    this.nameInput.hidden = false;
    this.nameInput.focus();
    this.nameInput.select();
  }

  private async finishRename(keep: boolean): Promise<void> {
    if (this.nameInput.hidden) return;
    this.nameInput.hidden = true;
    this.heading.hidden = this.renameButton.hidden = false;
    const name = this.nameInput.value.trim();
    if (keep && name && name !== this.run?.name) await this.save({ name }, "Renamed");
    this.renameButton.focus();
  }

  private async save(patch: { name?: string; tags?: string[]; notes?: string }, done: string): Promise<void> {
    this.status.textContent = "Saving…";
    try {
      const run = (await api.updateRun(this.runId, patch)) as Run;
      this.saveNotes.disabled = true;
      this.update(run);
      this.onSaved(run);
      this.status.textContent = done;
    } catch (error) {
      this.status.textContent = `Not saved: ${describeError(error)}`;
    }
  }
}
