/**
 * The API's data shapes, as the dashboard uses them: the server's OpenAPI schemas
 * (`schema.d.ts`), narrowed where the schema is looser than DESIGN.md (a run's `spec` is a
 * free-form object there), plus the stream events, which OpenAPI does not describe.
 *
 * Numbers that may be non-finite arrive as the strings "NaN", "Infinity" or "-Infinity"
 * (JSON has no literal for them); `decodeNumber` (numbers.ts) turns them into numbers.
 */

import type { Schemas } from "./openapi";

export type WireNumber = number | string;

export type RunStatus = Schemas["RunStatus"];
export type RunKind = NonNullable<Schemas["RunCreate"]["kind"]>;
export type CheckpointRef = Schemas["CheckpointRef"];
export type EnvSpec = Schemas["EnvSpec"];
/** A run spec as submitted (POST /api/runs). */
export type RunSpec = Schemas["RunCreate"];
export type Run = Omit<Schemas["RunPublic"], "spec"> & { spec: RunSpec };
export type EnvInfo = Schemas["EnvPublic"];
/** GET /api/envs/{name}/preset: the env's preset, `spec` being a run spec's env, network
 * and config. */
export type EnvPreset = Schemas["PresetPublic"];
export type Video = Schemas["VideoPublic"];
export type Checkpoint = Schemas["CheckpointPublic"];
export type WireSeries = Schemas["SeriesPublic"];
export type MetricsResponse = Schemas["MetricsPublic"];
export type Health = Schemas["HealthPublic"];
export type ValidationErrorItem = Schemas["ValidationError"];
/** Activation recordings of a run's checkpoints (`/api/runs/{id}/recordings`). */
export type Recording = Schemas["RecordingPublic"];
export type RecordingDetail = Schemas["RecordingDetail"];
export type RecordingCreate = Schemas["RecordingCreate"];
export type RecordingSlice = Schemas["RecordingSlice"];
export type RecordingPca = Schemas["RecordingPca"];
export const RECORDING_ACTIVE: readonly Recording["status"][] = ["queued", "running"];

export const RUN_STATUSES: readonly RunStatus[] = [
  "queued",
  "running",
  "succeeded",
  "failed",
  "cancelled",
  "interrupted",
  "pruned",
  "crashed",
];
export const TERMINAL_STATUSES: readonly RunStatus[] = [
  "succeeded",
  "failed",
  "cancelled",
  "pruned",
  "crashed",
];

interface EventBase {
  seq: number;
  /** Epoch seconds. */
  time: number;
}
export interface MetricsEvent extends EventBase {
  type: "metrics";
  step: number;
  wall_time: number;
  values: Record<string, WireNumber | null>;
}
export interface StatusEvent extends EventBase {
  type: "status";
  status: RunStatus;
  error: string | null;
}
export interface VideoEvent extends EventBase {
  type: "video";
  video: Video;
}
export interface CheckpointEvent extends EventBase {
  type: "checkpoint";
  checkpoint: Checkpoint;
}
export interface LogEvent extends EventBase {
  type: "log";
  line: string;
}
/** What a running run's process is doing, from `since` (epoch seconds). */
export interface PhaseEvent extends EventBase {
  type: "phase";
  phase: "compiling" | "training" | "evaluating" | "checkpointing" | "video";
  since: number;
}
/** A recording of the run was queued or changed status. */
export interface RecordingEvent extends EventBase {
  type: "recording";
  recording: Recording;
}
/** The run trains again from `step` (a checkpoint older than its newest metrics, at
 * `from_step`): the stored points after `step` were deleted. */
export interface RewindEvent extends EventBase {
  type: "rewind";
  step: number;
  from_step: number;
}
export type RunEvent =
  | MetricsEvent
  | StatusEvent
  | VideoEvent
  | CheckpointEvent
  | LogEvent
  | PhaseEvent
  | RecordingEvent
  | RewindEvent;

/** Events of the service-wide `WS /api/events`: every change a runs list shows. */
interface ServiceEventBase {
  seq: number;
  /** Epoch seconds. */
  time: number;
  run_id: string;
}
/** The progress fields of `progress` and `status` events. */
export interface RunProgress {
  steps: number;
  total_steps: number;
  /** The run's newest `eval/` values. */
  latest_metrics: Record<string, WireNumber>;
}
export interface RunCreatedEvent extends ServiceEventBase {
  type: "created";
  run: Run;
}
export interface RunStatusEvent extends ServiceEventBase, RunProgress {
  type: "status";
  status: RunStatus;
  error: string | null;
}
export interface RunProgressEvent extends ServiceEventBase, RunProgress {
  type: "progress";
}
export interface RunUpdatedEvent extends ServiceEventBase {
  type: "updated";
  name: string;
  tags: string[];
  notes: string;
}
export interface RunDeletedEvent extends ServiceEventBase {
  type: "deleted";
}
export type ServiceEvent =
  RunCreatedEvent | RunStatusEvent | RunProgressEvent | RunUpdatedEvent | RunDeletedEvent;

/** Sweeps (`/api/sweeps`): a sweep as listed, with its trials, and as submitted. */
export type Sweep = Schemas["SweepPublic"];
export type SweepDetail = Schemas["SweepDetail"];
export type Trial = Schemas["TrialPublic"];
export type SweepCreate = Schemas["SweepCreate"];
export type SpaceEntry = Schemas["SpaceEntry"];
export type ObjectiveMode = "max" | "min";
/** A sweep's status; `running` and `cancelling` are active. */
export const SWEEP_FINISHED: readonly string[] = ["finished", "cancelled", "failed"];

/** Events of a sweep's stream (`WS /api/sweeps/{id}/stream`). */
interface SweepEventBase {
  seq: number;
  /** Epoch seconds. */
  time: number;
}
export interface SweepStatusEvent extends SweepEventBase {
  type: "status";
  status: string;
  error: string | null;
}
export interface SweepTrialEvent extends SweepEventBase {
  type: "trial";
  trial: number;
  run_id: string;
  status: RunStatus;
  params: Record<string, unknown>;
  objective: number | null;
  steps: number;
  total_steps: number;
  error: string | null;
}
export interface SweepBestEvent extends SweepEventBase {
  type: "best";
  trial: number;
  run_id: string;
  objective: number;
  params: Record<string, unknown>;
}
export type SweepEvent = SweepStatusEvent | SweepTrialEvent | SweepBestEvent;
