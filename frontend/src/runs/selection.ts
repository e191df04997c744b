/** The runs list's selection and its bulk actions (compare, tag, delete). Pure: the view
 * (`views/runsList.ts`) shows what these say. */

import { TERMINAL_STATUSES, type Run } from "../api/types";
import { plural } from "../views/liveState";

/** What the bulk buttons and the select-all box show. */
export interface BulkState {
  compareDisabled: boolean;
  compareLabel: string;
  tagDisabled: boolean;
  deleteDisabled: boolean;
  deleteLabel: string;
  allChecked: boolean;
  someChecked: boolean;
}

/** Drops the selected ids no longer listed; returns the selected runs that are listed. */
export function pruneSelection(selected: Set<string>, get: (id: string) => Run | undefined): Run[] {
  for (const id of [...selected]) if (!get(id)) selected.delete(id);
  return [...selected].map(get).filter((r): r is Run => r !== undefined);
}

/** Runs a bulk delete may delete: the finished ones (an active run is cancelled first). */
export function deletable(runs: readonly Run[]): Run[] {
  return runs.filter((run) => TERMINAL_STATUSES.includes(run.status));
}

export function bulkState(
  selected: ReadonlySet<string>,
  selectedRuns: readonly Run[],
  shown: readonly Run[],
): BulkState {
  const finished = deletable(selectedRuns).length;
  const allChecked = shown.length > 0 && shown.every((run) => selected.has(run.id));
  return {
    compareDisabled: selected.size < 2,
    compareLabel: `Compare selected (${selected.size})`,
    tagDisabled: selected.size === 0,
    deleteDisabled: finished === 0,
    deleteLabel: `Delete selected (${finished})`,
    allChecked,
    someChecked: !allChecked && shown.some((run) => selected.has(run.id)),
  };
}

/** The compare page for these run ids. */
export function compareHref(ids: Iterable<string>): string {
  return `/compare?ids=${[...ids].map(encodeURIComponent).join(",")}`;
}

/** The tag lists to send so that every run has `tag` (runs that have it are left out). */
export function tagUpdates(runs: readonly Run[], tag: string): { id: string; tags: string[] }[] {
  return runs
    .filter((run) => !run.tags.includes(tag))
    .map((run) => ({ id: run.id, tags: [...run.tags, tag] }));
}

export function taggedMessage(count: number, tag: string): string {
  return `Tagged ${plural(count, "run")} “${tag}”.`;
}

/** The confirmation a bulk delete asks: `skipped` selected runs are still active. */
export function deletePrompt(runs: readonly Run[], skipped: number): { title: string; body: string } {
  const names = runs.map((run) => run.name || run.id);
  return {
    title: `Delete ${plural(runs.length, "run")}?`,
    body:
      `${names.slice(0, 5).join(", ")}${names.length > 5 ? ", …" : ""}: their metrics, ` +
      `checkpoints and videos are deleted for good.` +
      (skipped ? ` ${skipped} selected run(s) still active are left alone.` : ""),
  };
}

export function deletedMessage(deleted: number): string {
  return `Deleted ${plural(deleted, "run")}.`;
}
