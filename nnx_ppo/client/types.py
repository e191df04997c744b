"""What the service answers, as typed values (non-finite metric values decoded to floats)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "pruned", "crashed"})
"""Statuses a run never leaves."""

_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def decode_value(value: Any) -> float:
    """A metric value as JSON carries it (a number, or ``"NaN"``/``"Infinity"``/
    ``"-Infinity"``) -> float."""
    if isinstance(value, str):
        return _NON_FINITE[value] if value in _NON_FINITE else float(value)
    if value is None:
        return math.nan
    return float(value)


@dataclasses.dataclass(frozen=True)
class Run:
    """A run as ``GET /api/runs/{id}`` describes it (times in epoch seconds)."""

    id: str
    kind: str
    name: str
    status: str
    spec: dict[str, Any]
    tags: list[str]
    notes: str
    created_at: float
    started_at: float | None
    finished_at: float | None
    steps: int
    total_steps: int
    latest_metrics: dict[str, float]
    error: str | None
    last_seq: int
    cancel_requested: bool
    attempts: int
    pid: int | None
    node: str | None = None
    """The cluster node running it (Ray executor), else None."""
    external: bool = False
    """Tracked from a script outside the service (``nnx_ppo.track``)."""
    sweep_id: str | None = None
    trial: int | None = None
    """The sweep and trial number of a sweep's trial run, else None."""
    trial_params: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        """Whether the run has reached a terminal status."""
        return self.status in TERMINAL

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Run:
        return cls(
            id=data["id"],
            kind=data.get("kind", "ppo"),
            name=data.get("name", ""),
            status=data["status"],
            spec=dict(data.get("spec") or {}),
            tags=list(data.get("tags") or []),
            notes=data.get("notes") or "",
            created_at=float(data.get("created_at") or 0.0),
            started_at=data.get("started_at"),
            finished_at=data.get("finished_at"),
            steps=int(data.get("steps") or 0),
            total_steps=int(data.get("total_steps") or 0),
            latest_metrics={
                k: decode_value(v) for k, v in (data.get("latest_metrics") or {}).items()
            },
            error=data.get("error"),
            last_seq=int(data.get("last_seq") or 0),
            cancel_requested=bool(data.get("cancel_requested")),
            attempts=int(data.get("attempts") or 0),
            pid=data.get("pid"),
            node=data.get("node"),
            external=bool(data.get("external", False)),
            sweep_id=data.get("sweep_id"),
            trial=data.get("trial"),
            trial_params=data.get("trial_params"),
        )


@dataclasses.dataclass(frozen=True)
class RunList(Sequence[Run]):
    """One page of runs (newest first), a sequence (``page[0]``, ``page[:5]``, ``len``,
    iteration), and ``total``: how many match in all."""

    items: list[Run]
    total: int
    events_seq: int = 0
    """The service-wide events' sequence number when the page was read."""

    @overload
    def __getitem__(self, index: int) -> Run: ...
    @overload
    def __getitem__(self, index: slice) -> list[Run]: ...
    def __getitem__(self, index: int | slice) -> Run | list[Run]:
        return self.items[index]

    def __iter__(self) -> Iterator[Run]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclasses.dataclass(frozen=True)
class Video:
    id: int
    step: int
    episode_reward: float
    episode_length: int
    url: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Video:
        return cls(
            id=int(data["id"]),
            step=int(data["step"]),
            episode_reward=decode_value(data.get("episode_reward")),
            episode_length=int(data.get("episode_length") or 0),
            url=data.get("url", ""),
        )


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    step: int
    size_bytes: int
    created_at: float
    url: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Checkpoint:
        return cls(
            step=int(data["step"]),
            size_bytes=int(data.get("size_bytes") or 0),
            created_at=float(data.get("created_at") or 0.0),
            url=data.get("url", ""),
        )


