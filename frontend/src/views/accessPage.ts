/** Shown when the API answers 401: how to get in. */

import { h } from "../dom";

export function renderAccessPage(main: HTMLElement): void {
  const input = h("input", {
    id: "token-input",
    type: "password",
    autocomplete: "off",
    required: true,
    "aria-describedby": "token-help",
  });
  const form = h(
    "form",
    {
      class: "access-form",
      on: {
        submit: (event) => {
          event.preventDefault();
          const token = input.value.trim();
          if (token) window.location.assign(`/?token=${encodeURIComponent(token)}`);
        },
      },
    },
    h("label", { for: "token-input" }, "Access token"),
    input,
    h("button", { type: "submit" }, "Open the dashboard"),
  );
  main.replaceChildren(
    h(
      "section",
      { class: "access-page", "aria-labelledby": "access-title" },
      h("h1", { id: "access-title" }, "Access token needed"),
      h(
        "p",
        { id: "token-help" },
        "This dashboard is protected. Open the URL that ",
        h("code", null, "nnx-ppo serve"),
        " printed when it started (it looks like ",
        h("code", null, "http://127.0.0.1:8000/?token=…"),
        "), or paste the token below.",
      ),
      form,
    ),
  );
  input.focus();
}
