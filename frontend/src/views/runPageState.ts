/** A run's page, the parts that are not drawing: its tabs, folding a live metrics event into
 * the run, the log tail, and a throttle for re-reading. Pure (timers aside): no DOM. */

import { TERMINAL_STATUSES, type MetricsEvent, type Run } from "../api/types";

export const TABS = ["charts", "videos", "checkpoints", "recordings", "config", "logs"] as const;
export type Tab = (typeof TABS)[number];

/** The tab `?tab=` names, or the charts. */
export function tabOf(name: string | null): Tab {
  return (TABS as readonly string[]).includes(name ?? "") ? (name as Tab) : "charts";
}

/** The tab an arrow key moves to (wrapping round), or null for another key. */
export function tabAfterKey(current: Tab, key: string): Tab | null {
  const step = key === "ArrowRight" ? 1 : key === "ArrowLeft" ? -1 : 0;
  if (!step) return null;
  return TABS[(TABS.indexOf(current) + step + TABS.length) % TABS.length] as Tab;
}

/** "charts" -> "Charts". */
export function tabLabel(tab: Tab): string {
  return tab[0]?.toUpperCase() + tab.slice(1);
}

/** Folds a live metrics event into the run as read (its steps and latest values); true when
 * the event is past the run's steps (the run should be read again soon). */
export function applyMetrics(run: Run, event: MetricsEvent): boolean {
  if (event.step <= run.steps) return false;
  run.steps = event.step;
  run.latest_metrics = { ...run.latest_metrics, ...event.values } as Run["latest_metrics"];
  return true;
}

/** The log text's lines, without the empty one after a final newline. */
export function logLines(text: string): string[] {
  return text.split("\n").filter((l, i, all) => l || i < all.length - 1);
}

/** What the header's action buttons depend on: they are rebuilt only when this changes. */
export function actionsKey(run: Pick<Run, "status" | "cancel_requested">): string {
  return `${!TERMINAL_STATUSES.includes(run.status)}:${run.cancel_requested}`;
}

/** Calls `fn` at most once per `ms`, the last call winning. */
export function throttle(fn: () => void, ms: number): { call: () => void; cancel: () => void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return {
    call: () => {
      if (timer === undefined) timer = setTimeout(() => ((timer = undefined), fn()), ms);
    },
    cancel: () => clearTimeout(timer),
  };
}