@dataclasses.dataclass(frozen=True)
class Env:
    """An env of ``GET /api/envs``; sizes are None where the server has not described it
    (``details_known``), ``reason`` says why one is not ``available``."""

    name: str
    observation_size: int | dict[str, list[int]] | None
    action_size: int | None
    source: str
    available: bool = True
    details_known: bool = True
    domain_randomizer: bool = False
    reason: str | None = None
    reward_streams: list[str] | None = None
    action_heads: dict[str, int] | None = None
    """``{head: size}`` for an env with dict actions (``action_size`` is their total)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Env:
        action_size = data.get("action_size")
        return cls(
            name=data["name"],
            observation_size=data.get("observation_size"),
            action_size=None if action_size is None else int(action_size),
            source=data["source"],
            available=bool(data.get("available", True)),
            details_known=bool(data.get("details_known", True)),
            domain_randomizer=bool(data.get("domain_randomizer", False)),
            reason=data.get("reason"),
            reward_streams=data.get("reward_streams"),
            action_heads=data.get("action_heads"),
        )


@dataclasses.dataclass(frozen=True)
class Worker:
    id: str
    hostname: str
    pid: int
    heartbeat_at: float
    seconds_since_heartbeat: float
    slots: list[str]
    device_use: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Each device's use (``device``, ``runs``, memory, utilization...), as sent."""


@dataclasses.dataclass(frozen=True)
class Health:
    """``GET /api/health``; backend, devices and workers only when authenticated."""

    status: str
    version: str
    jax_backend: str | None = None
    devices: list[str] | None = None
    workers: list[Worker] | None = None
    executor: str | None = None
    nodes: list[dict[str, Any]] | None = None
    """The cluster's nodes (Ray executor), as sent."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Health:
        workers = data.get("workers")
        return cls(
            status=data["status"],
            version=data.get("version", ""),
            jax_backend=data.get("jax_backend"),
            devices=data.get("devices"),
            workers=None if workers is None else [_worker(w) for w in workers],
            executor=data.get("executor"),
            nodes=data.get("nodes"),
        )


def _worker(data: Mapping[str, Any]) -> Worker:
    fields = {f.name for f in dataclasses.fields(Worker)}
    return Worker(**{k: v for k, v in data.items() if k in fields})


@dataclasses.dataclass(frozen=True)
class Series:
    """One metric's points, in step order: numpy arrays of equal length.

    ``min``/``max`` are each point's bucket extremes when the server downsampled
    (equal to ``value`` where nothing was merged); ``wall_time`` (epoch seconds) is
    there when the server sent it.
    """

    step: np.ndarray
    value: np.ndarray
    min: np.ndarray
    max: np.ndarray
    wall_time: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.step)


@dataclasses.dataclass(frozen=True)
class Event:
    """One event of a run's stream. ``type`` says which of the optional fields it has:
    ``metrics`` -> ``step``, ``wall_time``, ``values``; ``status`` -> ``status``,
    ``error``; ``video`` -> ``video``; ``checkpoint`` -> ``checkpoint``; ``log`` -> ``line``.
    """

    seq: int
    type: str
    time: float
    step: int | None = None
    wall_time: float | None = None
    values: dict[str, float] | None = None
    status: str | None = None
    error: str | None = None
    video: Video | None = None
    checkpoint: Checkpoint | None = None
    line: str | None = None
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        """A status event with a status the run never leaves."""
        return self.type == "status" and self.status in TERMINAL

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        values = data.get("values")
        video = data.get("video")
        checkpoint = data.get("checkpoint")
        return cls(
            seq=int(data["seq"]),
            type=str(data["type"]),
            time=float(data.get("time") or 0.0),
            step=data.get("step"),
            wall_time=data.get("wall_time"),
            values=None if values is None else {k: decode_value(v) for k, v in values.items()},
            status=data.get("status"),
            error=data.get("error"),
            video=None if video is None else Video.from_json(video),
            checkpoint=None if checkpoint is None else Checkpoint.from_json(checkpoint),
            line=data.get("line"),
            raw=dict(data),
        )


SWEEP_FINISHED = frozenset({"finished", "cancelled", "failed"})
"""Statuses a sweep never leaves."""


def _objective(value: Any) -> float | None:
    return None if value is None else decode_value(value)


@dataclasses.dataclass(frozen=True)
class Trial:
    """One trial of a sweep: an ordinary run (``run_id``) with the sweep's values."""

    trial: int
    run_id: str
    status: str
    params: dict[str, Any]
    objective: float | None
    steps: int
    total_steps: int
    error: str | None
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Trial:
        return cls(
            trial=int(data["trial"]),
            run_id=data["run_id"],
            status=data["status"],
            params=dict(data.get("params") or {}),
            objective=_objective(data.get("objective")),
            steps=int(data.get("steps") or 0),
            total_steps=int(data.get("total_steps") or 0),
            error=data.get("error"),
            created_at=float(data.get("created_at") or 0.0),
            started_at=data.get("started_at"),
            finished_at=data.get("finished_at"),
        )


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A sweep as ``GET /api/sweeps/{id}`` describes it (``trials`` and ``request`` only
    there, empty in lists)."""

    id: str
    name: str
    status: str
    method: str
    objective: dict[str, str]
    max_trials: int
    parallel: int
    created_at: float
    finished_at: float | None
    error: str | None
    last_seq: int
    trial_counts: dict[str, int]
    best: Trial | None
    trials: list[Trial]
    request: dict[str, Any]
    env: str = ""
    """The base run's env."""

    @property
    def finished(self) -> bool:
        return self.status in SWEEP_FINISHED

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sweep:
        best = data.get("best")
        return cls(
            id=data["id"],
            name=data.get("name", ""),
            status=data["status"],
            method=data.get("method", ""),
            objective=dict(data.get("objective") or {}),
            max_trials=int(data.get("max_trials") or 0),
            parallel=int(data.get("parallel") or 1),
            created_at=float(data.get("created_at") or 0.0),
            finished_at=data.get("finished_at"),
            error=data.get("error"),
            last_seq=int(data.get("last_seq") or 0),
            trial_counts={k: int(v) for k, v in (data.get("trial_counts") or {}).items()},
            best=None if best is None else Trial.from_json(best),
            trials=[Trial.from_json(t) for t in data.get("trials") or []],
            request=dict(data.get("request") or {}),
            env=data.get("env", ""),
        )


