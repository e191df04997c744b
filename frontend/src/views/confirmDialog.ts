/** A modal confirmation (`<dialog>`): resolves true when the user confirms, false on
 * cancel or Escape. Focus starts on Cancel, so Enter alone never destroys anything. */

import { h } from "../dom";

export function confirmAction(title: string, message: string, confirmLabel: string): Promise<boolean> {
  return new Promise((resolve) => {
    const cancel = h("button", { type: "button", class: "secondary" }, "Cancel");
    const confirm = h("button", { type: "button", class: "danger" }, confirmLabel);
    const dialog = h(
      "dialog",
      { class: "confirm-dialog", "aria-labelledby": "confirm-title" },
      h("h2", { id: "confirm-title" }, title),
      h("p", null, message),
      h("div", { class: "actions" }, cancel, confirm),
    );
    const finish = (answer: boolean): void => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    cancel.addEventListener("click", () => finish(false));
    confirm.addEventListener("click", () => finish(true));
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      finish(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    cancel.focus();
  });
}
