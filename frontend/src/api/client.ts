/**
 * One typed function per API endpoint the dashboard calls. Paths, parameters and response
 * types come from the server's OpenAPI document (`openapi.ts`), so an API change that the
 * dashboard depends on fails the type check.
 */

import { requestJson, requestText, withQuery } from "./http";
import { fillPath, type BodyOf, type QueryOf, type ResponseOf, type TextResponseOf } from "./openapi";
import type { Run, RunSpec, SweepCreate, SweepDetail, Sweep } from "./types";

export type RunFilters = QueryOf<"/api/runs", "get">;
export type MetricsQuery = QueryOf<"/api/runs/{run_id}/metrics", "get">;
export type SliceQuery = QueryOf<"/api/runs/{run_id}/recordings/{recording_id}/slice", "get">;
export type PcaQuery = QueryOf<"/api/runs/{run_id}/recordings/{recording_id}/pca", "get">;
export type PolicyFormat = QueryOf<"/api/runs/{run_id}/checkpoints/{step}/policy", "get">["format"];

/** A page of the runs list, and the service event seq it was read at (`WS /api/events`). */
export interface RunPage {
  items: Run[];
  total: number;
  events_seq: number;
}

const runPath = (run_id: string) => fillPath("/api/runs/{run_id}", "get", { run_id });
const recordingPath = (run_id: string, recording_id: number) =>
  fillPath("/api/runs/{run_id}/recordings/{recording_id}", "get", { run_id, recording_id });

