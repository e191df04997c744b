"""Recording what happens in a run: the one public path for its events.

A run's events (``metrics``, ``log``, ``phase``, ``checkpoint``, ``video``, ``rewind`` and
``status``)
are numbered by ``seq`` from the run row's ``last_seq`` counter, incremented in the
transaction that stores the event with the run's row locked (``lock_run``): per run, from
1, without gaps, on SQLite and PostgreSQL alike.

Whatever reports for a run goes through ``record_items``: the local run process
(``server.worker.reporter.RunReporter``), the HTTP report endpoint
(``POST /api/runs/{id}/report/batch``, ``server.store.run_reports``) that remote run
processes and tracked runs send to. A ``ReportItem`` is what one batch item of that
endpoint says; ``ReportItem.wire`` and ``from_wire`` are its JSON form:

- ``{"type": "metrics", "step": int, "wall_time": float, "values": {key: value}}``, the
  values as ``server.values`` encodes them (non-finite ones as strings);
- ``{"type": "log", "line": str}``;
- ``{"type": "phase", "phase": one of run_status.PHASES, "since": epoch s}``;
- ``{"type": "checkpoint", "step": int, "size_bytes": int, "created_at": float, "url": str}``
  for a checkpoint already in the run's ``checkpoints/``;
- ``{"type": "video", "step": int, "filename": str, "episode_reward": value,
  "episode_length": int}`` for a video already in the run's ``videos/``;
- ``{"type": "rewind", "step": int}``: the run resumes from its checkpoint of ``step``, and
  the metrics stored after it are deleted (``metric_rewind``); where there were some, a
  ``rewind`` event ``{"step": int, "from_step": int}`` says so (a follower drops its points
  after ``step``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from server import values
from server.store.db import transaction
from server.store.metric_ingest import MetricPoint, store_metrics
from server.store.metric_rewind import rewind_metrics
from server.store.models import EventRow, RunRow, VideoRow
from server.store.run_status import PHASES

REPORT_KINDS = ("metrics", "log", "phase", "checkpoint", "video", "rewind")


class RunNotFound(Exception):
    def __init__(self, run_id: str):
        super().__init__(f"run {run_id!r} not found")
        self.run_id = run_id


@dataclass(frozen=True)
class ReportItem:
    """One report: ``kind`` is one of ``REPORT_KINDS``, ``payload`` its fields (see the
    module doc; a ``type`` key in it is ignored)."""

    kind: str
    payload: dict[str, Any]

    @classmethod
    def from_wire(cls, item: Mapping[str, Any]) -> ReportItem:
        return cls(str(item.get("type")), {k: v for k, v in item.items() if k != "type"})

    def wire(self) -> dict[str, Any]:
        return {"type": self.kind, **self.payload}

    @classmethod
    def metrics(cls, step: int, wall_time: float, metrics: Mapping[str, float]) -> ReportItem:
        encoded = {k: values.encode(float(v)) for k, v in metrics.items()}
        return cls("metrics", {"step": step, "wall_time": wall_time, "values": encoded})

    @classmethod
    def video(
        cls, step: int, filename: str, episode_reward: float, episode_length: int
    ) -> ReportItem:
        return cls(
            "video",
            {
                "step": step,
                "filename": filename,
                "episode_reward": values.encode(float(episode_reward)),
                "episode_length": int(episode_length),
            },
        )


def lock_run(session: Session, run_id: str) -> RunRow:
    """The run, its row locked until the transaction ends (``FOR UPDATE`` on PostgreSQL;
    SQLite's write transaction already excludes other writers): whoever changes a run or
    appends its events holds it, so ``last_seq`` stays gapless."""
    run = session.get(RunRow, run_id, with_for_update=True)
    if run is None:
        raise RunNotFound(run_id)
    return run


def append_event(session: Session, run: RunRow, kind: str, payload: dict[str, Any]) -> None:
    """Appends one event to the run's stream (its row locked: see ``lock_run``)."""
    run.last_seq += 1
    session.add(
        EventRow(run_id=run.id, seq=run.last_seq, type=kind, time=time.time(), payload=payload)
    )
    session.flush()


def record_items(session: Session, run: RunRow, items: Iterable[ReportItem]) -> None:
    """Stores ``items`` in order, in the caller's transaction, the run's row locked (see
    ``lock_run``). Consecutive metrics are stored together (``metric_ingest``: a step at
    or below the newest stored one is skipped, so a retry is stored once).

    Raises:
        KeyError, TypeError, ValueError: An item is malformed or of an unknown kind.
    """
    for kind, group in itertools.groupby(items, key=lambda item: item.kind):
        if kind == "metrics":
            store_metrics(session, run, [_metric_point(item.payload) for item in group])
            continue
        record = _RECORDERS.get(kind)
        if record is None:
            raise ValueError(f"a report's type is {kind!r}, not one of {REPORT_KINDS}")
        for item in group:
            record(session, run, item.payload)


def phase_payload(phase: str, since: float) -> dict[str, Any]:
    """A ``phase`` event's payload: the run process's phase and when it began (epoch s)."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}")
    return {"phase": phase, "since": float(since)}


def store_video(
    session: Session,
    run: RunRow,
    step: int,
    filename: str,
    episode_reward: float,
    episode_length: int,
) -> dict[str, Any]:
    """A video of the run (its file already in place) and its ``video`` event."""
    video = VideoRow(
        run_id=run.id,
        step=step,
        filename=filename,
        episode_reward=values.to_db(float(episode_reward)),
        episode_length=int(episode_length),
        created_at=time.time(),
    )
    session.add(video)
    session.flush()
    public = video_public(video)
    append_event(session, run, "video", {"video": public})
    return public


def event_public(row: EventRow) -> dict[str, Any]:
    return {"seq": row.seq, "type": row.type, "time": row.time, **row.payload}


def video_public(video: VideoRow) -> dict[str, Any]:
    return {
        "id": video.id,
        "step": video.step,
        "episode_reward": values.encode(video.episode_reward),
        "episode_length": video.episode_length,
        "url": f"/api/runs/{video.run_id}/videos/{video.id}",
    }


def _metric_point(p: dict[str, Any]) -> MetricPoint:
    decoded = {k: values.decode(v) for k, v in p["values"].items()}
    return int(p["step"]), float(p["wall_time"]), decoded


def _record_log(session: Session, run: RunRow, p: dict[str, Any]) -> None:
    append_event(session, run, "log", {"line": p["line"]})


def _record_phase(session: Session, run: RunRow, p: dict[str, Any]) -> None:
    append_event(session, run, "phase", phase_payload(p["phase"], p["since"]))


def _record_checkpoint(session: Session, run: RunRow, p: dict[str, Any]) -> None:
    checkpoint = {k: v for k, v in p.items() if k != "type"}
    append_event(session, run, "checkpoint", {"checkpoint": checkpoint})


def _record_video(session: Session, run: RunRow, p: dict[str, Any]) -> None:
    reward = values.decode(p["episode_reward"])
    store_video(session, run, int(p["step"]), p["filename"], reward, int(p["episode_length"]))


def _record_rewind(session: Session, run: RunRow, p: dict[str, Any]) -> None:
    step = int(p["step"])
    if step < 0:
        raise ValueError(f"a rewind's step is {step}, below 0")
    newest = rewind_metrics(session, run, step)
    if newest is not None:
        append_event(session, run, "rewind", {"step": step, "from_step": newest})


_RECORDERS: dict[str, Callable[[Session, RunRow, dict[str, Any]], None]] = {
    "log": _record_log,
    "phase": _record_phase,
    "checkpoint": _record_checkpoint,
    "video": _record_video,
    "rewind": _record_rewind,
}


class RunEventRecording:
    """``RunStore``'s writes and reads of a run's events, each write in its own
    transaction (see ``record_items`` for several in one)."""

    sessions: sessionmaker[Session]

    def record_items(self, run_id: str, items: Sequence[ReportItem]) -> None:
        """``record_items`` in one transaction of its own."""
        with transaction(self.sessions) as session:
            record_items(session, lock_run(session, run_id), items)

    def record_metrics(
        self, run_id: str, step: int, wall_time: float, metrics: Mapping[str, float]
    ) -> bool:
        """Stores one step's metrics and their event; False if the step was skipped (see
        ``record_metrics_batch``)."""
        return self.record_metrics_batch(run_id, [(step, wall_time, metrics)]) == 1

    def record_metrics_batch(self, run_id: str, batch: Sequence[MetricPoint]) -> int:
        """Stores ``(step, wall_time, metrics)`` entries, each with its ``metrics`` event,
        in one transaction; returns how many were stored.

        A step at or below the newest stored step is skipped (a run that resumed from an
        older checkpoint repeats steps it had stored).
        """
        with transaction(self.sessions) as session:
            return store_metrics(session, lock_run(session, run_id), batch)

    def record_video(
        self, run_id: str, step: int, filename: str, episode_reward: float, episode_length: int
    ) -> dict[str, Any]:
        with transaction(self.sessions) as session:
            run = lock_run(session, run_id)
            return store_video(session, run, step, filename, episode_reward, episode_length)

    def record_checkpoint(self, run_id: str, checkpoint: dict[str, Any]) -> None:
        self.record_items(run_id, [ReportItem("checkpoint", checkpoint)])

    def record_log(self, run_id: str, line: str) -> None:
        self.record_items(run_id, [ReportItem("log", {"line": line})])

    def record_phase(self, run_id: str, phase: str, since: float) -> None:
        self.record_items(run_id, [ReportItem("phase", {"phase": phase, "since": since})])

    def events_after(self, run_id: str, after_seq: int, limit: int = 500) -> list[dict[str, Any]]:
        with self.sessions() as session:
            rows = session.scalars(
                select(EventRow)
                .where(EventRow.run_id == run_id, EventRow.seq > after_seq)
                .order_by(EventRow.seq)
                .limit(limit)
            ).all()
            return [event_public(row) for row in rows]

    def videos(self, run_id: str) -> list[VideoRow]:
        with self.sessions() as session:
            return list(
                session.scalars(
                    select(VideoRow).where(VideoRow.run_id == run_id).order_by(VideoRow.step)
                ).all()
            )

    def video(self, run_id: str, video_id: int) -> VideoRow | None:
        with self.sessions() as session:
            video = session.get(VideoRow, video_id)
            return video if video is not None and video.run_id == run_id else None
