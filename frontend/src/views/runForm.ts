/**
 * The new-run form: every field of the run spec, with defaults shown; an editable JSON
 * view submitted as is; server validation errors shown next to the field they name.
 *
 * `?resume=<run>&step=<n>` prefills from that run with `resume_from` and a total past the
 *   checkpoint (`resumeTotal`);
 * `?teacher=<run>&step=<n>` prefills a distillation run with that teacher.
 */

import { api } from "../api/client";
import {
  TERMINAL_STATUSES,
  type CheckpointRef,
  type EnvInfo,
  type EnvPreset,
  type Run,
  type RunKind,
  type RunSpec,
} from "../api/types";
import { h } from "../dom";
import { createCheckpointPicker } from "../form/checkpointPicker";
import { createEnvField } from "../form/envField";
import { createFieldControl, type FieldControl } from "../form/fieldControl";
import { createGraphField } from "../form/graphField";
import { configSections, networkSection, type Section } from "../form/fields";
import { readValues, writeValues } from "../form/inputValues";
import {
  createPresetFiller,
  presetLoadingNote,
  presetOutcomeNote,
  presetSummary,
  specFromPreset,
} from "../form/presetFill";
import { createRandomizeField, RANDOMIZE_PATH } from "../form/randomizeField";
import { resumingSpec } from "../form/resumeTotal";
import { prefillOf, studentSpec } from "../form/runPrefill";
import {
  buildRunSpec,
  fieldValue,
  isPluginKind,
  networkKindOf,
  OVERRIDES_PATH,
  PLUGIN_KWARGS_PATH,
  pluginKwargsText,
  pluginNetworkChoices,
  textFields,
  type RunTextFields,
} from "../form/runSpec";
import { registeredFields, sectionTarget, type ErrorTarget } from "../form/formTargets";
import { getPath } from "../form/specPaths";
import type { RouteContext } from "../router";
import { mountSpecForm } from "./specForm";

/** The network section when the kind is graph (the graph editor) or a plugin (its
 * arguments' JSON): no field controls. */
const BARE_NETWORK_SECTION: Section = { path: ["network"], title: "Network", fields: [] };

