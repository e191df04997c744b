/**
 * The runs list as a model that follows the service-wide events (`WS /api/events`).
 *
 * A snapshot (`GET /api/runs`, read at service event `events_seq`) is the base; events
 * after its seq are applied on top. Events already reflected (seq <= the newest applied)
 * are ignored, so a replay or an overlap after a reconnect changes nothing. The recent
 * events are kept: a newer snapshot that arrives after some events (a reload for new
 * filters) gets those with a larger seq re-applied, so nothing is lost between the two.
 *
 * An event about a run the list does not know, which might make it match the filters (a
 * status change while filtering by status, say), marks the list `stale`: list again.
 */

import { TERMINAL_STATUSES, type Run, type ServiceEvent } from "../api/types";
import { hasFilters, type ListFilters } from "../urlState";

const KEEP_EVENTS = 2000;

export function matchesFilters(run: Run, filters: ListFilters): boolean {
  if (filters.status && run.status !== filters.status) return false;
  if (filters.kind && run.kind !== filters.kind) return false;
  if (filters.tag && !run.tags.includes(filters.tag)) return false;
  if (filters.q && !run.name.toLowerCase().includes(filters.q.toLowerCase())) return false;
  return true;
}

export class LiveRuns {
  private runs = new Map<string, Run>();
  private filters: ListFilters = { q: "", status: "", kind: "", tag: "" };
  private appliedSeq = 0;
  private snapshotTotal = 0;
  private snapshotCount = 0;
  private readonly recent: ServiceEvent[] = [];
  /** Set when an event may have changed what the list shows in a way it cannot compute. */
  stale = false;

  constructor(private readonly limit = 200) {}

  /** The newest service event the list reflects (follow the events after it). */
  get seq(): number {
    return this.appliedSeq;
  }

  /** A list read at service event `seq` with `filters`; newer events seen are re-applied. */
  setSnapshot(items: Run[], total: number, seq: number, filters: ListFilters): void {
    this.runs = new Map(items.map((run) => [run.id, { ...run }]));
    this.filters = { ...filters };
    this.snapshotTotal = total;
    this.snapshotCount = this.matching().length;
    this.appliedSeq = seq;
    this.stale = false;
    for (const event of this.recent) {
      if (event.seq > this.appliedSeq) {
        this.appliedSeq = event.seq;
        this.applyOne(event);
      }
    }
  }

  /** Applies an event; returns whether the list changed. */
  apply(event: ServiceEvent): boolean {
    this.recent.push(event);
    if (this.recent.length > KEEP_EVENTS) this.recent.shift();
    if (event.seq <= this.appliedSeq) return false;
    this.appliedSeq = event.seq;
    return this.applyOne(event);
  }

  /** The runs that match the filters, newest first (at most `limit`). */
  get items(): Run[] {
    return this.matching()
      .sort((a, b) => b.created_at - a.created_at)
      .slice(0, this.limit);
  }

  /** How many runs match the filters (the snapshot's total, kept up to date). */
  get total(): number {
    return Math.max(0, this.snapshotTotal + this.matching().length - this.snapshotCount);
  }

  get(id: string): Run | undefined {
    return this.runs.get(id);
  }

  private matching(): Run[] {
    return [...this.runs.values()].filter((run) => matchesFilters(run, this.filters));
  }

  private applyOne(event: ServiceEvent): boolean {
    const run = this.runs.get(event.run_id);
    switch (event.type) {
      case "created":
        this.runs.set(event.run_id, { ...event.run });
        return true;
      case "deleted":
        if (!run && this.snapshotTotal > this.snapshotCount) this.stale = true;
        return this.runs.delete(event.run_id);
      case "status":
        if (!run) {
          if (this.filters.status) this.stale = true;
          return false;
        }
        run.status = event.status;
        run.error = event.error;
        if (event.status === "running") run.started_at = event.time;
        if (TERMINAL_STATUSES.includes(event.status)) run.finished_at = event.time;
        this.progress(run, event);
        return true;
      case "progress":
        if (!run) return false;
        this.progress(run, event);
        return true;
      case "updated":
        if (!run) {
          if (hasFilters(this.filters)) this.stale = true;
          return false;
        }
        run.name = event.name;
        run.tags = [...event.tags];
        run.notes = event.notes;
        return true;
    }
  }

  private progress(
    run: Run,
    event: { steps: number; total_steps: number; latest_metrics: Run["latest_metrics"] },
  ): void {
    run.steps = Math.max(run.steps, event.steps);
    run.total_steps = event.total_steps;
    run.latest_metrics = { ...run.latest_metrics, ...event.latest_metrics };
  }
}
