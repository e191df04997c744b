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

/** Points of a projection: enough for a 220 px drawing. */
const PCA_POINTS = 600;
const MAX_POINTS = 4096;

/** Time points a heatmap `width` CSS pixels wide asks for: one per device pixel. */
export function slicePoints(width: number, ratio: number): number {
  return Math.max(64, Math.min(MAX_POINTS, Math.round(width * ratio)));
}

interface Population {
  key: string;
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
      envNote,
      h(
        "p",
        { class: "muted rec-legend" },
        "Units × steps, coloured per population from its lowest (dark) to highest (bright) value; dashed lines: episode ends.",
      ),
      list,
    ),
  );

  let shown: Population[] = [];
  let token = 0;
  const order = (): UnitOrder => orderSelect.value as UnitOrder;
  const clear = (): void => {
    shown.forEach((p) => (p.heatmap?.destroy(), p.projection?.destroy()));
    shown = [];
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
    const width = heatSlot.clientWidth || list.clientWidth || 800;
    const query = { key, env };
    const population: Population = { key, heatmap: null, projection: null, pc1: null };
    shown.push(population);
    // The heatmap paints as soon as its slice is in; the PCA (slower on the server) adds
    // the projection and the PC1 order when it comes.
    const heat = api
      .recordingSlice(runId, detail.id, {
        ...query,
        max_points: slicePoints(width, window.devicePixelRatio || 1),
      })
      .then((value: RecordingSlice) => {
        if (mine !== token) return;
        population.heatmap = new Heatmap(value, cursor, order(), population.pc1);
        heatSlot.replaceChildren(
          population.heatmap.element,
          h(
            "p",
            { class: "muted rec-range" },
            `colour: ${formatNumber(value.min)} … ${formatNumber(value.max)}`,
          ),
        );
      })
      .catch((error) => {
        if (mine === token)
          heatSlot.replaceChildren(errorBox(`Could not load ${key}: ${describeError(error)}`));
      });
    const projection = api
      .recordingPca(runId, detail.id, { ...query, max_points: PCA_POINTS })
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
    clear();
    list.replaceChildren();
    const env = Number(envSelect.value);
    time.showVideo(env === 0);
    envNote.hidden = env === 0 || !detail.video;
    if (!populations.length) list.append(h("p", { class: "muted" }, "This recording has no populations."));
    const mine = token;
    populations.forEach(([key, units]) => void loadPopulation(key, units, env, mine));
  };
  envSelect.addEventListener("change", load);
  orderSelect.addEventListener("change", () => shown.forEach((p) => p.heatmap?.setOrder(order(), p.pc1)));
  load();

  return () => {
    token += 1;
    clear();
    time.destroy();
  };
}
