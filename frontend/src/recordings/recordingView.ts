/** One recording, opened: env 0's video (when recorded) and a step slider, then per
 * population a heatmap and its 2-D projection, all sharing one time cursor. Each
 * population is read on its own, one env at a time, at the width it is drawn at
 * (`/slice`, `/pca`): never the whole recording. */

import { api } from "../api/client";
import { formatNumber } from "../api/numbers";
import type { RecordingDetail, RecordingPca, RecordingSlice } from "../api/types";
import { h } from "../dom";
import { describeError, errorBox, loading } from "../views/common";
import { Cursor } from "./cursor";
import { Heatmap } from "./heatmap";
import { ORDER_LABELS, UNIT_ORDERS, type UnitOrder } from "./ordering";
import { Projection } from "./projection";
import { createTimeControl, type VideoSource } from "./timeControl";
import {
  describeWindow,
  isWhole,
  parseWindow,
  wholeEpisode,
  windowBetween,
  type TimeWindow,
} from "./timeWindow";

/** Points of a projection: enough for a 220 px drawing. */
const PCA_POINTS = 600;
const MAX_POINTS = 4096;

/** Time points a heatmap `width` CSS pixels wide asks for: one per device pixel. */
export function slicePoints(width: number, ratio: number): number {
  return Math.max(64, Math.min(MAX_POINTS, Math.round(width * ratio)));
}

interface Population {
  key: string;
  heatSlot: HTMLElement;
  heatmap: Heatmap | null;
  projection: Projection | null;
  pc1: number[] | null;
}

function videoSource(runId: string, detail: RecordingDetail): VideoSource | null {
  const video = detail.manifest?.video as { fps?: number; frames?: number } | null | undefined;
  if (!detail.video || !video?.fps) return null;
  return {
    url: api.recordingVideoUrl(runId, detail.id),
    fps: video.fps,
    frames: video.frames ?? detail.episode_length,
  };
}

