// The danger buttons of a run's and a sweep's page: cancel (it says "Cancelling…" until the
// page refreshes) and delete (after a confirmation); a failure is shown in the page's slot
// and the button can be used again.
import { h } from "../dom";
import { describeError, errorBox } from "./common";

export interface CancelOptions {
  label: string;
  cancelling?: boolean;
  cancel: () => Promise<unknown>;
  refresh: () => Promise<unknown>;
  errorSlot: HTMLElement;
}

export function cancelButton(options: CancelOptions): HTMLButtonElement {
  const cancelling = options.cancelling ?? false;
  const button = h("button", { type: "button", class: "danger", disabled: cancelling }, options.label);
  if (cancelling) button.textContent = "Cancelling…";
  button.addEventListener("click", async () => {
    button.disabled = true;
    button.textContent = "Cancelling…";
    try {
      await options.cancel();
      await options.refresh();
    } catch (error) {
      options.errorSlot.replaceChildren(errorBox(`Cancel failed: ${describeError(error)}`));
      button.disabled = false;
      button.textContent = options.label;
    }
  });
  return button;
}

export interface DeleteOptions {
  label: string;
  /** Asks the user; false (or a page already left) deletes nothing. */
  confirm: () => Promise<boolean>;
  remove: () => Promise<unknown>;
  done: () => void;
  errorSlot: HTMLElement;
}

export function deleteButton(options: DeleteOptions): HTMLButtonElement {
  const button = h("button", { type: "button", class: "danger" }, options.label);
  button.addEventListener("click", async () => {
    if (!(await options.confirm())) return;
    button.disabled = true;
    try {
      await options.remove();
      options.done();
    } catch (error) {
      options.errorSlot.replaceChildren(errorBox(`Delete failed: ${describeError(error)}`));
      button.disabled = false;
    }
  });
  return button;
}
