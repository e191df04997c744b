/** Picks a run and one of its checkpoints (a teacher, or a checkpoint to resume from). */

import { api } from "../api/client";
import { formatBytes, formatNumber } from "../api/numbers";
import type { CheckpointRef, Run } from "../api/types";
import { h, uid } from "../dom";

export interface CheckpointPicker {
  element: HTMLElement;
  read(): CheckpointRef | null;
  write(ref: CheckpointRef | null): Promise<void>;
  setRuns(runs: Run[]): void;
  setError(message: string | null): void;
  focus(): void;
}

export function createCheckpointPicker(options: {
  path: string;
  legend: string;
  help: string;
  allowNone: boolean;
}): CheckpointPicker {
  const id = uid(`pick-${options.path}`);
  const runSelect = h("select", {
    id: `${id}-run`,
    name: `${options.path}.run_id`,
    "aria-describedby": `${id}-help ${id}-error`,
  });
  const stepSelect = h("select", {
    id: `${id}-step`,
    name: `${options.path}.step`,
    props: { disabled: true },
  });
  const error = h("p", { class: "field-error", id: `${id}-error`, hidden: true });
  const element = h(
    "fieldset",
    { class: "picker field-wrap", "data-path": options.path },
    h("legend", null, options.legend),
    h("p", { class: "field-help", id: `${id}-help` }, options.help),
    h("div", { class: "field" }, h("label", { for: runSelect.id }, "Run"), runSelect),
    h("div", { class: "field" }, h("label", { for: stepSelect.id }, "Checkpoint"), stepSelect),
    error,
  );
  let runs: Run[] = [];
  let loadToken = 0;

  const fillRuns = (selectedId: string): void => {
    const choices = runs.map((run) =>
      h("option", { value: run.id }, `${run.name} · ${run.status} · ${run.id.slice(0, 8)}`),
    );
    if (selectedId && !runs.some((r) => r.id === selectedId))
      choices.unshift(h("option", { value: selectedId }, selectedId));
    const none = h("option", { value: "" }, options.allowNone ? "— none —" : "— pick a run —");
    runSelect.replaceChildren(none, ...choices);
    runSelect.value = selectedId;
  };

  const loadSteps = async (runId: string, selectedStep: number | null): Promise<void> => {
    const token = ++loadToken;
    stepSelect.replaceChildren(h("option", { value: "" }, "newest"));
    stepSelect.disabled = !runId;
    if (!runId) return;
    try {
      const page = await api.checkpoints(runId);
      if (token !== loadToken) return;
      const sorted = [...page.items].sort((a, b) => b.step - a.step);
      stepSelect.append(
        ...sorted.map((c) =>
          h(
            "option",
            { value: String(c.step) },
            `step ${formatNumber(c.step)} (${formatBytes(c.size_bytes)})`,
          ),
        ),
      );
      if (!sorted.length)
        stepSelect.append(h("option", { value: "", disabled: true }, "(no checkpoints yet)"));
    } catch {
      // The server names a bad choice when the run is submitted.
    }
    if (selectedStep !== null && ![...stepSelect.options].some((o) => o.value === String(selectedStep))) {
      stepSelect.append(h("option", { value: String(selectedStep) }, `step ${formatNumber(selectedStep)}`));
    }
    stepSelect.value = selectedStep === null ? "" : String(selectedStep);
  };

  runSelect.addEventListener("change", () => void loadSteps(runSelect.value, null));
  fillRuns("");

  return {
    element,
    read: () =>
      runSelect.value
        ? { run_id: runSelect.value, step: stepSelect.value === "" ? null : Number(stepSelect.value) }
        : null,
    write: async (ref) => {
      fillRuns(ref?.run_id ?? "");
      await loadSteps(ref?.run_id ?? "", ref?.step ?? null);
    },
    setRuns: (next) => {
      runs = next;
      fillRuns(runSelect.value);
    },
    setError: (message) => {
      error.hidden = message === null;
      error.textContent = message ?? "";
      element.classList.toggle("invalid", message !== null);
    },
    focus: () => runSelect.focus(),
  };
}