export const api = {
  health: () => requestJson<ResponseOf<"/api/health", "get">>("GET", "/api/health"),
  envs: () => requestJson<ResponseOf<"/api/envs", "get">>("GET", "/api/envs"),
  /** The network kinds a spec can name: built-in, then installed plugin networks. */
  networks: () => requestJson<ResponseOf<"/api/networks", "get">>("GET", "/api/networks"),
  envPreset: (name: string) =>
    requestJson<ResponseOf<"/api/envs/{name}/preset", "get">>(
      "GET",
      fillPath("/api/envs/{name}/preset", "get", { name }),
    ),
  listRuns: (filters: RunFilters = {}) =>
    requestJson<ResponseOf<"/api/runs", "get">>(
      "GET",
      withQuery("/api/runs", { ...filters }),
    ) as Promise<RunPage>,
  getRun: (run_id: string) =>
    requestJson<ResponseOf<"/api/runs/{run_id}", "get">>("GET", runPath(run_id)) as Promise<Run>,
  /** `spec` may be a JSON text, sent exactly as typed (the editable JSON view). */
  submitRun: (spec: BodyOf<"/api/runs", "post"> | string) =>
    requestJson<ResponseOf<"/api/runs", "post", 201>>("POST", "/api/runs", spec) as Promise<Run>,
  updateRun: (run_id: string, patch: BodyOf<"/api/runs/{run_id}", "patch">) =>
    requestJson<ResponseOf<"/api/runs/{run_id}", "patch">>(
      "PATCH",
      fillPath("/api/runs/{run_id}", "patch", { run_id }),
      patch,
    ),
  deleteRun: (run_id: string) =>
    requestJson<null>("DELETE", fillPath("/api/runs/{run_id}", "delete", { run_id })),
  cancelRun: (run_id: string) =>
    requestJson<unknown>("POST", fillPath("/api/runs/{run_id}/cancel", "post", { run_id })),
  metrics: (run_id: string, query: MetricsQuery = {}) =>
    requestJson<ResponseOf<"/api/runs/{run_id}/metrics", "get">>(
      "GET",
      withQuery(fillPath("/api/runs/{run_id}/metrics", "get", { run_id }), { ...query }),
    ),
  metricsCsvUrl: (run_id: string) => fillPath("/api/runs/{run_id}/metrics.csv", "get", { run_id }),
  /** A checkpoint's policy as a program that runs without nnx-ppo (exported on request). */
  policyUrl: (run_id: string, step: number, format: PolicyFormat) =>
    withQuery(fillPath("/api/runs/{run_id}/checkpoints/{step}/policy", "get", { run_id, step }), {
      format,
    }),
  videos: (run_id: string) =>
    requestJson<ResponseOf<"/api/runs/{run_id}/videos", "get">>(
      "GET",
      fillPath("/api/runs/{run_id}/videos", "get", { run_id }),
    ),
  checkpoints: (run_id: string) =>
    requestJson<ResponseOf<"/api/runs/{run_id}/checkpoints", "get">>(
      "GET",
      fillPath("/api/runs/{run_id}/checkpoints", "get", { run_id }),
    ),
  recordings: (run_id: string) =>
    requestJson<ResponseOf<"/api/runs/{run_id}/recordings", "get">>(
      "GET",
      fillPath("/api/runs/{run_id}/recordings", "get", { run_id }),
    ),
  record: (run_id: string, body: BodyOf<"/api/runs/{run_id}/recordings", "post">) =>
    requestJson<ResponseOf<"/api/runs/{run_id}/recordings", "post", 201>>(
      "POST",
      fillPath("/api/runs/{run_id}/recordings", "post", { run_id }),
      body,
    ),
  recording: (run_id: string, recording_id: number) =>
    requestJson<ResponseOf<"/api/runs/{run_id}/recordings/{recording_id}", "get">>(
      "GET",
      recordingPath(run_id, recording_id),
    ),
  cancelRecording: (run_id: string, recording_id: number) =>
    requestJson<ResponseOf<"/api/runs/{run_id}/recordings/{recording_id}/cancel", "post", 202>>(
      "POST",
      fillPath("/api/runs/{run_id}/recordings/{recording_id}/cancel", "post", { run_id, recording_id }),
    ),
  /** One env's activations of one population, downsampled to `max_points` time points. */
  recordingSlice: (run_id: string, recording_id: number, query: SliceQuery) =>
    requestJson<ResponseOf<"/api/runs/{run_id}/recordings/{recording_id}/slice", "get">>(
      "GET",
      withQuery(
        fillPath("/api/runs/{run_id}/recordings/{recording_id}/slice", "get", { run_id, recording_id }),
        { ...query },
      ),
    ),
  /** One env's trajectory of one population on its first two principal components. */
  recordingPca: (run_id: string, recording_id: number, query: PcaQuery) =>
    requestJson<ResponseOf<"/api/runs/{run_id}/recordings/{recording_id}/pca", "get">>(
      "GET",
      withQuery(
        fillPath("/api/runs/{run_id}/recordings/{recording_id}/pca", "get", { run_id, recording_id }),
        { ...query },
      ),
    ),
  recordingVideoUrl: (run_id: string, recording_id: number) =>
    fillPath("/api/runs/{run_id}/recordings/{recording_id}/video", "get", { run_id, recording_id }),
  recordingDataUrl: (run_id: string, recording_id: number) =>
    fillPath("/api/runs/{run_id}/recordings/{recording_id}/data", "get", { run_id, recording_id }),
  listSweeps: (query: QueryOf<"/api/sweeps", "get"> = {}) =>
    requestJson<ResponseOf<"/api/sweeps", "get">>("GET", withQuery("/api/sweeps", { ...query })),
  getSweep: (sweep_id: string): Promise<SweepDetail> =>
    requestJson<ResponseOf<"/api/sweeps/{sweep_id}", "get">>(
      "GET",
      fillPath("/api/sweeps/{sweep_id}", "get", { sweep_id }),
    ),
  /** `body` may be a JSON text, sent exactly as typed (the JSON tab). */
  submitSweep: (body: SweepCreate | string): Promise<SweepDetail> =>
    requestJson<ResponseOf<"/api/sweeps", "post", 201>>("POST", "/api/sweeps", body),
  cancelSweep: (sweep_id: string): Promise<Sweep> =>
    requestJson<ResponseOf<"/api/sweeps/{sweep_id}/cancel", "post", 202>>(
      "POST",
      fillPath("/api/sweeps/{sweep_id}/cancel", "post", { sweep_id }),
    ),
  deleteSweep: (sweep_id: string) =>
    requestJson<null>("DELETE", fillPath("/api/sweeps/{sweep_id}", "delete", { sweep_id })),
  logs: (run_id: string, tail: number): Promise<TextResponseOf<"/api/runs/{run_id}/logs", "get">> =>
    requestText("GET", withQuery(fillPath("/api/runs/{run_id}/logs", "get", { run_id }), { tail })),
};

/** A type-level check that the hand-narrowed `Run` and `RunSpec` still match the server's
 * schemas (fails to compile when a field the dashboard relies on goes away). */
type Assert<T extends true> = T;
export type RunMatchesSchema = Assert<
  ResponseOf<"/api/runs/{run_id}", "get"> extends Omit<Run, "spec"> ? true : false
>;
export type SweepBodyMatchesSchema = Assert<SweepCreate extends BodyOf<"/api/sweeps", "post"> ? true : false>;
export type SpecMatchesSchema = Assert<RunSpec extends BodyOf<"/api/runs", "post"> ? true : false>;

/** The websocket URL of the service-wide events (`WS /api/events`), same origin. */
export function eventsUrl(afterSeq: number, location: Location = window.location): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/api/events?after_seq=${afterSeq}`;
}

/** The websocket URL of a sweep's event stream (`WS /api/sweeps/{id}/stream`), same origin. */
export function sweepStreamUrl(id: string, afterSeq: number, location: Location = window.location): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/api/sweeps/${encodeURIComponent(id)}/stream?after_seq=${afterSeq}`;
}

/** The websocket URL of a run's event stream, same origin. */
export function streamUrl(id: string, afterSeq: number, location: Location = window.location): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/api/runs/${encodeURIComponent(id)}/stream?after_seq=${afterSeq}`;
}
