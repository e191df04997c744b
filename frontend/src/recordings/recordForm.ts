/** The form that starts a recording job: the checkpoint (the newest, or a chosen step),
 * envs, steps, seed, video. A refused request (422) shows each problem under the form and
 * marks the fields it names. */

import { ApiError } from "../api/http";
import { api } from "../api/client";
import { formatNumber } from "../api/numbers";
import type { Recording, RecordingCreate } from "../api/types";
import { h } from "../dom";
import { describeError } from "../views/common";

export interface RecordForm {
  element: HTMLElement;
  /** The checkpoints' steps to choose from (the newest stays the default). */
  setCheckpoints(steps: number[]): void;
}

function numberField(id: string, label: string, value: number, min: number): [HTMLElement, HTMLInputElement] {
  const input = h("input", {
    id,
    type: "number",
    min,
    step: 1,
    required: true,
    props: { value: String(value) },
  });
  return [h("div", { class: "field" }, h("label", { for: id }, label), input), input];
}

export function createRecordForm(runId: string, created: (recording: Recording) => void): RecordForm {
  const step = h("select", { id: "rec-new-step" }, h("option", { value: "" }, "Newest"));
  const [envsField, envs] = numberField("rec-new-envs", "Envs", 8, 1);
  const [lengthField, length] = numberField("rec-new-length", "Steps", 1000, 1);
  const [seedField, seed] = numberField("rec-new-seed", "Seed", 0, 0);
  const video = h("input", { id: "rec-new-video", type: "checkbox" });
  const submit = h("button", { type: "submit", class: "primary" }, "Record");
  const problems = h("div", { class: "rec-form-problems", "aria-live": "polite" });
  const inputs: Record<string, HTMLInputElement | HTMLSelectElement> = {
    step,
    n_envs: envs,
    episode_length: length,
    seed,
    video,
  };
  const form = h(
    "form",
    { class: "rec-form", "aria-label": "New recording" },
    h("div", { class: "field" }, h("label", { for: step.id }, "Checkpoint"), step),
    envsField,
    lengthField,
    seedField,
    h("div", { class: "field checkbox" }, video, h("label", { for: video.id }, "Video of env 0")),
    h("div", { class: "actions" }, submit),
  );

  const body = (): RecordingCreate => ({
    step: step.value === "" ? null : Number(step.value),
    n_envs: Number(envs.value),
    episode_length: Number(length.value),
    seed: Number(seed.value),
    video: video.checked,
  });
  const showProblems = (error: unknown): void => {
    Object.values(inputs).forEach((input) => input.removeAttribute("aria-invalid"));
    const items = error instanceof ApiError ? error.validationErrors : [];
    items.forEach((item) => inputs[String(item.loc[1])]?.setAttribute("aria-invalid", "true"));
    const lines = items.length
      ? items.map((item) => `${item.loc.slice(1).join(".")}: ${item.msg}`)
      : [describeError(error)];
    problems.replaceChildren(
      h(
        "div",
        { class: "error-box", role: "alert" },
        h("strong", null, "Not recorded: "),
        h(
          "ul",
          null,
          [...new Set(lines)].map((line) => h("li", null, line)),
        ),
      ),
    );
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit.disabled = true;
    problems.replaceChildren();
    api
      .record(runId, body())
      .then((recording) => {
        Object.values(inputs).forEach((input) => input.removeAttribute("aria-invalid"));
        created(recording);
      })
      .catch(showProblems)
      .finally(() => (submit.disabled = false));
  });

  return {
    element: h("section", { class: "rec-new" }, h("h2", null, "New recording"), form, problems),
    setCheckpoints: (steps) => {
      const chosen = step.value;
      step.replaceChildren(
        h("option", { value: "" }, "Newest"),
        ...[...steps]
          .sort((a, b) => b - a)
          .map((s) => h("option", { value: String(s) }, `step ${formatNumber(s)}`)),
      );
      step.value = steps.map(String).includes(chosen) ? chosen : "";
    },
  };
}