export function runFormView(main: HTMLElement, { query }: RouteContext): () => void {
  let left = false;
  const targets = new Map<string, ErrorTarget>();
  const simpleField = registeredFields(targets);
  let sectionControls: FieldControl[] = [];

  // Run
  const kindInputs = (["ppo", "distillation"] as const).map((kind) =>
    h("input", {
      type: "radio",
      name: "kind",
      value: kind,
      id: `kind-${kind}`,
      props: { checked: kind === "ppo" },
    }),
  );
  const kindField = h(
    "fieldset",
    { class: "field-wrap kind", "data-path": "kind" },
    h("legend", null, "Kind"),
    kindInputs.map((input) =>
      h(
        "span",
        { class: "radio" },
        input,
        h("label", { for: input.id }, input.value === "ppo" ? "PPO" : "Distillation"),
      ),
    ),
  );
  const name = simpleField(
    "name",
    "Name",
    h("input", { type: "text", autocomplete: "off", maxlength: 200 }),
    "Optional; the server picks one when empty.",
  );
  const tags = simpleField(
    "tags",
    "Tags",
    h("input", { type: "text", autocomplete: "off" }),
    "Comma-separated, e.g. baseline, sweep-3.",
  );
  const notes = simpleField("notes", "Notes", h("textarea", { rows: 2 }), "Free text.");
  const env = createEnvField();
  const overrides = simpleField(
    OVERRIDES_PATH,
    "Env overrides",
    h("textarea", { rows: 2, spellcheck: "false", placeholder: '{"impl": "jax"}' }),
    "A JSON object of env config overrides (MuJoCo Playground envs).",
  );
  const randomize = createRandomizeField();
  let envInfo: EnvInfo | undefined;
  env.onInfo((info) => {
    envInfo = info;
    randomize.setEnv(info);
  });
  const networkKind = h(
    "select",
    { name: "network.kind" },
    h("option", { value: "mlp" }, "mlp"),
    h("option", { value: "lstm" }, "lstm"),
    h("option", { value: "graph" }, "graph"),
  );
  const networkKindField = simpleField(
    "network.kind",
    "Network kind",
    networkKind,
    "mlp: feed-forward; lstm: recurrent; graph: populations with delayed connections, as JSON; plugin:<name>: an installed package's network.",
  );
  // Installed plugin networks (GET /api/networks), and one a loaded spec names.
  const addNetworkKind = (kind: string, label = kind): void => {
    if ([...networkKind.options].some((option) => option.value === kind)) return;
    networkKind.append(h("option", { value: kind }, label));
  };
  void api
    .networks()
    .then((list) =>
      pluginNetworkChoices(list.items).forEach(({ kind, label }) => addNetworkKind(kind, label)),
    )
    .catch(() => {}); // the built-in kinds are there either way
  const pluginKwargs = simpleField(
    PLUGIN_KWARGS_PATH,
    "Network arguments",
    h("textarea", { rows: 2, spellcheck: "false", placeholder: '{"hidden": 64}' }),
    "A JSON object of the plugin network factory's keyword arguments; blank: its defaults.",
  );
  const pluginKwargsInput = pluginKwargs.element.querySelector("textarea") as HTMLTextAreaElement;
  const graph = createGraphField();
  const networkBox = h("div");
  const configBox = h("div");
  const networkError = h("p", { class: "field-error", hidden: true });
  const networkSectionEl = h(
    "fieldset",
    { class: "section", "data-path": "network" },
    h("legend", null, "Network"),
    networkError,
    networkBox,
  );

  const teacher = createCheckpointPicker({
    path: "teacher",
    legend: "Teacher",
    help: "A finished run whose checkpoint the student learns from (the newest one when none is picked).",
    allowNone: false,
  });
  const resume = createCheckpointPicker({
    path: "resume_from",
    legend: "Resume from",
    help: "Optional: continue from a checkpoint of another run.",
    allowNone: true,
  });

  // The simple fields' targets are set as they are made.
  for (const [path, target] of [
    ["env.name", env.target],
    ["env", env.target],
    [RANDOMIZE_PATH, randomize.target],
    ["teacher", teacher],
    ["resume_from", resume],
  ] as const) {
    targets.set(path, target);
  }
  const networkTarget = sectionTarget(networkSectionEl, networkError, () => networkKind.focus());
  targets.set("network", networkTarget);

  const currentKind = (): RunKind => (kindInputs.find((i) => i.checked)?.value as RunKind) ?? "ppo";

  /** Rebuilds the field controls of a group of sections, keeping values of same paths. */
  const buildSections = (
    box: HTMLElement,
    sections: Section[],
    previous: Map<string, unknown>,
  ): FieldControl[] => {
    const controls: FieldControl[] = [];
    box.replaceChildren(
      ...sections.map((section) => {
        const sectionControls = section.fields.map((def) => createFieldControl(def, section.path));
        sectionControls.forEach((control) => {
          if (previous.has(control.path)) control.write(previous.get(control.path));
        });
        controls.push(...sectionControls);
        if (section.path[0] === "network")
          return h(
            "div",
            { class: "field-grid" },
            networkKindField.element,
            sectionControls.map((c) => c.element),
          );
        const error = h("p", { class: "field-error", hidden: true });
        const fieldset = h(
          "fieldset",
          { class: "section", "data-path": section.path.join(".") },
          h("legend", null, section.title),
          error,
          h(
            "div",
            { class: "field-grid" },
            sectionControls.map((c) => c.element),
          ),
        );
        targets.set(
          section.path.join("."),
          sectionTarget(fieldset, error, () => sectionControls[0]?.focus()),
        );
        return fieldset;
      }),
    );
    return controls;
  };

  const snapshot = (): Map<string, unknown> => {
    const values = new Map<string, unknown>();
    sectionControls.forEach((control) => {
      const result = control.read();
      if (result.ok) values.set(control.path, result.value);
    });
    return values;
  };

  let networkControls: FieldControl[] = [];
  let configControls: FieldControl[] = [];
  const rebuild = (): void => {
    const previous = snapshot();
    sectionControls.forEach((control) => targets.delete(control.path));
    for (const section of configSections("ppo").concat(configSections("distillation")))
      targets.delete(section.path.join("."));
    const graphKind = networkKind.value === "graph";
    const pluginKind = isPluginKind(networkKind.value);
    const bare = graphKind || pluginKind;
    networkControls = buildSections(
      networkBox,
      [bare ? BARE_NETWORK_SECTION : networkSection(networkKind.value as "mlp" | "lstm")],
      previous,
    );
    // A graph's problems (network.populations.0.size, ...) show under its editor.
    targets.set("network", graphKind ? graph.target : networkTarget);
    if (graphKind) {
      networkBox.append(graph.element);
      graph.fillIfEmpty(envInfo);
    }
    if (pluginKind) networkBox.append(pluginKwargs.element);
    configControls = buildSections(configBox, configSections(currentKind()), previous);
    sectionControls = [...networkControls, ...configControls];
    sectionControls.forEach((control) => targets.set(control.path, control));
    teacher.element.hidden = currentKind() !== "distillation";
  };
  kindInputs.forEach((input) => input.addEventListener("change", rebuild));
  networkKind.addEventListener("change", rebuild);

  // The env presets fetched so far (GET /api/envs/{name}/preset), applied or not: what the
  // server fills a left-out field with. `presetOff`: the spec loaded says "preset": false.
  const presets = new Map<string, EnvPreset>();
  let presetOff = false;
  const fetchPreset = async (envName: string): Promise<EnvPreset> => {
    const preset = await api.envPreset(envName);
    presets.set(envName, preset);
    return preset;
  };

  // The free-text inputs, read and written as one `RunTextFields`.
  const textInputs: Record<keyof RunTextFields, HTMLInputElement | HTMLTextAreaElement> = {
    name: name.element.querySelector("input") as HTMLInputElement,
    tags: tags.element.querySelector("input") as HTMLInputElement,
    notes: notes.element.querySelector("textarea") as HTMLTextAreaElement,
    overrides: overrides.element.querySelector("textarea") as HTMLTextAreaElement,
  };

  /** The spec the form describes (see `buildRunSpec`), and where it has problems. */
  const buildSpec = (): { spec: RunSpec; problems: [ErrorTarget, string][] } => {
    const { spec, problems } = buildRunSpec({
      kind: currentKind(),
      env: env.value(),
      text: readValues(textInputs),
      network: networkKind.value,
      graph: networkKind.value === "graph" ? graph.read() : undefined,
      pluginKwargs: pluginKwargsInput.value,
      randomize: randomize.read(),
      randomizePath: RANDOMIZE_PATH,
      controls: sectionControls.map((control) => ({
        path: control.path,
        def: control.def,
        result: control.read(),
      })),
      teacher: teacher.read(),
      resume: resume.read(),
      preset: presetOff ? null : (presets.get(env.value()) ?? null),
    });
    return {
      spec,
      problems: problems.map(({ path, message }) => [targets.get(path) as ErrorTarget, message]),
    };
  };

  /** Fills the form from a spec (a run's, or the JSON view's). */
  const loadSpec = async (spec: Partial<RunSpec> & Record<string, unknown>): Promise<void> => {
    presetOff = spec.preset === false;
    kindInputs.forEach((input) => (input.checked = input.value === (spec.kind ?? "ppo")));
    writeValues(textInputs, textFields(spec));
    if (spec.env?.name) env.select(spec.env.name);
    randomize.write(spec.env?.randomize === true);
    const kind = spec.network?.kind as string | undefined;
    if (isPluginKind(kind)) addNetworkKind(kind);
    networkKind.value = networkKindOf(kind);
    if (kind === "graph") graph.write(spec.network as Record<string, unknown>);
    pluginKwargsInput.value = pluginKwargsText(spec.network as { kwargs?: unknown } | undefined);
    sectionControls = [];
    rebuild();
    for (const control of sectionControls)
      control.write(fieldValue(control.def, getPath(spec, control.path.split("."))));
    await Promise.all([
      teacher.write((spec.teacher as CheckpointRef | null | undefined) ?? null),
      resume.write((spec.resume_from as CheckpointRef | null | undefined) ?? null),
    ]);
  };

  // Picking an env fills every field from its preset (GET /api/envs/{name}/preset).
  const presetNote = h("p", { class: "muted preset-note", "aria-live": "polite" });
  const presetButton = h("button", { type: "button", class: "secondary" }, "Fill from preset");
  const filler = createPresetFiller(fetchPreset, async (preset) => {
    if (left) return;
    const { spec } = buildSpec();
    await loadSpec(specFromPreset(preset, { name: spec.name, tags: spec.tags, notes: spec.notes }));
    presetNote.textContent = presetSummary(preset);
  });
  const fillFrom = async (envName: string, force: boolean): Promise<void> => {
    presetNote.textContent = presetLoadingNote(envName);
    const note = presetOutcomeNote(await (force ? filler.fill(envName) : filler.picked(envName)), envName);
    if (note !== null) presetNote.textContent = note;
  };
  // Whether the user picked an env or edited a field yet: the default env's preset, filled
  // once the page's lists have loaded, must not overwrite what they did in the meantime.
  let touched = false;
  env.onPick((envName) => {
    touched = true;
    void fillFrom(envName, false);
  });
  presetButton.addEventListener("click", () => void fillFrom(env.value(), true));

  const page = mountSpecForm(main, {
    title: "New run",
    titleId: "form-title",
    formClass: "run-form",
    submitLabel: "Start run",
    fields: [
      h(
        "fieldset",
        { class: "section" },
        h("legend", null, "Run"),
        kindField,
        h("div", { class: "field-grid" }, name.element, tags.element),
        notes.element,
      ),
      h(
        "fieldset",
        { class: "section" },
        h("legend", null, "Environment"),
        h("div", { class: "field-grid" }, env.element, overrides.element),
        env.info,
        randomize.element,
        h("div", { class: "preset-row" }, presetButton, presetNote),
      ),
      teacher.element,
      networkSectionEl,
      configBox,
      resume.element,
    ],
    noun: "spec",
    rootLabel: "spec",
    targets: () => targets,
    clearMarks: () => targets.forEach((target) => target.setError(null)),
    check: () => {
      const { spec, problems } = buildSpec();
      if (!problems.length) return spec;
      problems.forEach(([target, message]) => target.setError(message));
      page.fixFirst(problems.length, "marked field");
      problems[0]?.[0].focus();
      return null;
    },
    send: (body: RunSpec | string) => api.submitRun(body),
    pageOf: (run) => `/runs/${encodeURIComponent(run.id)}`,
    left: () => left,
    toJson: () => JSON.stringify(buildSpec().spec, null, 2),
    fromJson: (text) => loadSpec(JSON.parse(text) as RunSpec & Record<string, unknown>),
  });

  page.form.addEventListener("input", (event) => {
    touched = true;
    if ((event.target as HTMLElement | null)?.closest('[data-path="env.name"]')) return;
    filler.edited();
  });

  rebuild();

  // Envs, runs for the pickers, and any prefill.
  const prefill = async (): Promise<void> => {
    const from = prefillOf(query);
    const [runsPage] = await Promise.all([
      api.listRuns({ limit: 200 }).catch(() => ({ items: [] as Run[], total: 0 })),
      env.load().catch(page.loadFailed("Could not load the environments")),
    ]);
    if (left) return;
    teacher.setRuns(runsPage.items.filter((r) => TERMINAL_STATUSES.includes(r.status)));
    resume.setRuns(runsPage.items);
    if (from.from === "resume") {
      await loadSpec(resumingSpec(await api.getRun(from.run), from.step));
    } else if (from.from === "teacher") {
      await loadSpec(studentSpec(await api.getRun(from.run), from.step));
    } else if (env.value()) {
      // A new run opens with the default env's preset, as the server would fill it, unless
      // the user has already picked an env (its own fill runs) or edited a field.
      if (!touched) await fillFrom(env.value(), false);
      return;
    }
    // A prefilled form keeps its values; the env's preset tells what to leave out.
    if (env.value() && !presetOff) await fetchPreset(env.value()).catch(() => undefined);
  };
  prefill().catch(page.loadFailed("Could not prefill the form"));

  return () => {
    left = true;
    env.stop();
    graph.stop();
  };
}