@dataclasses.dataclass(frozen=True)
class SweepEvent:
    """One event of a sweep's stream: ``status`` -> ``status``, ``error``; ``trial`` (a
    trial queued, running or ended) -> ``trial``, ``run_id``, ``status``, ``params``,
    ``objective``, ``steps``, ``error``; ``best`` (a new best trial) -> ``trial``,
    ``run_id``, ``objective``, ``params``."""

    seq: int
    type: str
    time: float
    status: str | None = None
    error: str | None = None
    trial: int | None = None
    run_id: str | None = None
    params: dict[str, Any] | None = None
    objective: float | None = None
    steps: int | None = None
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        """The sweep's final status event."""
        return self.type == "status" and self.status in SWEEP_FINISHED

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SweepEvent:
        return cls(
            seq=int(data["seq"]),
            type=str(data["type"]),
            time=float(data.get("time") or 0.0),
            status=data.get("status"),
            error=data.get("error"),
            trial=data.get("trial"),
            run_id=data.get("run_id"),
            params=data.get("params"),
            objective=_objective(data.get("objective")),
            steps=data.get("steps"),
            raw=dict(data),
        )


@dataclasses.dataclass(frozen=True)
class SweepList(Sequence[Sweep]):
    """One page of sweeps (newest first), a sequence like ``RunList``, and ``total``: how
    many match in all."""

    items: list[Sweep]
    total: int

    @overload
    def __getitem__(self, index: int) -> Sweep: ...
    @overload
    def __getitem__(self, index: slice) -> list[Sweep]: ...
    def __getitem__(self, index: int | slice) -> Sweep | list[Sweep]:
        return self.items[index]

    def __iter__(self) -> Iterator[Sweep]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)
