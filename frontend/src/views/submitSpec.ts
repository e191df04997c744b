// Submitting a spec (a run or a sweep) from a form: the button and the tabs are busy
// meanwhile, a 422 becomes problems under the fields its `loc`s name, any other failure
// (but a 401, which the access page handles) a message above the form.
import { ApiError } from "../api/http";
import type { ValidationErrorItem } from "../api/types";
import type { ErrorTarget } from "../form/formTargets";
import { groupProblems, type ServerProblem } from "../form/serverProblems";
import { locToPath } from "../form/specPaths";
import { h } from "../dom";
import { navigate } from "../nav";
import { describeError, errorBox } from "./common";
import { plural } from "./liveState";

export type { ServerProblem };

export interface SubmitOptions<T> {
  send: () => Promise<T>;
  onCreated: (created: T) => void;
  showProblems: (problems: ServerProblem[]) => void;
  generalErrors: HTMLElement;
  setBusy: (busy: boolean) => void;
}

export async function submitSpec<T>(options: SubmitOptions<T>): Promise<void> {
  options.setBusy(true);
  try {
    options.onCreated(await options.send());
  } catch (error) {
    if (error instanceof ApiError && error.status === 422 && error.validationErrors.length) {
      options.showProblems(
        error.validationErrors.map((item: ValidationErrorItem) => ({
          path: locToPath(item.loc),
          message: item.msg,
        })),
      );
    } else if (!(error instanceof ApiError && error.status === 401)) {
      options.generalErrors.replaceChildren(errorBox(`Submit failed: ${describeError(error)}`));
    }
  } finally {
    options.setBusy(false);
  }
}

export interface ProblemsView {
  /** Where each problem can be shown, by spec path. */
  targets: ReadonlyMap<string, ErrorTarget>;
  generalErrors: HTMLElement;
  /** What the server refused ("spec", "sweep") and what a problem with no path names. */
  noun: string;
  rootLabel: string;
  /** Whether to move focus to the first marked field (not from the JSON view). */
  focusFirst: boolean;
}

/** Marks each field a 422 names and lists every problem above the form. */
export function showServerProblems(items: ServerProblem[], view: ProblemsView): void {
  const { byTarget, general } = groupProblems(items, [...view.targets.keys()]);
  byTarget.forEach((messages, key) => view.targets.get(key)?.setError(messages.join("; ")));
  const summary = h(
    "div",
    { class: "error-box", role: "alert" },
    h("p", null, `The server refused the ${view.noun} (${plural(items.length, "problem")}):`),
    h(
      "ul",
      null,
      items.map((item) => h("li", null, h("code", null, item.path || view.rootLabel), " ", item.message)),
    ),
  );
  view.generalErrors.replaceChildren(summary, ...general.map((m) => errorBox(m)));
  const first = [...byTarget.keys()][0];
  if (first && view.focusFirst) view.targets.get(first)?.focus();
}

export interface FormSubmitOptions<B, T> {
  send: (body: B | string) => Promise<T>;
  /** The page of what was created, opened once the server accepts it. */
  pageOf: (created: T) => string;
  /** Whether the user has left the form (nothing is opened then). */
  left: () => boolean;
  clearErrors: () => void;
  showProblems: (problems: ServerProblem[]) => void;
  generalErrors: HTMLElement;
  /** Everything disabled while a submission is in flight. */
  busy: { setBusy(busy: boolean): void }[];
}

/** A form's submit: errors cleared, the body sent (the spec, or the JSON view's text), then
 * the created thing's page, or its problems. */
export function formSubmitter<B, T>(options: FormSubmitOptions<B, T>): (body: B | string) => Promise<void> {
  return async (body) => {
    options.clearErrors();
    await submitSpec({
      send: () => options.send(body),
      onCreated: (created) => {
        if (!options.left()) navigate(options.pageOf(created));
      },
      showProblems: options.showProblems,
      generalErrors: options.generalErrors,
      setBusy: (busy) => options.busy.forEach((part) => part.setBusy(busy)),
    });
  };
}

/** What the JSON view says when its text does not parse. */
export function showJsonParseError(generalErrors: HTMLElement): void {
  generalErrors.replaceChildren(
    errorBox("The JSON does not parse; fix it or keep editing it in the JSON view."),
  );
}
