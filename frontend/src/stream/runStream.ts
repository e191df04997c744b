/**
 * Follows a run's event stream (`WS /api/runs/{id}/stream?after_seq=N`): a `SeqStream`
 * (resume by seq, dedupe, gap detection, backoff) that ends after the run's terminal status
 * event, when the server closes the socket.
 */

import { TERMINAL_STATUSES, type RunEvent } from "../api/types";
import { SeqStream, type SeqStreamOptions } from "./seqStream";

export {
  FATAL_CLOSE_CODES,
  GAP_CLOSE_CODE,
  RESYNC_CLOSE_CODE,
  type SocketLike,
  type StreamState,
} from "./seqStream";

export type RunStreamOptions = Omit<SeqStreamOptions<RunEvent>, "isFinal">;

export class RunStream extends SeqStream<RunEvent> {
  constructor(options: RunStreamOptions) {
    super({
      ...options,
      isFinal: (event) => event.type === "status" && TERMINAL_STATUSES.includes(event.status),
    });
  }
}
