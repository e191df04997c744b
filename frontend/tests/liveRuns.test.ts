import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { Run, ServiceEvent } from "../src/api/types";
import { LiveRuns } from "../src/runs/liveRuns";
import { SeqStream, type SocketLike } from "../src/stream/seqStream";
import { emptyFilters, type ListFilters } from "../src/urlState";

const run = (id: string, created: number, extra: Partial<Run> = {}): Run =>
  ({
    id,
    kind: "ppo",
    name: `run-${id}`,
    status: "queued",
    spec: { env: { name: "PointReach" } },
    tags: [],
    notes: "",
    created_at: created,
    started_at: null,
    finished_at: null,
    steps: 0,
    total_steps: 100,
    latest_metrics: {},
    error: null,
    last_seq: 1,
    cancel_requested: false,
    attempts: 0,
    pid: null,
    ...extra,
  }) as Run;

const created = (seq: number, r: Run): ServiceEvent => ({
  seq,
  type: "created",
  time: seq,
  run_id: r.id,
  run: r,
});
const status = (seq: number, id: string, value: Run["status"], steps = 0): ServiceEvent => ({
  seq,
  type: "status",
  time: seq,
  run_id: id,
  status: value,
  error: null,
  steps,
  total_steps: 100,
  latest_metrics: {},
});
const progress = (seq: number, id: string, steps: number): ServiceEvent => ({
  seq,
  type: "progress",
  time: seq,
  run_id: id,
  steps,
  total_steps: 100,
  latest_metrics: { "eval/episode_reward": steps / 10 },
});
const filters = (f: Partial<ListFilters>): ListFilters => ({ ...emptyFilters(), ...f });

describe("LiveRuns", () => {
  it("applies events after the snapshot, newest first, and ignores replays", () => {
    const model = new LiveRuns();
    model.setSnapshot([run("a", 1)], 1, 10, emptyFilters());
    expect(model.apply(created(11, run("b", 2)))).toBe(true);
    expect(model.apply(status(12, "a", "running"))).toBe(true);
    expect(model.apply(progress(13, "a", 40))).toBe(true);
    expect(model.items.map((r) => r.id)).toEqual(["b", "a"]);
    expect(model.total).toBe(2);
    expect(model.get("a")?.status).toBe("running");
    expect(model.get("a")?.steps).toBe(40);
    expect(model.get("a")?.latest_metrics["eval/episode_reward"]).toBe(4);
    // A resume that overlaps (seq <= 13) changes nothing: progress 13 again at other steps.
    expect(model.apply(progress(13, "a", 99))).toBe(false);
    expect(model.apply(status(10, "a", "failed"))).toBe(false); // in the snapshot already
    expect(model.get("a")?.steps).toBe(40);
    expect(model.seq).toBe(13);
    expect(model.apply({ seq: 14, type: "deleted", time: 14, run_id: "b" })).toBe(true);
    expect(model.items.map((r) => r.id)).toEqual(["a"]);
    expect(model.total).toBe(1);
  });

  it("re-applies events newer than a snapshot that arrives late", () => {
    const model = new LiveRuns();
    model.setSnapshot([run("a", 1)], 1, 10, emptyFilters());
    model.apply(status(11, "a", "running"));
    model.apply(status(12, "a", "succeeded", 100));
    // A reload read at seq 11 (it shows "running") comes back after event 12.
    model.setSnapshot([run("a", 1, { status: "running" })], 1, 11, emptyFilters());
    expect(model.get("a")?.status).toBe("succeeded");
    expect(model.get("a")?.steps).toBe(100);
    expect(model.seq).toBe(12);
  });

  it("keeps filters: runs leave and enter; unknown runs make it stale", () => {
    const model = new LiveRuns();
    model.setSnapshot([run("a", 1, { status: "running" })], 5, 20, filters({ status: "running" }));
    expect(model.total).toBe(5); // 5 match, the list shows the newest (here 1)
    model.apply(status(21, "a", "succeeded"));
    expect(model.items).toEqual([]);
    expect(model.total).toBe(4);
    expect(model.stale).toBe(false);
    model.apply(status(22, "zzz", "running")); // not in the list: it may match now
    expect(model.stale).toBe(true);
    model.setSnapshot([], 0, 22, filters({ q: "ALPHA" }));
    expect(model.stale).toBe(false);
    model.apply(created(23, run("c", 3, { name: "alpha-1" }))); // the search is case-blind
    model.apply(created(24, run("d", 4, { name: "beta" })));
    expect(model.items.map((r) => r.id)).toEqual(["c"]);
    expect(model.total).toBe(1);
    model.apply({ seq: 25, type: "updated", time: 25, run_id: "d", name: "alpha-2", tags: ["x"], notes: "" });
    expect(model.items.map((r) => r.id)).toEqual(["d", "c"]);
  });
});

class FakeSocket implements SocketLike {
  onopen: SocketLike["onopen"] = null;
  onmessage: SocketLike["onmessage"] = null;
  onclose: SocketLike["onclose"] = null;
  onerror: SocketLike["onerror"] = null;
  constructor(readonly url: string) {}
  send(event: object): void {
    this.onmessage?.({ data: JSON.stringify(event) });
  }
  serverClose(code: number): void {
    this.onclose?.({ code, reason: "" });
  }
  close(): void {}
}

describe("SeqStream on the service events", () => {
  let sockets: FakeSocket[];
  beforeEach(() => {
    vi.useFakeTimers();
    sockets = [];
  });
  afterEach(() => vi.useRealTimers());

  const open = (onResync?: () => void) => {
    const model = new LiveRuns();
    model.setSnapshot([run("a", 1)], 1, 5, emptyFilters());
    const stream = new SeqStream<ServiceEvent>({
      url: (after) => `ws://t/api/events?after_seq=${after}`,
      afterSeq: model.seq,
      onEvent: (e) => model.apply(e),
      onResync,
      createSocket: (url) => {
        const socket = new FakeSocket(url);
        sockets.push(socket);
        return socket;
      },
    });
    stream.start();
    return { model, stream };
  };

  it("resumes from the last seq after a drop and never ends by itself", () => {
    const { model, stream } = open();
    expect(sockets[0]?.url).toBe("ws://t/api/events?after_seq=5");
    sockets[0]?.send(status(6, "a", "running"));
    sockets[0]?.send(status(7, "a", "succeeded")); // a terminal status does not end it
    sockets[0]?.serverClose(1006);
    vi.advanceTimersByTime(600);
    expect(sockets[1]?.url).toBe("ws://t/api/events?after_seq=7");
    sockets[1]?.send(status(7, "a", "succeeded")); // replayed overlap: dropped
    sockets[1]?.send(progress(8, "a", 50));
    expect(model.seq).toBe(8);
    expect(model.get("a")?.steps).toBe(50);
    stream.stop();
  });

  it("asks to resync on 4410 instead of reconnecting", () => {
    const resync = vi.fn();
    open(resync);
    sockets[0]?.serverClose(4410);
    vi.advanceTimersByTime(20_000);
    expect(resync).toHaveBeenCalledOnce();
    expect(sockets).toHaveLength(1);
  });
});
