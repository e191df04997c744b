/**
 * The New Run form's graph network editor (`network.kind: "graph"`): a JSON textarea, its
 * parse error inline, the server's 422s for `network.*` under it, and a live drawing of the
 * graph (redrawn a moment after typing stops; the last good drawing stays, dimmed, while
 * the text does not parse).
 */

import { h, uid } from "../dom";
import { graphTemplate, parseGraphJson, type GraphParse } from "../network/graphJson";
import { networkFigure } from "../network/networkSvg";
import type { EnvInfo } from "../api/types";
import type { ErrorTarget } from "./formTargets";

export const GRAPH_PREVIEW_DELAY_MS = 250;

export interface GraphField {
  element: HTMLElement;
  /** Where the server's problems with `network.*` are shown. */
  target: ErrorTarget;
  read(): GraphParse;
  write(network: Record<string, unknown>): void;
  /** Fills the editor with a graph for `env` when it is empty. */
  fillIfEmpty(env: EnvInfo | undefined): void;
  stop(): void;
}

export function createGraphField(): GraphField {
  const id = uid("f-network-graph");
  const textarea = h("textarea", {
    id,
    class: "json-editor graph-editor",
    rows: 18,
    spellcheck: "false",
    autocomplete: "off",
    "aria-describedby": `${id}-help ${id}-parse ${id}-error`,
  });
  const parseError = h("p", { class: "field-error graph-parse-error", id: `${id}-parse`, hidden: true });
  const serverError = h("p", { class: "field-error graph-server-error", id: `${id}-error`, hidden: true });
  const preview = h("div", { class: "graph-preview", "aria-live": "polite" });
  const element = h(
    "div",
    { class: "field-wrap graph-field", "data-path": "network.graph" },
    h(
      "div",
      { class: "graph-edit" },
      h(
        "div",
        { class: "field" },
        h("label", { for: id }, "Graph (JSON)"),
        textarea,
        h(
          "p",
          { class: "field-help", id: `${id}-help` },
          "populations {name, size, activation, input_from, output_to}, connections {src, dst, delay, " +
            "reciprocal}, actions {head: output}, value; also normalize_obs, entropy_weight, min_std.",
        ),
        parseError,
        serverError,
      ),
      h("div", { class: "graph-preview-box" }, h("p", { class: "graph-preview-title" }, "Preview"), preview),
    ),
  );

  const markInvalid = (): void => {
    if (parseError.hidden && serverError.hidden) textarea.removeAttribute("aria-invalid");
    else textarea.setAttribute("aria-invalid", "true");
  };
  const redraw = (): void => {
    const parsed = parseGraphJson(textarea.value);
    parseError.hidden = parsed.ok;
    parseError.textContent = parsed.ok ? "" : parsed.message;
    markInvalid();
    preview.classList.toggle("stale", !parsed.ok);
    if (parsed.ok) preview.replaceChildren(networkFigure(parsed.network));
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  textarea.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(redraw, GRAPH_PREVIEW_DELAY_MS);
  });

  const write = (network: Record<string, unknown>): void => {
    textarea.value = JSON.stringify({ ...network, kind: "graph" }, null, 2);
    clearTimeout(timer);
    redraw();
  };
  return {
    element,
    target: {
      setError: (message) => {
        serverError.hidden = message === null;
        serverError.textContent = message ?? "";
        element.classList.toggle("invalid", message !== null);
        markInvalid();
      },
      focus: () => textarea.focus(),
    },
    read: () => parseGraphJson(textarea.value),
    write,
    fillIfEmpty: (env) => {
      if (!textarea.value.trim()) write(graphTemplate(env));
    },
    stop: () => clearTimeout(timer),
  };
}
