/** The run page's panels besides the charts: videos, checkpoints, config, logs. */

import { api, type PolicyFormat } from "../api/client";
import { decodeNumber, formatBytes, formatNumber } from "../api/numbers";
import type { Checkpoint, Run, Video } from "../api/types";
import { h, timeAgo } from "../dom";
import { flatten } from "../flatten";
import { networkFigure } from "../network/networkSvg";

/** Eval videos with a step slider; the chosen one plays inline. */
export function renderVideos(box: HTMLElement, videos: Video[]): void {
  const sorted = [...videos].sort((a, b) => a.step - b.step);
  if (!sorted.length) {
    box.replaceChildren(
      h(
        "p",
        { class: "muted" },
        "No videos yet. Videos are recorded when the run's config enables them (config.video.enabled).",
      ),
    );
    return;
  }
  const previous = box.querySelector<HTMLInputElement>("#video-step");
  const wasAtEnd = !previous || Number(previous.value) === Number(previous.max);
  const index = wasAtEnd ? sorted.length - 1 : Math.min(Number(previous.value), sorted.length - 1);
  const slider = h("input", {
    id: "video-step",
    type: "range",
    min: 0,
    max: sorted.length - 1,
    step: 1,
    props: { value: String(index) },
  });
  const caption = h("p", { class: "video-caption", "aria-live": "polite" });
  const player = h("video", {
    controls: true,
    preload: "metadata",
    playsinline: true,
    muted: true,
    class: "video-player",
  });
  const show = (i: number): void => {
    const video = sorted[i] as Video;
    slider.setAttribute("aria-valuetext", `step ${video.step}`);
    caption.textContent = `Step ${formatNumber(video.step)} · episode reward ${formatNumber(decodeNumber(video.episode_reward))} · length ${video.episode_length} · ${i + 1} of ${sorted.length}`;
    if (player.getAttribute("src") !== video.url) player.src = video.url;
  };
  slider.addEventListener("input", () => show(Number(slider.value)));
  box.replaceChildren(
    h("div", { class: "field" }, h("label", { for: "video-step" }, "Training step"), slider),
    caption,
    player,
  );
  show(index);
}

export function renderCheckpoints(box: HTMLElement, run: Run, checkpoints: Checkpoint[]): void {
  if (!checkpoints.length) {
    box.replaceChildren(h("p", { class: "muted" }, "No checkpoints yet."));
    return;
  }
  const sorted = [...checkpoints].sort((a, b) => b.step - a.step);
  const id = encodeURIComponent(run.id);
  box.replaceChildren(
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "checkpoints" },
        h("caption", { class: "visually-hidden" }, "Checkpoints, newest first"),
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            ["Step", "Size", "Saved", "Actions"].map((c) => h("th", { scope: "col" }, c)),
          ),
        ),
        h(
          "tbody",
          null,
          sorted.map((c) =>
            h(
              "tr",
              { "data-step": c.step },
              h("td", { "data-label": "Step" }, formatNumber(c.step)),
              h("td", { "data-label": "Size" }, formatBytes(c.size_bytes)),
              h("td", { "data-label": "Saved" }, timeAgo(c.created_at)),
              h(
                "td",
                { "data-label": "Actions", class: "row-actions" },
                h(
                  "a",
                  {
                    href: c.url,
                    download: `${run.id}-step_${String(c.step).padStart(10, "0")}.tar.gz`,
                    class: "button",
                  },
                  "Download",
                ),
                policyLinks(run.id, c.step),
                h(
                  "a",
                  { href: `/runs/new?teacher=${id}&step=${c.step}`, class: "button secondary" },
                  "Use as teacher",
                ),
                h(
                  "a",
                  { href: `/runs/new?resume=${id}&step=${c.step}`, class: "button secondary" },
                  "Resume from here",
                ),
              ),
            ),
          ),
        ),
      ),
    ),
  );
}

