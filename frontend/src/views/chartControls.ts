/** The view settings bar shared by the run page and the compare view. */

import type { ViewSettings } from "../charts/plotData";
import { h } from "../dom";

export function createChartControls(
  settings: ViewSettings,
  onChange: () => void,
  extra: HTMLElement[] = [],
  withXAxis = true,
  onResetZoom: (() => void) | null = null,
): HTMLElement {
  const xAxis = h(
    "select",
    { id: "x-axis" },
    h("option", { value: "step" }, "env steps"),
    h("option", { value: "wall" }, "wall time"),
  );
  xAxis.value = settings.xAxis;
  xAxis.addEventListener("change", () => {
    settings.xAxis = xAxis.value === "wall" ? "wall" : "step";
    onChange();
  });
  const smoothing = h("input", {
    id: "smoothing",
    type: "range",
    min: 0,
    max: 0.99,
    step: 0.01,
    props: { value: String(settings.smoothing) },
  });
  const smoothingOut = h("output", { for: "smoothing" }, settings.smoothing.toFixed(2));
  smoothing.addEventListener("input", () => {
    settings.smoothing = Number(smoothing.value);
    smoothingOut.textContent = settings.smoothing.toFixed(2);
    onChange();
  });
  const logScale = h("input", { id: "log-scale", type: "checkbox", props: { checked: settings.logScale } });
  logScale.addEventListener("change", () => {
    settings.logScale = logScale.checked;
    onChange();
  });
  return h(
    "div",
    { class: "chart-controls", role: "group", "aria-label": "Chart settings" },
    withXAxis ? h("div", { class: "field inline" }, h("label", { for: "x-axis" }, "X axis"), xAxis) : null,
    h(
      "div",
      { class: "field inline" },
      h("label", { for: "smoothing" }, "Smoothing"),
      smoothing,
      smoothingOut,
    ),
    h("div", { class: "field inline checkbox" }, logScale, h("label", { for: "log-scale" }, "Log scale")),
    ...extra,
    onResetZoom
      ? h("button", { type: "button", class: "secondary", on: { click: onResetZoom } }, "Reset zoom")
      : null,
    h(
      "p",
      { class: "muted hint" },
      "Drag across a chart to zoom in; double-click or “Reset zoom” to zoom out.",
    ),
  );
}
