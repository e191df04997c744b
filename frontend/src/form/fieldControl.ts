/** One form control per spec field: renders it, reads it back as JSON, shows its error. */

import { h, uid } from "../dom";
import { LOGGING_FLAGS, type FieldDef } from "./fields";

export type ReadResult = { ok: true; value: unknown } | { ok: false; message: string };

export interface FieldControl {
  /** The field's dotted path in the spec, e.g. `config.ppo.n_envs`. */
  readonly path: string;
  readonly def: FieldDef;
  readonly element: HTMLElement;
  read(): ReadResult;
  write(value: unknown): void;
  setError(message: string | null): void;
  focus(): void;
}

export function describeDefault(def: FieldDef): string {
  const value = def.default;
  if (value === null) return "none";
  if (Array.isArray(value)) return value.length ? value.join(", ") : def.kind === "flags" ? "NONE" : "empty";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

const listText = (value: unknown): string => (Array.isArray(value) ? value.join(", ") : "");

function parseNumberList(text: string, integers: boolean): number[] | string {
  const parts = text.split(/[\s,]+/).filter(Boolean);
  const values = parts.map(Number);
  const bad = parts.find((p, i) => !Number.isFinite(values[i]) || (integers && !/^\d+$/.test(p)));
  if (bad !== undefined) return `"${bad}" is not ${integers ? "a positive integer" : "a number"}`;
  return values;
}

/** LoggingLevel as the server may store it (int, "A|B", list of names) → flag names. */
export function flagNames(value: unknown): string[] {
  if (typeof value === "number") {
    return LOGGING_FLAGS.filter((_, bit) => (value & (1 << bit)) !== 0);
  }
  const names = typeof value === "string" ? value.split("|") : Array.isArray(value) ? value : [];
  const set = new Set<string>();
  for (const raw of names) {
    const name = String(raw).trim().toUpperCase();
    if (name === "ALL") LOGGING_FLAGS.filter((f) => f !== "ROLLOUT_OBS").forEach((f) => set.add(f));
    else if (name === "BASIC") set.add("LOSSES");
    else if ((LOGGING_FLAGS as readonly string[]).includes(name)) set.add(name);
  }
  return LOGGING_FLAGS.filter((f) => set.has(f));
}

export function createFieldControl(def: FieldDef, sectionPath: readonly string[]): FieldControl {
  const path = [...sectionPath, def.name].join(".");
  const id = uid(`f-${path.replace(/\./g, "-")}`);
  const helpId = `${id}-help`;
  const errorId = `${id}-error`;
  const error = h("p", { class: "field-error", id: errorId, hidden: true });
  const help = h(
    "p",
    { class: "field-help", id: helpId },
    def.help,
    " ",
    h("span", { class: "default" }, `Default: ${describeDefault(def)}.`),
  );
  const describedBy = `${helpId} ${errorId}`;

  let input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement | null = null;
  let checkboxes: HTMLInputElement[] = [];
  let body: HTMLElement;

  switch (def.kind) {
    case "bool": {
      input = h("input", { type: "checkbox", id, "aria-describedby": describedBy, name: path });
      body = h("div", { class: "field checkbox" }, input, h("label", { for: id }, def.name));
      break;
    }
    case "choice": {
      input = h(
        "select",
        { id, "aria-describedby": describedBy, name: path },
        (def.choices ?? []).map((c) => h("option", { value: c }, c)),
      );
      body = h("div", { class: "field" }, h("label", { for: id }, def.name), input);
      break;
    }
    case "flags": {
      checkboxes = LOGGING_FLAGS.map((flag) =>
        h("input", { type: "checkbox", value: flag, id: `${id}-${flag}`, name: path }),
      );
      body = h(
        "fieldset",
        { class: "field flags", "aria-describedby": describedBy },
        h("legend", null, def.name),
        h(
          "div",
          { class: "flag-grid" },
          checkboxes.map((box) => h("span", { class: "flag" }, box, h("label", { for: box.id }, box.value))),
        ),
      );
      break;
    }
    case "json": {
      input = h("textarea", {
        id,
        rows: 2,
        spellcheck: "false",
        "aria-describedby": describedBy,
        name: path,
      });
      body = h("div", { class: "field" }, h("label", { for: id }, def.name), input);
      break;
    }
    default: {
      const numeric = def.kind === "int" || def.kind === "optionalInt" || def.kind === "sizes";
      input = h("input", {
        type: "text",
        id,
        inputmode: numeric ? "numeric" : "decimal",
        autocomplete: "off",
        "aria-describedby": describedBy,
        name: path,
      });
      body = h("div", { class: "field" }, h("label", { for: id }, def.name), input);
    }
  }
  const element = h("div", { class: "field-wrap", "data-path": path }, body, help, error);

  const read = (): ReadResult => {
    if (def.kind === "bool") return { ok: true, value: (input as HTMLInputElement).checked };
    if (def.kind === "flags")
      return { ok: true, value: checkboxes.filter((b) => b.checked).map((b) => b.value) };
    const text = (input as HTMLInputElement).value.trim();
    switch (def.kind) {
      case "choice":
        return { ok: true, value: text };
      case "int":
        return /^-?\d+$/.test(text)
          ? { ok: true, value: Number(text) }
          : { ok: false, message: "must be an integer" };
      case "float":
        return text !== "" && Number.isFinite(Number(text))
          ? { ok: true, value: Number(text) }
          : { ok: false, message: "must be a number" };
      case "optionalInt":
        if (text === "") return { ok: true, value: null };
        return /^-?\d+$/.test(text)
          ? { ok: true, value: Number(text) }
          : { ok: false, message: "must be an integer, or empty for none" };
      case "optionalFloat":
        if (text === "") return { ok: true, value: null };
        return Number.isFinite(Number(text))
          ? { ok: true, value: Number(text) }
          : { ok: false, message: "must be a number, or empty for none" };
      case "sizes": {
        const parsed = parseNumberList(text, true);
        return typeof parsed === "string" ? { ok: false, message: parsed } : { ok: true, value: parsed };
      }
      case "optionalNumberList": {
        if (text === "") return { ok: true, value: null };
        const parsed = parseNumberList(text, false);
        return typeof parsed === "string" ? { ok: false, message: parsed } : { ok: true, value: parsed };
      }
      case "optionalText":
        return { ok: true, value: text === "" ? null : text };
      case "json": {
        if (text === "") return { ok: true, value: {} };
        try {
          const value: unknown = JSON.parse(text);
          if (typeof value === "object" && value !== null && !Array.isArray(value))
            return { ok: true, value };
        } catch {
          // reported below
        }
        return { ok: false, message: 'must be a JSON object, e.g. {"height": 240}' };
      }
    }
    return { ok: false, message: "unsupported field" };
  };

  const write = (value: unknown): void => {
    switch (def.kind) {
      case "bool":
        (input as HTMLInputElement).checked = Boolean(value);
        return;
      case "flags": {
        const names = new Set(flagNames(value));
        checkboxes.forEach((b) => (b.checked = names.has(b.value)));
        return;
      }
      case "sizes":
      case "optionalNumberList":
        (input as HTMLInputElement).value = listText(value);
        return;
      case "json":
        (input as HTMLTextAreaElement).value =
          value && Object.keys(value as object).length ? JSON.stringify(value) : "";
        return;
      case "choice":
        // A spec's none (a run submitted before the field existed) is the field's default.
        (input as HTMLSelectElement).value = String(value ?? def.default);
        return;
      default:
        (input as HTMLInputElement).value = value === null || value === undefined ? "" : String(value);
    }
  };

  const setError = (message: string | null): void => {
    error.hidden = message === null;
    error.textContent = message ?? "";
    element.classList.toggle("invalid", message !== null);
    const targets = input ? [input] : checkboxes;
    targets.forEach((t) =>
      message === null ? t.removeAttribute("aria-invalid") : t.setAttribute("aria-invalid", "true"),
    );
  };

  write(def.default);
  return {
    path,
    def,
    element,
    read,
    write,
    setError,
    focus: () => (input ?? checkboxes[0])?.focus(),
  };
}
