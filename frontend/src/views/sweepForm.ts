/**
 * The new-sweep form: a base run (its spec is what each trial changes), the method, sizes,
 * objective and pruner, and the search space as a list of entries (spec path, kind, range or
 * values). A JSON tab edits and submits the request body as text. The server's 422s are
 * shown under the field their `loc` names (`space.<path>` under that entry).
 *
 * `?from=<run>` bases the sweep on that run ("Sweep around this run").
 */

import { api } from "../api/client";
import type { Run, RunSpec, SweepCreate } from "../api/types";
import { h, uid } from "../dom";
import { registeredFields, sectionTarget, type ErrorTarget } from "../form/formTargets";
import { readValues, writeValues } from "../form/inputValues";
import type { RouteContext } from "../router";
import {
  baseSpec,
  bodyToForm,
  emptyRow,
  formToBody,
  METHODS,
  PRUNERS,
  RANGE_KINDS,
  settingsOf,
  SPACE_KINDS,
  type FormProblem,
  type SettingKey,
  type SpaceKind,
  type SpaceRow,
  type SweepFormState,
} from "../sweeps/sweepBody";
import {
  baseRunChoices,
  baseRunLabel,
  defaultSweepName,
  knownPaths,
  metricNames,
  rowMessage,
} from "../sweeps/sweepChoices";
import { mountSpecForm } from "./specForm";

const KIND_LABELS: Record<SpaceKind, string> = {
  log_uniform: "log uniform",
  uniform: "uniform",
  int_uniform: "integer uniform",
  choice: "choice",
  grid: "grid",
};

interface RowControls {
  element: HTMLElement;
  read(): SpaceRow;
  target: ErrorTarget;
  inputs: Record<string, HTMLInputElement | HTMLSelectElement>;
}

function select<T extends string>(options: readonly T[], labels?: Record<T, string>): HTMLSelectElement {
  return h(
    "select",
    null,
    options.map((o) => h("option", { value: o }, labels?.[o] ?? o)),
  );
}

