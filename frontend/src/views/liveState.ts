/** What the "live" marker beside a page's title says for each state of its stream. Pure:
 * the views set the text (`setLiveState` in `common.ts`). */

import type { StreamState } from "../stream/seqStream";

/** `list`: a list page (runs, sweeps) that only says whether it is live; `page`: a run's or
 * a sweep's page, whose stream ends when the run does and says why it reconnects. */
export type LiveStyle = "list" | "page";

export function liveStateText(state: StreamState, style: LiveStyle, detail?: string): string {
  const why = style === "page" && detail ? ` (${detail})` : "";
  switch (state) {
    case "connecting":
      return "connecting…";
    case "open":
      return "● live";
    case "reconnecting":
      return `reconnecting${why}…`;
    case "ended":
      return style === "page" ? "finished" : "";
    case "failed":
      return style === "page" ? `stream unavailable${why}` : "live updates unavailable";
    case "stopped":
      return "";
  }
}

/** "1 run", "2 runs". */
export function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}
