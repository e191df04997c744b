import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { RunEvent } from "../src/api/types";
import { GAP_CLOSE_CODE, RunStream, type SocketLike, type StreamState } from "../src/stream/runStream";

/** A socket the test drives: it records the URL it was opened with and how it was closed. */
class FakeSocket implements SocketLike {
  onopen: SocketLike["onopen"] = null;
  onmessage: SocketLike["onmessage"] = null;
  onclose: SocketLike["onclose"] = null;
  onerror: SocketLike["onerror"] = null;
  closedWith: number | null = null;
  constructor(readonly url: string) {}
  open(): void {
    this.onopen?.({});
  }
  send(event: object): void {
    this.onmessage?.({ data: JSON.stringify(event) });
  }
  serverClose(code: number): void {
    this.onclose?.({ code, reason: "" });
  }
  close(code?: number): void {
    this.closedWith = code ?? 1000;
  }
}

const metrics = (seq: number, step: number): RunEvent => ({
  seq,
  type: "metrics",
  time: 1000 + seq,
  step,
  wall_time: 1000 + seq,
  values: { "losses/total": seq },
});
const status = (seq: number, value: "running" | "succeeded"): RunEvent => ({
  seq,
  type: "status",
  time: 1000 + seq,
  status: value,
  error: null,
});

describe("RunStream", () => {
  let sockets: FakeSocket[];
  let delivered: number[];
  let states: StreamState[];
  let stream: RunStream;

  beforeEach(() => {
    vi.useFakeTimers();
    sockets = [];
    delivered = [];
    states = [];
    stream = new RunStream({
      url: (after) => `ws://test/api/runs/r1/stream?after_seq=${after}`,
      onEvent: (e) => delivered.push(e.seq),
      onState: (s) => states.push(s),
      createSocket: (url) => {
        const socket = new FakeSocket(url);
        sockets.push(socket);
        return socket;
      },
      initialBackoffMs: 100,
      maxBackoffMs: 400,
    });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const current = (): FakeSocket => sockets[sockets.length - 1] as FakeSocket;

  it("starts from after_seq=0 and delivers events in order", () => {
    stream.start();
    expect(current().url).toBe("ws://test/api/runs/r1/stream?after_seq=0");
    current().open();
    [1, 2, 3].forEach((seq) => current().send(metrics(seq, seq * 160)));
    expect(delivered).toEqual([1, 2, 3]);
    expect(stream.lastDeliveredSeq).toBe(3);
  });

  it("reconnects after a drop and resumes from the last seq seen", () => {
    stream.start();
    current().open();
    current().send(metrics(1, 160));
    current().send(metrics(2, 320));
    current().serverClose(1006); // connection lost
    expect(sockets).toHaveLength(1);
    expect(states).toContain("reconnecting");
    vi.advanceTimersByTime(99);
    expect(sockets).toHaveLength(1); // backoff of 100 ms not over yet
    vi.advanceTimersByTime(1);
    expect(sockets).toHaveLength(2);
    expect(current().url).toBe("ws://test/api/runs/r1/stream?after_seq=2");
  });

  it("drops replayed events whose seq was already delivered", () => {
    stream.start();
    current().open();
    [1, 2, 3].forEach((seq) => current().send(metrics(seq, seq)));
    current().serverClose(1006);
    vi.advanceTimersByTime(100);
    // A server that replays from an older seq than asked: 2 and 3 again, then 4.
    [2, 3, 4].forEach((seq) => current().send(metrics(seq, seq)));
    current().send(metrics(3, 3));
    expect(delivered).toEqual([1, 2, 3, 4]);
  });

  it("on a gap, drops the connection and resumes so the missing events come first", () => {
    stream.start();
    current().open();
    current().send(metrics(1, 1));
    current().send(metrics(2, 2));
    current().send(metrics(5, 5)); // 3 and 4 missing
    expect(delivered).toEqual([1, 2]);
    expect(sockets[0]?.closedWith).toBe(GAP_CLOSE_CODE);
    vi.advanceTimersByTime(0);
    expect(current().url).toBe("ws://test/api/runs/r1/stream?after_seq=2");
    [3, 4, 5].forEach((seq) => current().send(metrics(seq, seq)));
    expect(delivered).toEqual([1, 2, 3, 4, 5]);
  });

  it("ignores a closed socket's late messages", () => {
    stream.start();
    const first = current();
    first.open();
    first.send(metrics(1, 1));
    first.send(metrics(3, 3)); // gap: first is dropped
    first.send(metrics(2, 2)); // arrives on the dropped socket: not delivered
    expect(delivered).toEqual([1]);
  });

  it("backs off exponentially up to the maximum, and resets after an event", () => {
    stream.start();
    const waits: number[] = [];
    for (let attempt = 0; attempt < 4; attempt++) {
      const before = sockets.length;
      current().serverClose(1006);
      let waited = 0;
      while (sockets.length === before) {
        vi.advanceTimersByTime(1);
        waited += 1;
      }
      waits.push(waited);
    }
    expect(waits).toEqual([100, 200, 400, 400]);
    current().send(metrics(1, 1));
    current().serverClose(1006);
    vi.advanceTimersByTime(100);
    expect(sockets).toHaveLength(6);
  });

  it("ends without reconnecting once a terminal status was delivered and the server closed", () => {
    stream.start();
    current().open();
    current().send(status(1, "running"));
    current().send(metrics(2, 160));
    current().send(status(3, "succeeded"));
    current().serverClose(1000);
    vi.advanceTimersByTime(60_000);
    expect(sockets).toHaveLength(1);
    expect(states[states.length - 1]).toBe("ended");
    expect(delivered).toEqual([1, 2, 3]);
  });

  it("reconnects after a normal close that came before any terminal status", () => {
    stream.start();
    current().send(status(1, "running"));
    current().serverClose(1000);
    vi.advanceTimersByTime(100);
    expect(sockets).toHaveLength(2);
    expect(current().url).toContain("after_seq=1");
  });

  it("gives up on a close code that says the run does not exist", () => {
    stream.start();
    current().serverClose(4404);
    vi.advanceTimersByTime(60_000);
    expect(sockets).toHaveLength(1);
    expect(states[states.length - 1]).toBe("failed");
  });

  it("resumes from a given seq on the first connection", () => {
    const urls: string[] = [];
    const resumed = new RunStream({
      url: (after) => `after=${after}`,
      onEvent: () => {},
      afterSeq: 41,
      createSocket: (url) => {
        urls.push(url);
        return new FakeSocket(url);
      },
    });
    resumed.start();
    expect(urls).toEqual(["after=41"]);
  });

  it("stop() closes the socket and never reconnects", () => {
    stream.start();
    current().open();
    stream.stop();
    expect(sockets[0]?.closedWith).toBe(1000);
    vi.advanceTimersByTime(60_000);
    expect(sockets).toHaveLength(1);
  });

  it("skips messages that are not JSON events", () => {
    stream.start();
    current().onmessage?.({ data: "not json" });
    current().onmessage?.({ data: JSON.stringify({ hello: 1 }) });
    current().send(metrics(1, 1));
    expect(delivered).toEqual([1]);
  });
});