export function showRecording(box: HTMLElement, runId: string, detail: RecordingDetail): () => void {
  const manifest = detail.manifest ?? {};
  const populations = Object.entries((manifest.populations ?? {}) as Record<string, number>);
  const cursor = new Cursor(0, detail.episode_length);
  const time = createTimeControl(cursor, videoSource(runId, detail));
  const envSelect = h(
    "select",
    { id: "rec-env" },
    Array.from({ length: detail.n_envs }, (_, i) => h("option", { value: String(i) }, `env ${i}`)),
  );
  const orderSelect = h(
    "select",
    { id: "rec-order" },
    UNIT_ORDERS.map((o) => h("option", { value: o }, ORDER_LABELS[o])),
  );
  const envNote = h("p", { class: "muted rec-env-note", hidden: true }, "The video shows env 0.");
  let shownSteps: TimeWindow = wholeEpisode(detail.episode_length);
  const fromInput = h("input", { id: "rec-from", type: "number", min: 0, step: 1, inputmode: "numeric" });
  const toInput = h("input", { id: "rec-to", type: "number", min: 0, step: 1, inputmode: "numeric" });
  const windowError = h("p", { class: "field-error", role: "alert", hidden: true });
  const windowReadout = h("output", { class: "rec-window-readout", for: "rec-from rec-to" });
  const zoomButton = h("button", { type: "submit", class: "secondary" }, "Zoom");
  const wholeButton = h("button", { type: "button", class: "secondary" }, "Whole episode");
  const windowForm = h(
    "form",
    { class: "rec-window", novalidate: true, "aria-label": "Steps shown" },
    h("div", { class: "field" }, h("label", { for: fromInput.id }, "From step"), fromInput),
    h("div", { class: "field" }, h("label", { for: toInput.id }, "to step"), toInput),
    zoomButton,
    wholeButton,
    windowReadout,
    windowError,
  );
  const list = h("div", { class: "rec-populations" });
  const envName = (manifest.env as { name?: string } | undefined)?.name ?? "–";
  box.replaceChildren(
    h(
      "section",
      { class: "rec-view", "data-recording": detail.id },
      h(
        "h2",
        null,
        `Recording #${detail.id}: checkpoint step ${formatNumber(detail.step)}, ${envName}, ` +
          `${formatNumber(detail.episode_length)} steps × ${formatNumber(detail.n_envs)} envs, seed ${detail.seed}`,
      ),
      h(
        "div",
        { class: "rec-controls" },
        h("div", { class: "field" }, h("label", { for: envSelect.id }, "Env"), envSelect),
        h("div", { class: "field" }, h("label", { for: orderSelect.id }, "Order units by"), orderSelect),
      ),
      time.element,
      windowForm,
      envNote,
      h(
        "p",
        { class: "muted rec-legend" },
        "Units × steps, coloured per population from its lowest (dark) to highest (bright) value; dashed lines: episode ends. Shift-drag across a heatmap to zoom into those steps.",
      ),
      list,
    ),
  );

  let shown: Population[] = [];
  let token = 0;
  /** Bumped by each zoom too: a heatmap of steps no longer shown is dropped. */
  let heatToken = 0;
  const order = (): UnitOrder => orderSelect.value as UnitOrder;
  const clear = (): void => {
    shown.forEach((p) => (p.heatmap?.destroy(), p.projection?.destroy()));
    shown = [];
  };

  /** The population's heatmap of the steps shown, at the width it is drawn at. */
  const loadHeat = async (population: Population, env: number, mine: number): Promise<void> => {
    const { key, heatSlot } = population;
    const width = heatSlot.clientWidth || list.clientWidth || 800;
    try {
      const value: RecordingSlice = await api.recordingSlice(runId, detail.id, {
        key,
        env,
        t0: shownSteps.t0,
        t1: shownSteps.t1,
        max_points: slicePoints(width, window.devicePixelRatio || 1),
      });
      if (mine !== heatToken) return;
      population.heatmap?.destroy();
      population.heatmap = new Heatmap(value, cursor, order(), population.pc1, (a, b) =>
        zoom(windowBetween(a, b, detail.episode_length)),
      );
      heatSlot.replaceChildren(
        population.heatmap.element,
        h(
          "p",
          { class: "muted rec-range" },
          `colour: ${formatNumber(value.min)} … ${formatNumber(value.max)}`,
        ),
      );
    } catch (error) {
      if (mine === heatToken)
        heatSlot.replaceChildren(errorBox(`Could not load ${key}: ${describeError(error)}`));
    }
  };

  const loadPopulation = async (key: string, units: number, env: number, mine: number): Promise<void> => {
    const heatSlot = h("div", { class: "rec-heat-slot" }, loading(`Loading ${key}…`));
    const projectionSlot = h("div", { class: "rec-projection-slot" });
    list.append(
      h(
        "article",
        { class: "rec-population", "data-key": key },
        h("h3", null, key, h("span", { class: "muted" }, ` · ${formatNumber(units)} units`)),
        h("div", { class: "rec-population-body" }, heatSlot, projectionSlot),
      ),
    );
    const population: Population = { key, heatSlot, heatmap: null, projection: null, pc1: null };
    shown.push(population);
    // The heatmap paints as soon as its slice is in; the PCA (slower on the server, and of
    // the whole episode whatever the steps shown) adds the projection and the PC1 order.
    const heat = loadHeat(population, env, heatToken);
    const projection = api
      .recordingPca(runId, detail.id, { key, env, max_points: PCA_POINTS })
      .then((value: RecordingPca) => {
        if (mine !== token) return;
        population.pc1 = value.loadings[0] ?? null;
        population.projection = new Projection(value, cursor);
        projectionSlot.replaceChildren(population.projection.element);
      })
      .catch((error) => {
        if (mine === token)
          projectionSlot.replaceChildren(errorBox(`Could not load the projection: ${describeError(error)}`));
      });
    projectionSlot.replaceChildren(loading("Projecting…"));
    await Promise.all([heat, projection]);
    if (mine === token && order() === "pc1") population.heatmap?.setOrder("pc1", population.pc1);
  };

  const load = (): void => {
    token += 1;
    heatToken += 1;
    clear();
    list.replaceChildren();
    const env = Number(envSelect.value);
    time.showVideo(env === 0);
    envNote.hidden = env === 0 || !detail.video;
    if (!populations.length) list.append(h("p", { class: "muted" }, "This recording has no populations."));
    const mine = token;
    populations.forEach(([key, units]) => void loadPopulation(key, units, env, mine));
  };
  /** Shows the steps of `steps` in every heatmap (the projections keep the episode). */
  const zoom = (steps: TimeWindow): void => {
    shownSteps = steps;
    fromInput.value = String(steps.t0);
    toInput.value = String(steps.t1 - 1);
    windowReadout.textContent = describeWindow(steps, detail.episode_length);
    windowForm.dataset.t0 = String(steps.t0);
    windowForm.dataset.t1 = String(steps.t1);
    wholeButton.disabled = isWhole(steps, detail.episode_length);
    windowError.hidden = true;
    fromInput.removeAttribute("aria-invalid");
    if (cursor.step < steps.t0 || cursor.step >= steps.t1) cursor.set(steps.t0, windowForm);
    heatToken += 1;
    const mine = heatToken;
    const env = Number(envSelect.value);
    shown.forEach((population) => {
      population.heatSlot.replaceChildren(loading(`Loading ${population.key}…`));
      void loadHeat(population, env, mine);
    });
  };
  windowForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const parsed = parseWindow(fromInput.value, toInput.value, detail.episode_length);
    if ("error" in parsed) {
      windowError.textContent = `Steps shown: ${parsed.error}.`;
      windowError.hidden = false;
      fromInput.setAttribute("aria-invalid", "true");
      return;
    }
    zoom(parsed);
  });
  wholeButton.addEventListener("click", () => zoom(wholeEpisode(detail.episode_length)));
  envSelect.addEventListener("change", load);
  orderSelect.addEventListener("change", () => shown.forEach((p) => p.heatmap?.setOrder(order(), p.pc1)));
  zoom(shownSteps);
  load();

  return () => {
    token += 1;
    heatToken += 1;
    clear();
    time.destroy();
  };
}
