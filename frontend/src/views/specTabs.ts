/** The run form's two views of the spec: the form, and the JSON text submitted as is. */

import { h } from "../dom";

export interface SpecTabsOptions {
  form: HTMLElement;
  /** The form's spec as JSON text (shown when switching to JSON). */
  toJson: () => string;
  /** Loads JSON text into the form; throws when it does not parse. */
  fromJson: (text: string) => Promise<void>;
  submitJson: (text: string) => void;
  onParseError: () => void;
  /** The JSON view's label, help and button (default: a run spec for POST /api/runs). */
  jsonLabel?: string;
  jsonHelp?: string;
  submitLabel?: string;
}

export interface SpecTabs {
  tabs: HTMLElement;
  jsonView: HTMLElement;
  mode(): "form" | "json";
  setBusy(busy: boolean): void;
}

export function createSpecTabs(options: SpecTabsOptions): SpecTabs {
  const jsonText = h("textarea", {
    id: "spec-json",
    rows: 24,
    spellcheck: "false",
    class: "json-editor",
    "aria-describedby": "spec-json-help",
  });
  const jsonSubmit = h(
    "button",
    { type: "button", class: "primary", on: { click: () => options.submitJson(jsonText.value) } },
    options.submitLabel ?? "Start run from JSON",
  );
  const jsonView = h(
    "div",
    { class: "json-view", hidden: true },
    h("label", { for: "spec-json" }, options.jsonLabel ?? "Run spec (JSON)"),
    h(
      "p",
      { class: "field-help", id: "spec-json-help" },
      options.jsonHelp ?? "Edit freely: this text is sent to POST /api/runs exactly as it is.",
    ),
    jsonText,
    h("div", { class: "actions" }, jsonSubmit),
  );
  const tabForm = h("button", { type: "button", role: "tab", "aria-selected": "true" }, "Form");
  const tabJson = h(
    "button",
    { type: "button", role: "tab", "aria-selected": "false", tabindex: -1 },
    "JSON",
  );
  let mode: "form" | "json" = "form";

  const switchTo = async (next: "form" | "json"): Promise<void> => {
    if (next === mode) return;
    if (next === "json") {
      jsonText.value = options.toJson();
    } else {
      try {
        await options.fromJson(jsonText.value);
      } catch {
        options.onParseError();
        return;
      }
    }
    mode = next;
    options.form.hidden = next !== "form";
    jsonView.hidden = next !== "json";
    tabForm.setAttribute("aria-selected", String(next === "form"));
    tabJson.setAttribute("aria-selected", String(next === "json"));
    tabForm.tabIndex = next === "form" ? 0 : -1;
    tabJson.tabIndex = next === "json" ? 0 : -1;
    (next === "form" ? tabForm : tabJson).focus();
  };
  tabForm.addEventListener("click", () => void switchTo("form"));
  tabJson.addEventListener("click", () => void switchTo("json"));
  const tabs = h(
    "div",
    { role: "tablist", class: "tabs", "aria-label": "Edit the spec as" },
    tabForm,
    tabJson,
  );
  tabs.addEventListener("keydown", (event) => {
    if (event.key === "ArrowRight" || event.key === "ArrowLeft")
      void switchTo(mode === "form" ? "json" : "form");
  });

  return {
    tabs,
    jsonView,
    mode: () => mode,
    setBusy: (busy) => {
      jsonSubmit.disabled = busy;
    },
  };
}