export function sweepFormView(main: HTMLElement, { query }: RouteContext): () => void {
  let left = false;
  let spec: RunSpec | null = null;
  let rows: RowControls[] = [];
  let prunerOptions: Record<string, unknown> | null = null;
  let seed: number | null = null;
  const targets = new Map<string, ErrorTarget>();
  // Each field's errors show at its path (`targets`).
  const simpleField = registeredFields(targets);

  const baseRun = h("select", null, h("option", { value: "" }, "Loading runs…"));
  const base = simpleField(
    "spec",
    "Base run",
    baseRun,
    "Each trial is this run's spec with the space's values.",
  );
  const nameInput = h("input", { type: "text", autocomplete: "off", maxlength: 200 });
  const name = simpleField("name", "Name", nameInput, "Optional; trials are named after it.");
  const methodSelect = select(METHODS);
  const method = simpleField(
    "method",
    "Method",
    methodSelect,
    "tpe: Bayesian; random; grid: every combination of choice/grid values.",
  );
  const maxInput = h("input", { type: "number", min: 1, max: 1000, inputmode: "numeric" });
  const maxTrials = simpleField("max_trials", "Max trials", maxInput, "Empty: the grid's size, else 20.");
  const parallelInput = h("input", { type: "number", min: 1, max: 32, inputmode: "numeric" });
  const parallel = simpleField("parallel", "Parallel", parallelInput, "Trials queued or running at once.");
  const metricInput = h("input", {
    type: "text",
    autocomplete: "off",
    list: "sweep-metrics",
    props: { value: "eval/episode_reward" },
  });
  const metric = simpleField(
    "objective.metric",
    "Objective metric",
    metricInput,
    "Its last value is a trial's objective.",
  );
  const modeSelect = select(["max", "min"] as const, { max: "maximise", min: "minimise" });
  const mode = simpleField("objective.mode", "Mode", modeSelect, "Whether higher or lower is better.");
  const prunerSelect = select(PRUNERS, { off: "off", median: "median", asha: "ASHA" });
  const pruner = simpleField(
    "pruner",
    "Pruner",
    prunerSelect,
    "Stops trials early: median (below the median at the same step) or ASHA.",
  );
  const metricList = h("datalist", { id: "sweep-metrics" });
  const pathList = h(
    "datalist",
    { id: "sweep-paths" },
    knownPaths().map((p) => h("option", { value: p })),
  );

  const rowBox = h("div", { class: "space-rows" });
  const spaceError = h("p", { class: "field-error", hidden: true });
  const addButton = h("button", { type: "button", class: "secondary" }, "Add parameter");
  const spaceSection = h(
    "fieldset",
    { class: "section", "data-path": "space" },
    h("legend", null, "Search space"),
    h(
      "p",
      { class: "field-help" },
      "Spec paths (config.<field>…, network.<field>, env.overrides.<field>) and their values. " +
        "Choice and grid values are separated by commas: [32, 32], [64, 64] or relu, tanh.",
    ),
    spaceError,
    rowBox,
    h("div", { class: "actions" }, addButton),
  );
  const spaceTarget = sectionTarget(spaceSection, spaceError, () => addButton.focus());

  const createRow = (initial: SpaceRow): RowControls => {
    const id = uid("space");
    const labelled = (text: string, input: HTMLInputElement | HTMLSelectElement, key: string) => {
      input.id = `${id}-${key}`;
      input.setAttribute("aria-describedby", `${id}-error`);
      return h("div", { class: `field space-${key}` }, h("label", { for: input.id }, text), input);
    };
    const path = h("input", {
      type: "text",
      autocomplete: "off",
      spellcheck: "false",
      list: "sweep-paths",
      placeholder: "config.ppo.learning_rate",
      props: { value: initial.path },
    });
    const kind = select(SPACE_KINDS, KIND_LABELS);
    kind.value = initial.kind;
    const low = h("input", { type: "text", inputmode: "decimal", props: { value: initial.low } });
    const high = h("input", { type: "text", inputmode: "decimal", props: { value: initial.high } });
    const values = h("input", {
      type: "text",
      spellcheck: "false",
      placeholder: "[32, 32], [64, 64]",
      props: { value: initial.values },
    });
    const lowField = labelled("Low", low, "low");
    const highField = labelled("High", high, "high");
    const valuesField = labelled("Values", values, "values");
    const showKind = (): void => {
      const range = RANGE_KINDS.includes(kind.value as SpaceKind);
      lowField.hidden = highField.hidden = !range;
      valuesField.hidden = range;
    };
    kind.addEventListener("change", showKind);
    showKind();
    const error = h("p", { class: "field-error", id: `${id}-error`, hidden: true });
    const remove = h(
      "button",
      { type: "button", class: "secondary", "aria-label": "Remove this parameter" },
      "Remove",
    );
    const element = h(
      "div",
      { class: "space-row", "data-space-row": "" },
      h(
        "div",
        { class: "space-inputs" },
        labelled("Spec path", path, "path"),
        labelled("Kind", kind, "kind"),
        lowField,
        highField,
        valuesField,
        remove,
      ),
      error,
    );
    const inputs = { path, kind, low, high, values };
    const controls: RowControls = {
      element,
      inputs,
      read: () => ({
        path: path.value,
        kind: kind.value as SpaceKind,
        low: low.value,
        high: high.value,
        values: values.value,
      }),
      target: sectionTarget(element, error, () => path.focus()),
    };
    remove.addEventListener("click", () => {
      rows = rows.filter((r) => r !== controls);
      element.remove();
      addButton.focus();
    });
    return controls;
  };

  const setRows = (space: SpaceRow[]): void => {
    rows = space.map(createRow);
    rowBox.replaceChildren(...rows.map((r) => r.element));
  };
  addButton.addEventListener("click", () => {
    const row = createRow(emptyRow());
    rows.push(row);
    rowBox.append(row.element);
    row.inputs.path?.focus();
  });

  // The settings typed in plain inputs, in the order they are written.
  const settingInputs: Record<SettingKey, HTMLInputElement | HTMLSelectElement> = {
    name: nameInput,
    method: methodSelect,
    maxTrials: maxInput,
    parallel: parallelInput,
    metric: metricInput,
    mode: modeSelect,
    pruner: prunerSelect,
  };

  const readState = (): SweepFormState => ({
    ...settingsOf(readValues(settingInputs)),
    prunerOptions,
    seed,
    space: rows.map((r) => r.read()),
    spec: spec ?? ({} as RunSpec),
  });

  const writeState = (state: SweepFormState): void => {
    writeValues(settingInputs, state);
    prunerOptions = state.prunerOptions;
    seed = state.seed;
    spec = state.spec;
    setRows(state.space);
  };

  const clearMarks = (): void => {
    targets.forEach((t) => t.setError(null));
    spaceTarget.setError(null);
    rows.forEach((r) => {
      r.target.setError(null);
      Object.values(r.inputs).forEach((input) => input.removeAttribute("aria-invalid"));
    });
  };

  /** Every target by the path a 422 names: the fixed fields, the space, and each entry. */
  const allTargets = (): Map<string, ErrorTarget> => {
    const out = new Map(targets);
    out.set("space", spaceTarget);
    rows.forEach((row) => {
      const path = row.read().path.trim();
      if (path) out.set(`space.${path}`, row.target);
    });
    return out;
  };

  const showFormProblems = (problems: FormProblem[]): void => {
    for (const problem of problems) {
      if (problem.row === null) {
        (problem.field === "space" ? spaceTarget : targets.get(problem.field))?.setError(problem.message);
        continue;
      }
      const row = rows[problem.row];
      if (!row) continue;
      row.target.setError(rowMessage(problems, problem.row));
      row.inputs[problem.field]?.setAttribute("aria-invalid", "true");
    }
    page.fixFirst(problems.length, "marked problem");
    const first = problems[0];
    if (first?.row !== null && first?.row !== undefined) rows[first.row]?.inputs[first.field]?.focus();
    else if (first) (first.field === "space" ? spaceTarget : targets.get(first.field))?.focus();
  };

  /** The body to send, or null when the form marked what to fix first. */
  const check = (): SweepCreate | null => {
    if (!spec) {
      base.target.setError("pick the run whose spec the trials start from");
      base.target.focus();
      return null;
    }
    const { body, problems } = formToBody(readState());
    if (!problems.length) return body;
    showFormProblems(problems);
    return null;
  };

  const page = mountSpecForm(main, {
    title: "New sweep",
    titleId: "sweep-form-title",
    formClass: "run-form sweep-form",
    submitLabel: "Start sweep",
    fields: [
      h(
        "fieldset",
        { class: "section" },
        h("legend", null, "Sweep"),
        h("div", { class: "field-grid" }, base.element, name.element, method.element, maxTrials.element),
        h("div", { class: "field-grid" }, parallel.element, pruner.element),
      ),
      h(
        "fieldset",
        { class: "section" },
        h("legend", null, "Objective"),
        h("div", { class: "field-grid" }, metric.element, mode.element),
      ),
      spaceSection,
      metricList,
      pathList,
    ],
    noun: "sweep",
    rootLabel: "body",
    targets: allTargets,
    clearMarks,
    check,
    send: (body: SweepCreate | string) => api.submitSweep(body),
    pageOf: (sweep) => `/sweeps/${encodeURIComponent(sweep.id)}`,
    left: () => left,
    toJson: () => JSON.stringify(formToBody(readState()).body, null, 2),
    fromJson: async (text) => writeState(bodyToForm(JSON.parse(text) as SweepCreate)),
    json: {
      jsonLabel: "Sweep (JSON)",
      jsonHelp: "Edit freely: this text is sent to POST /api/sweeps exactly as it is.",
      submitLabel: "Start sweep from JSON",
    },
  });
  setRows([
    { ...emptyRow(), path: "config.ppo.learning_rate", kind: "log_uniform", low: "1e-4", high: "3e-3" },
  ]);

  const useRun = (run: Run): void => {
    spec = baseSpec(run.spec);
    metricList.replaceChildren(...metricNames(run).map((k) => h("option", { value: k })));
    if (!nameInput.value) nameInput.value = defaultSweepName(run);
  };
  let runs: Run[] = [];
  baseRun.addEventListener("change", () => {
    const run = runs.find((r) => r.id === baseRun.value);
    if (run) useRun(run);
    else spec = null;
  });

  const prefill = async (): Promise<void> => {
    const from = query.get("from");
    const [page, fromRun] = await Promise.all([
      api.listRuns({ limit: 200 }),
      from ? api.getRun(from) : Promise.resolve(null),
    ]);
    if (left) return;
    runs = baseRunChoices(page.items, fromRun);
    baseRun.replaceChildren(
      h("option", { value: "" }, runs.length ? "Pick a run" : "No runs yet: start one first"),
      ...runs.map((r) => h("option", { value: r.id }, baseRunLabel(r))),
    );
    if (fromRun) {
      baseRun.value = fromRun.id;
      useRun(fromRun);
    }
  };
  prefill().catch(page.loadFailed("Could not load the runs"));

  return () => {
    left = true;
  };
}
