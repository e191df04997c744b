/** Where the form shows an error: next to a field, or at the top of a section. */

import { h, uid } from "../dom";

/** Something that can show an error: a field, a section, a picker. */
export interface ErrorTarget {
  setError(message: string | null): void;
  focus(): void;
}

/** An error slot inside `element` (marked invalid while it shows a message). */
export function sectionTarget(
  element: HTMLElement,
  error: HTMLElement,
  focus: () => void,
  input?: HTMLElement,
): ErrorTarget {
  return {
    setError: (message) => {
      error.hidden = message === null;
      error.textContent = message ?? "";
      element.classList.toggle("invalid", message !== null);
      if (!input) return;
      if (message === null) input.removeAttribute("aria-invalid");
      else input.setAttribute("aria-invalid", "true");
    },
    focus,
  };
}

/** A labelled control with help text and an error slot, at spec path `path`. */
export function simpleField(
  path: string,
  label: string,
  input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement,
  help: string,
): { element: HTMLElement; target: ErrorTarget } {
  const id = uid(`f-${path}`);
  input.id = id;
  input.setAttribute("aria-describedby", `${id}-help ${id}-error`);
  const error = h("p", { class: "field-error", id: `${id}-error`, hidden: true });
  const element = h(
    "div",
    { class: "field-wrap", "data-path": path },
    h("div", { class: "field" }, h("label", { for: id }, label), input),
    h("p", { class: "field-help", id: `${id}-help` }, help),
    error,
  );
  return { element, target: sectionTarget(element, error, () => input.focus(), input) };
}

/** A `simpleField` maker that also shows the field's errors: each field's target is set in
 * `targets` under its path as the field is made. */
export function registeredFields(targets: Map<string, ErrorTarget>): typeof simpleField {
  return (path, label, input, help) => {
    const field = simpleField(path, label, input, help);
    targets.set(path, field.target);
    return field;
  };
}
