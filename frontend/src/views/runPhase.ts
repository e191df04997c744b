/** What a running run is doing and for how long ("Compiling… 42 s"), from its process's
 * `phase` events; ticks every second while the run is active. */

import type { PhaseEvent } from "../api/types";
import { formatDuration, h } from "../dom";

const LABELS: Record<PhaseEvent["phase"], string> = {
  compiling: "Compiling",
  training: "Training",
  evaluating: "Evaluating",
  checkpointing: "Writing a checkpoint",
  video: "Recording a video",
};

/** "Compiling… 42 s" (under a minute) or "Compiling… 2:05"; `now` in epoch seconds. */
export function phaseText(phase: PhaseEvent["phase"], since: number, now: number): string {
  const seconds = Math.max(0, now - since);
  const lasted = seconds < 60 ? `${Math.floor(seconds)} s` : formatDuration(seconds);
  return `${LABELS[phase] ?? phase}… ${lasted}`;
}

export class PhaseIndicator {
  /** Beside the status badge. */
  readonly element = h("span", { class: "run-phase muted" });
  /** In the charts' "No metrics yet" line. */
  readonly copy = h("span", { class: "run-phase" });
  private current: PhaseEvent | null = null;
  private active = false;
  private timer: ReturnType<typeof setInterval> | undefined;

  /** The newest phase event. */
  set(event: PhaseEvent): void {
    this.current = event;
    this.render();
  }

  /** Whether the run is running (the phase is shown only then). */
  setActive(active: boolean): void {
    if (active === this.active) return;
    this.active = active;
    clearInterval(this.timer);
    this.timer = active ? setInterval(() => this.render(), 1000) : undefined;
    this.render();
  }

  destroy(): void {
    clearInterval(this.timer);
  }

  private render(): void {
    const shown = this.active && this.current !== null;
    for (const element of [this.element, this.copy]) {
      element.hidden = !shown;
      if (shown && this.current) {
        element.dataset.phase = this.current.phase;
        element.textContent = phaseText(this.current.phase, this.current.since, Date.now() / 1000);
      }
    }
  }
}
