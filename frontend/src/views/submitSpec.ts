// Submitting a spec (a run or a sweep) from a form: the button and the tabs are busy
// meanwhile, a 422 becomes problems under the fields its `loc`s name, any other failure
// (but a 401, which the access page handles) a message above the form.
import { ApiError } from "../api/http";
import type { ValidationErrorItem } from "../api/types";
import { locToPath } from "../form/specPaths";
import { describeError, errorBox } from "./common";

export interface ServerProblem {
  path: string;
  message: string;
}

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
