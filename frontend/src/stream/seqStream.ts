/**
 * Follows a websocket of numbered events (`?after_seq=N`: every event after N, in order,
 * then live): a run's stream, and the service-wide `WS /api/events`.
 *
 * Guarantees to its listener: every event exactly once, in `seq` order, without gaps.
 * - Reconnects after a dropped connection, resuming with `after_seq` = the last seq
 *   delivered, with exponential backoff (reset once a connection delivers an event).
 * - Drops replayed events (seq <= last delivered): a resume may overlap what was seen.
 * - On a gap (seq > last + 1) it drops the connection and resumes from the last seq,
 *   so the missing events are replayed before anything newer is delivered.
 * - After a final event (`isFinal`, e.g. a run's terminal status) the server closes the
 *   socket; the stream then ends.
 * - A close code that says retrying cannot help (unknown run, bad request) ends it too.
 * - `RESYNC_CLOSE_CODE` (the events the client asks for are gone) ends it and calls
 *   `onResync`: the caller reloads its state and follows again from that state's seq.
 */

/** The part of the browser's WebSocket that the stream uses (a fake in tests). */
export interface SocketLike {
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  close(code?: number, reason?: string): void;
}

export type StreamState = "connecting" | "open" | "reconnecting" | "ended" | "failed" | "stopped";

/** Close codes after which reconnecting is pointless: policy violation (bad request),
 * and the server's 4401/4403/4404 (no access, unknown run). */
export const FATAL_CLOSE_CODES: readonly number[] = [1008, 4401, 4403, 4404];

/** The server no longer has (or never had) the events after the seq asked for. */
export const RESYNC_CLOSE_CODE = 4410;

export interface SeqStreamOptions<E extends { seq: number }> {
  /** The URL to connect to, given the last seq delivered (0 before any). */
  url: (afterSeq: number) => string;
  onEvent: (event: E) => void;
  /** An event after which the server closes the stream for good. */
  isFinal?: (event: E) => boolean;
  /** Called after a `RESYNC_CLOSE_CODE` close (the stream has ended). */
  onResync?: () => void;
  onState?: (state: StreamState, detail?: string) => void;
  /** Resume after this seq on the first connection (default 0: from the beginning). */
  afterSeq?: number;
  createSocket?: (url: string) => SocketLike;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
}

/** Close code the client uses when it drops a connection on a gap. */
export const GAP_CLOSE_CODE = 4000;

export class SeqStream<E extends { seq: number }> {
  private socket: SocketLike | null = null;
  private lastSeq: number;
  private backoffMs: number;
  private reconnectTimer: ReturnType<typeof setTimeout> | null = null;
  private terminalSeen = false;
  private stopped = false;
  private readonly createSocket: (url: string) => SocketLike;
  private readonly initialBackoffMs: number;
  private readonly maxBackoffMs: number;

  constructor(private readonly options: SeqStreamOptions<E>) {
    this.lastSeq = options.afterSeq ?? 0;
    this.initialBackoffMs = options.initialBackoffMs ?? 500;
    this.maxBackoffMs = options.maxBackoffMs ?? 10_000;
    this.backoffMs = this.initialBackoffMs;
    this.createSocket =
      options.createSocket ?? ((url: string) => new WebSocket(url) as unknown as SocketLike);
  }

  /** The seq of the last event delivered to the listener. */
  get lastDeliveredSeq(): number {
    return this.lastSeq;
  }

  start(): void {
    this.connect("connecting");
  }

  /** Closes the connection for good (e.g. the page was left). */
  stop(): void {
    this.stopped = true;
    this.clearTimer();
    this.dropSocket(1000, "client left");
    this.options.onState?.("stopped");
  }

  private connect(state: StreamState): void {
    if (this.stopped) return;
    this.options.onState?.(state);
    const socket = this.createSocket(this.options.url(this.lastSeq));
    this.socket = socket;
    socket.onopen = () => {
      if (this.socket === socket) this.options.onState?.("open");
    };
    socket.onmessage = (message) => {
      if (this.socket === socket) this.receive(message.data);
    };
    socket.onclose = (ev) => {
      if (this.socket === socket) this.closed(ev.code, ev.reason);
    };
    socket.onerror = () => {
      // A close event always follows; reconnection is decided there.
    };
  }

  private receive(data: unknown): void {
    let event: E;
    try {
      event = JSON.parse(String(data)) as E;
    } catch {
      return; // Not an event; nothing to deliver.
    }
    if (typeof event?.seq !== "number") return;
    if (event.seq <= this.lastSeq) return; // replayed: already delivered
    if (event.seq > this.lastSeq + 1) {
      // A gap: resume from the last seq so that the missing events come first.
      this.dropSocket(GAP_CLOSE_CODE, `gap after seq ${this.lastSeq}`);
      this.scheduleReconnect(0);
      return;
    }
    this.lastSeq = event.seq;
    this.backoffMs = this.initialBackoffMs;
    if (this.options.isFinal?.(event)) this.terminalSeen = true;
    this.options.onEvent(event);
  }

  private closed(code: number, reason: string): void {
    this.socket = null;
    if (this.stopped) return;
    if (this.terminalSeen) {
      this.options.onState?.("ended");
      return;
    }
    if (code === RESYNC_CLOSE_CODE && this.options.onResync) {
      this.stopped = true;
      this.options.onState?.("failed", "resync");
      this.options.onResync();
      return;
    }
    if (FATAL_CLOSE_CODES.includes(code)) {
      this.options.onState?.("failed", `closed (${code}${reason ? `: ${reason}` : ""})`);
      return;
    }
    this.scheduleReconnect(this.backoffMs, `closed (${code}${reason ? `: ${reason}` : ""})`);
    this.backoffMs = Math.min(this.backoffMs * 2, this.maxBackoffMs);
  }

  private scheduleReconnect(delayMs: number, detail?: string): void {
    this.clearTimer();
    this.options.onState?.("reconnecting", detail);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.connect("connecting");
    }, delayMs);
  }

  private dropSocket(code: number, reason: string): void {
    const socket = this.socket;
    this.socket = null;
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
      socket.close(code, reason);
    }
  }

  private clearTimer(): void {
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
  }
}
