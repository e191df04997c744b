/**
 * The page the New Run and New Sweep forms share: a heading, the Form/JSON tabs, the
 * problems above the form, and the form with its submit button last.
 *
 * Submitting the form clears every mark, runs the form's own check (which marks what it
 * finds and says so with `fixFirst`), then sends the body; the JSON view sends its text as
 * is. A 422's problems are shown under the fields their `loc`s name (`showServerProblems`),
 * and an accepted body opens the created thing's page.
 */

import type { ErrorTarget } from "../form/formTargets";
import { fixFirstMessage } from "../form/serverProblems";
import { h, type Child } from "../dom";
import { describeError, errorBox } from "./common";
import { createSpecTabs, type SpecTabsOptions } from "./specTabs";
import { formSubmitter, showJsonParseError, showServerProblems } from "./submitSpec";

export interface SpecFormOptions<B, T> {
  /** The heading and its id ("New run", "form-title"). */
  title: string;
  titleId: string;
  /** The form's class and its submit button's label ("Start run"). */
  formClass: string;
  submitLabel: string;
  /** The form's fields, in order (the submit button follows them). */
  fields: Child[];
  /** What the server refuses ("spec", "sweep") and what a problem with no path names. */
  noun: string;
  rootLabel: string;
  /** Where a 422's problems are shown, by path, at the time they come. */
  targets: () => ReadonlyMap<string, ErrorTarget>;
  /** Clears the fields' own marks (the problems above the form are cleared here). */
  clearMarks: () => void;
  /** The body the form describes, or null when it found problems (marked, and said with
   * `fixFirst`). */
  check: () => B | null;
  send: (body: B | string) => Promise<T>;
  /** The page of what was created. */
  pageOf: (created: T) => string;
  /** Whether the user has left the page (nothing is opened or shown then). */
  left: () => boolean;
  /** The JSON view: the form as text, and the text loaded into the form. */
  toJson: () => string;
  fromJson: (text: string) => Promise<void>;
  json?: Pick<SpecTabsOptions, "jsonLabel" | "jsonHelp" | "submitLabel">;
}

export interface SpecForm {
  form: HTMLFormElement;
  /** Where messages above the form go. */
  generalErrors: HTMLElement;
  /** Says that the form's check marked `count` problems (`what`: "marked field"). */
  fixFirst(count: number, what: string): void;
  /** A catch for loading what the form needs: says `what` failed and why, unless the user
   * has left. */
  loadFailed(what: string): (error: unknown) => void;
}

/** Builds the page into `main`. */
export function mountSpecForm<B, T>(main: HTMLElement, options: SpecFormOptions<B, T>): SpecForm {
  const generalErrors = h("div", { class: "general-errors", "aria-live": "polite" });
  const submitButton = h("button", { type: "submit", class: "primary" }, options.submitLabel);

  const clearErrors = (): void => {
    options.clearMarks();
    generalErrors.replaceChildren();
  };

  const submit = formSubmitter({
    send: options.send,
    pageOf: options.pageOf,
    left: options.left,
    clearErrors,
    showProblems: (items) =>
      showServerProblems(items, {
        targets: options.targets(),
        generalErrors,
        noun: options.noun,
        rootLabel: options.rootLabel,
        focusFirst: specTabs.mode() === "form",
      }),
    generalErrors,
    busy: [
      { setBusy: (busy) => (submitButton.disabled = busy) },
      { setBusy: (busy) => specTabs.setBusy(busy) },
    ],
  });

  const form = h(
    "form",
    {
      class: options.formClass,
      novalidate: true,
      on: {
        submit: (event) => {
          event.preventDefault();
          clearErrors();
          const body = options.check();
          if (body !== null) void submit(body);
        },
      },
    },
    options.fields,
    h("div", { class: "actions" }, submitButton),
  );

  const specTabs = createSpecTabs({
    form,
    toJson: options.toJson,
    fromJson: options.fromJson,
    submitJson: (text) => void submit(text),
    onParseError: () => showJsonParseError(generalErrors),
    ...options.json,
  });

  main.append(
    h(
      "section",
      { "aria-labelledby": options.titleId, class: "new-run" },
      h("h1", { id: options.titleId }, options.title),
      specTabs.tabs,
      generalErrors,
      form,
      specTabs.jsonView,
    ),
  );

  return {
    form,
    generalErrors,
    fixFirst: (count, what) => generalErrors.replaceChildren(errorBox(fixFirstMessage(count, what))),
    loadFailed: (what) => (error) => {
      if (!options.left()) generalErrors.replaceChildren(errorBox(`${what}: ${describeError(error)}`));
    },
  };
}
