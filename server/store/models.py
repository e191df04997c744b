"""Database tables (SQLAlchemy). The schema itself is created and changed by Alembic
(``migrations/``); these classes describe it for queries."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class RunRow(Base):
    """One training or distillation run. The row is the source of truth for its status."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), index=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    tags: Mapped[list[str]] = mapped_column(JSON, default=list)
    notes: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float, index=True)
    queued_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    steps: Mapped[int] = mapped_column(BigInteger, default=0)
    total_steps: Mapped[int] = mapped_column(BigInteger)
    latest_metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_seq: Mapped[int] = mapped_column(Integer, default=0)
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    worker_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """The run process's id while it runs."""
    sweep_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    """The sweep whose trial this run is (``trial``: its Optuna trial number)."""
    trial: Mapped[int | None] = mapped_column(Integer, nullable=True)
    trial_params: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """The trial's values, by spec path."""
    prune_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    """Set with ``cancel_requested`` when the sweep's pruner stops the run: it ends
    ``pruned`` with this reason instead of ``cancelled``."""
    token_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """SHA-256 (hex) of the run token of its current attempt (remote run processes report
    with it); replaced at every claim, so an older attempt's token stops working."""
    report_seq: Mapped[int] = mapped_column(Integer, default=0)
    """The newest report batch stored in this attempt (a retried batch is stored once)."""
    node: Mapped[str | None] = mapped_column(String(200), nullable=True)
    """Where its process runs or ran: the host name, or the Ray node id and host."""
    reported_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    """When its remote run process last reported (heartbeats included)."""
    external: Mapped[bool] = mapped_column(default=False)
    """A tracked run: trained by a script outside the service (``nnx_ppo.track``), which
    reports over the run-token path; never queued or claimed, ``crashed`` when silent."""


class EventRow(Base):
    """One stream event; ``seq`` is per run, from 1, without gaps."""

    __tablename__ = "events"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    type: Mapped[str] = mapped_column(String(16))
    time: Mapped[float] = mapped_column(Float)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)


class ServiceEventRow(Base):
    """One change of some run, in the service-wide sequence (``WS /api/events``): ``seq``
    from 1, without gaps, never reused (the oldest rows are pruned). No foreign key: the
    ``deleted`` event of a run outlives it."""

    __tablename__ = "service_events"
    __table_args__ = {"sqlite_autoincrement": True}  # noqa: RUF012 - SQLAlchemy reads it

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    type: Mapped[str] = mapped_column(String(16))
    run_id: Mapped[str] = mapped_column(String(32))
    time: Mapped[float] = mapped_column(Float)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)


class MetricRow(Base):
    """One scalar of one metric at one env step. NaN is stored as NULL."""

    __tablename__ = "metrics"
    __table_args__ = {"sqlite_with_rowid": False}  # noqa: RUF012 - SQLAlchemy reads it

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    wall_time: Mapped[float] = mapped_column(Float)
    value: Mapped[float | None] = mapped_column(Float, nullable=True)


class MetricKeyRow(Base):
    """Per run and key: how many points are stored (the next point's index)."""

    __tablename__ = "metric_keys"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    count: Mapped[int] = mapped_column(Integer, default=0)


class MetricRollupRow(Base):
    """A summary of ``size`` consecutive points of one key (point indices
    ``[chunk * size, (chunk + 1) * size)``), for fast downsampled reads."""

    __tablename__ = "metric_rollups"
    __table_args__ = {"sqlite_with_rowid": False}  # noqa: RUF012 - SQLAlchemy reads it

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    size: Mapped[int] = mapped_column(Integer, primary_key=True)
    chunk: Mapped[int] = mapped_column(Integer, primary_key=True)
    first_step: Mapped[int] = mapped_column(BigInteger)
    last_step: Mapped[int] = mapped_column(BigInteger)
    last_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    min_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    nans: Mapped[int] = mapped_column(Integer, default=0)
    last_wall_time: Mapped[float | None] = mapped_column(Float, nullable=True)
    """The wall time of the point at ``last_step`` (NULL only in rows older than 0007 whose
    point is gone)."""


