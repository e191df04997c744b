/** Small pieces several views share. */

import { decodeNumber, formatNumber } from "../api/numbers";
import type { Run } from "../api/types";
import { h, timeAgo } from "../dom";
import type { StreamState } from "../stream/seqStream";
import { liveStateText, type LiveStyle } from "./liveState";

export const PALETTE = [
  "#1f77b4",
  "#ff7f0e",
  "#2ca02c",
  "#d62728",
  "#9467bd",
  "#8c564b",
  "#e377c2",
  "#17becf",
];

export function statusBadge(status: string): HTMLElement {
  return h("span", { class: `badge status-${status}`, "data-status": status }, status);
}

export function progressBar(steps: number, total: number): HTMLElement {
  const fraction = total > 0 ? Math.min(1, steps / total) : 0;
  const label = `${formatNumber(steps)} / ${formatNumber(total)}`;
  return h(
    "div",
    { class: "progress" },
    h("progress", { max: 1, value: fraction, "aria-label": `steps ${label}` }),
    h("span", { class: "progress-label" }, label),
  );
}

/** The run's newest eval reward: the first `eval/` key that names a reward. */
export function latestEvalReward(run: Run): number | null {
  const entries = Object.entries(run.latest_metrics ?? {});
  const preferred = ["eval/episode_reward", "eval/episode_reward_mean", "eval/reward"];
  for (const key of preferred) {
    const hit = entries.find(([k]) => k === key);
    if (hit) return decodeNumber(hit[1]);
  }
  const any = entries.find(
    ([k]) => k.startsWith("eval/") && k.includes("reward") && !/p\d+|std|min|max/.test(k),
  );
  return any ? decodeNumber(any[1]) : null;
}

/** The run's kind, marked "external" for a run tracked from a script (`nnx_ppo.track`). */
export function kindLabel(run: Run): string | HTMLElement {
  if (!run.external) return run.kind;
  const title = "tracked from a script outside the service (nnx_ppo.track)";
  return h("span", null, run.kind, h("span", { class: "external-mark", title }, "external"));
}

export function envName(run: Run): string {
  return run.spec?.env?.name ?? "–";
}

export function errorBox(message: string): HTMLElement {
  return h("div", { class: "error-box", role: "alert" }, message);
}

export function loading(what = "Loading…"): HTMLElement {
  return h("p", { class: "muted", "aria-live": "polite" }, what);
}

/** Shows an error of a failed call in `target` (keeps the page usable). */
export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Shows a stream's state in a page's live marker (see `liveStateText`). */
export function setLiveState(
  element: HTMLElement,
  state: StreamState,
  style: LiveStyle,
  detail?: string,
): void {
  element.textContent = liveStateText(state, style, detail);
  element.dataset.state = state;
}

/** One term of a page's facts list (`<dl>`). */
export function fact(term: string, value: string | Node): HTMLElement {
  return h("div", null, h("dt", null, term), h("dd", null, value));
}

/** When something was created (epoch seconds): "3 min ago", the full date on hover. */
export function createdTime(epoch: number): HTMLElement {
  const date = new Date(epoch * 1000);
  return h("time", { datetime: date.toISOString(), title: date.toLocaleString() }, timeAgo(epoch));
}