/** The checkpoint's policy, exported by the service on the first click (seconds). */
function policyLinks(runId: string, step: number): HTMLElement[] {
  const name = `${runId}-step_${String(step).padStart(10, "0")}`;
  const formats: [PolicyFormat, string, string][] = [
    ["onnx", "ONNX policy", "onnxruntime and any ONNX runtime"],
    ["stablehlo", "StableHLO policy", "jax.export.deserialize(...).call(obs, *state)"],
  ];
  return formats.map(([format, label, runsUnder]) =>
    h(
      "a",
      {
        href: api.policyUrl(runId, step, format),
        download: `${name}.${format}`,
        class: "button secondary",
        title: `The deterministic policy of this checkpoint, to run without nnx-ppo (${runsUnder})`,
      },
      label,
    ),
  );
}

/** Where a run's fields came from, as its stored spec's `preset` section records it. */
export function presetOrigin(spec: Record<string, unknown>): { note: string; filled: Set<string> } {
  const preset = spec.preset;
  if (preset === false)
    return {
      note: 'Preset off ("preset": false): fields left out took the library\'s defaults.',
      filled: new Set(),
    };
  if (typeof preset !== "object" || preset === null)
    return {
      note: "This env has no preset: fields left out took the library's defaults.",
      filled: new Set(),
    };
  const { name, variant, source, filled } = preset as {
    name?: string;
    variant?: string;
    source?: string;
    filled?: string[];
  };
  const count = filled?.length ?? 0;
  return {
    note: `${count} field${count === 1 ? "" : "s"} marked “preset” came from the ${name ?? ""} preset (${source ?? "?"}, ${variant ?? "?"} variant); the others were set in the spec.`,
    filled: new Set(filled ?? []),
  };
}

// The spec each config panel shows: a run's spec never changes, so a refresh of the run
// (its status, its progress) leaves the panel as it is (its open details, its drawing).
const shownSpecs = new WeakMap<HTMLElement, string>();

export function renderConfig(box: HTMLElement, run: Run): void {
  const shown = JSON.stringify(run.spec);
  if (shownSpecs.get(box) === shown) return;
  shownSpecs.set(box, shown);
  const spec = run.spec as Record<string, unknown>;
  const origin = presetOrigin(spec);
  const rows = [...flatten({ ...spec, preset: undefined })].filter(([key]) => key !== "preset");
  const config = h(
    "div",
    { class: "config-main" },
    h("p", { class: "muted preset-origin" }, origin.note),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "config-table" },
        h("caption", { class: "visually-hidden" }, "Run spec"),
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            h("th", { scope: "col" }, "Field"),
            h("th", { scope: "col" }, "Value"),
            h("th", { scope: "col" }, "From"),
          ),
        ),
        h(
          "tbody",
          null,
          rows.map(([key, value]) =>
            h(
              "tr",
              { "data-from": origin.filled.has(key) ? "preset" : "spec" },
              h("th", { scope: "row" }, key),
              h("td", null, h("code", null, value)),
              h("td", null, origin.filled.has(key) ? h("span", { class: "badge preset" }, "preset") : ""),
            ),
          ),
        ),
      ),
    ),
    h(
      "details",
      null,
      h("summary", null, "Spec as JSON"),
      h("pre", { class: "json" }, JSON.stringify(run.spec, null, 2)),
    ),
  );
  box.replaceChildren(
    h(
      "div",
      { class: "config-layout" },
      config,
      h(
        "section",
        { class: "config-network", "aria-labelledby": "network-drawing-title" },
        h("h2", { id: "network-drawing-title" }, "Network"),
        networkFigure(spec.network),
      ),
    ),
  );
}

export function renderLogs(box: HTMLElement, lines: string[], tail: number): void {
  const pre =
    box.querySelector("pre") ??
    h("pre", { class: "log", tabindex: 0, "aria-label": `Last ${tail} log lines` });
  const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  pre.textContent = lines.length ? lines.join("\n") : "(no output yet)";
  if (!pre.isConnected) box.replaceChildren(pre);
  if (atBottom) pre.scrollTop = pre.scrollHeight;
}