class VideoRow(Base):
    __tablename__ = "videos"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    step: Mapped[int] = mapped_column(BigInteger)
    filename: Mapped[str] = mapped_column(String(200))
    episode_reward: Mapped[float | None] = mapped_column(Float, nullable=True)
    episode_length: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Float)


class RecordingRow(Base):
    """An activation recording of one of a run's checkpoints (``server.recording``): the
    request, its status (``recording_status.RecordingStatus``) and, once stored, the
    manifest and size of its files (``recordings/<id>/`` in the run's directory)."""

    __tablename__ = "recordings"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(16))
    step: Mapped[int] = mapped_column(BigInteger)
    """The checkpoint's step (resolved when the request named none)."""
    n_envs: Mapped[int] = mapped_column(Integer)
    episode_length: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(BigInteger)
    video: Mapped[bool] = mapped_column()
    estimated_bytes: Mapped[int] = mapped_column(BigInteger)
    """``T x N x sum(units) x 4``: the activations' size, checked against the limit."""
    bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    """The stored files' size (arrays, manifest, video) once it succeeded."""
    manifest: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """The recording process's id while it runs."""
    created_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class WorkerRow(Base):
    """A worker supervisor; alive while its heartbeat is fresh."""

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    hostname: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[float] = mapped_column(Float)
    heartbeat_at: Mapped[float] = mapped_column(Float)
    slots: Mapped[list[str]] = mapped_column(JSON)
    backend: Mapped[str] = mapped_column(String(16), default="cpu")
    devices: Mapped[list[str]] = mapped_column(JSON, default=list)
    stopped: Mapped[bool] = mapped_column(default=False)
    device_use: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    """``[{"device", "runs", ...GPU use}]`` as of the last heartbeat."""
    executor: Mapped[str] = mapped_column(String(16), default="local")
    """``local`` (run processes on this host) or ``ray`` (tasks on a Ray cluster)."""
    cluster: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    """Ray: ``[{"node_id", "address", "alive", "total", "free"}]`` as of the last heartbeat."""


class SweepRow(Base):
    """A hyperparameter sweep: its request, and its status (``running``, ``cancelling``,
    ``finished``, ``cancelled``, ``failed``). Its trials are runs with its ``sweep_id``."""

    __tablename__ = "sweeps"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), index=True)
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The sweep as submitted (base spec, space, method, objective, pruner, sizes)."""
    base_total_steps: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(Float, index=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_seq: Mapped[int] = mapped_column(Integer, default=0)


class SweepEventRow(Base):
    """One event of a sweep's stream; ``seq`` is per sweep, from 1, without gaps."""

    __tablename__ = "sweep_events"

    sweep_id: Mapped[str] = mapped_column(
        ForeignKey("sweeps.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    type: Mapped[str] = mapped_column(String(16))
    time: Mapped[float] = mapped_column(Float)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)


class SweepJournalRow(Base):
    """One operation of a sweep's Optuna study (``server.store.sweep_journal``); ``number``
    is per sweep, from 0, without gaps."""

    __tablename__ = "sweep_journal"

    sweep_id: Mapped[str] = mapped_column(
        ForeignKey("sweeps.id", ondelete="CASCADE"), primary_key=True
    )
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    log: Mapped[dict[str, Any]] = mapped_column(JSON)


Index("ix_runs_status_queued", RunRow.status, RunRow.queued_at)
Index("ix_recordings_status_created", RecordingRow.status, RecordingRow.created_at)
Index("ix_runs_sweep_trial", RunRow.sweep_id, RunRow.trial, unique=True)
Index("ix_events_run_type_seq", EventRow.run_id, EventRow.type, EventRow.seq)
