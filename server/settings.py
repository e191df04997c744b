"""Service configuration: pydantic-settings, read from ``NNX_PPO_*`` environment variables.

Bad values fail at start-up with the variable's name, never later on a request.
"""

from __future__ import annotations

import secrets
import socket
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from server.store.db import backend

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")


class Settings(BaseSettings):
    """Everything the API, the supervisor and the run processes need to agree on."""

    model_config = SettingsConfigDict(env_prefix="NNX_PPO_", frozen=True)

    data_dir: Path = Path("nnx_ppo_data")
    """Holds the database, the runs' files and the JAX compilation cache."""
    database_url: str | None = None
    """SQLAlchemy URL; default: a SQLite file ``nnx_ppo.db`` in ``data_dir``. PostgreSQL:
    ``postgresql+psycopg://USER:PASSWORD@HOST:PORT/DATABASE`` (a database shared by the API
    and workers on several machines)."""
    api_token: str | None = Field(default=None, min_length=8)
    """The access token; generated at start when unset."""
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    allowed_hosts: tuple[str, ...] = ()
    """Host header values accepted besides loopback (e.g. a LAN name when binding 0.0.0.0)."""
    workers: int | None = Field(default=None, ge=1)
    """On a GPU machine, the most runs executing at once (default: as many as the devices
    take, ``runs_per_device`` per GPU); on a CPU-only machine, how many host devices it
    has (default 1), each taking ``runs_per_device`` runs."""
    runs_per_device: int = Field(default=1, ge=1, le=64)
    """Runs that share one device; above 1, run processes do not preallocate device memory
    (``XLA_PYTHON_CLIENT_PREALLOCATE=false``) unless ``device_memory_fraction`` is set."""
    device_memory_fraction: float | None = Field(default=None, gt=0, le=1)
    """``XLA_PYTHON_CLIENT_MEM_FRACTION`` of every run process, when set."""
    run_niceness: int = Field(default=10, ge=0, le=19)
    """What a run process adds to its scheduling niceness (``os.nice``) as it starts: where
    training keeps every core busy, the API, the supervisor and the streams are scheduled
    before it (answers stay quick); with cores to spare it changes nothing. 0 leaves it."""
    system_metrics_seconds: float = Field(default=5.0, gt=0)
    """How often a run process samples its ``system/*`` metrics (CPU, memory, GPUs)."""
    jax_cache: Path | None = None
    """JAX's persistent compilation cache; default: ``data_dir/jax_cache``."""
    heartbeat_seconds: float = Field(default=2.0, gt=0)
    """How often the supervisor beats; a worker silent for 5 beats is presumed dead."""
    tracked_timeout_seconds: float = Field(default=60.0, gt=0)
    """A tracked run (``nnx_ppo.track``) whose script is silent this long (no report, no
    heartbeat) is ``crashed``."""
    max_body_bytes: int = Field(default=1_000_000, ge=1024)
    executor: Literal["local", "ray"] = "local"
    """Where run processes execute: ``local`` (children of the supervisor, on this host) or
    ``ray`` (a Ray task per run on the cluster at ``ray_address``; ``pip install
    nnx-ppo[ray]``)."""
    ray_address: str | None = None
    """The Ray cluster to join (``HOST:PORT`` of its head, or ``auto``); ``ray`` only."""
    public_url: str | None = None
    """The API's URL as run processes on other nodes reach it (default
    ``http://HOST:PORT``, with this machine's name for a wildcard ``host``)."""
    max_upload_bytes: int = Field(default=4 * 1024**3, ge=1024)
    """The largest artifact (checkpoint archive, video) a remote run process may upload."""
    recording_max_bytes: int = Field(default=2 * 1024**3, ge=1)
    """The largest activation recording (``T x N x sum(units) x 4`` bytes) a request may ask
    for; a larger one is refused (422) before anything runs."""
    recording_chunk_bytes: int = Field(default=64 * 1024**2, ge=1024)
    """The host memory one chunk of a recording's steps may take: the job runs and writes
    this much at a time."""
    recording_timeout_s: float = Field(default=3600.0, gt=0)
    """A recording job still running after this long is stopped and failed."""
    recording_jax_platforms: str = "cpu"
    """``JAX_PLATFORMS`` of recording jobs (they run beside the API; the GPUs are the
    runs'); empty: JAX's own choice."""
    list_playground_envs: bool = True
    """List MuJoCo Playground envs in GET /api/envs (describing them all takes a minute of
    CPU once per data directory; tests turn it off). They can be trained either way."""

    @model_validator(mode="after")
    def _memory_fits(self) -> Settings:
        fraction = self.device_memory_fraction
        if fraction is not None and fraction * self.runs_per_device > 1:
            raise ValueError(
                f"device_memory_fraction ({fraction}) times runs_per_device "
                f"({self.runs_per_device}) must be at most 1"
            )
        return self

    @model_validator(mode="after")
    def _ray_needs_address(self) -> Settings:
        if self.executor == "ray" and not self.ray_address:
            raise ValueError("executor 'ray' needs ray_address (--ray-address HOST:PORT)")
        return self

    @field_validator("data_dir", "jax_cache")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser().resolve()

    @field_validator("database_url")
    @classmethod
    def _supported_database(cls, value: str | None) -> str | None:
        if value is not None:
            backend(value)  # UnsupportedDatabase (a ValueError) names what is wrong
        return value

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(h.strip() for h in value.split(",") if h.strip())
        return value

    @cached_property
    def token(self) -> str:
        return self.api_token or secrets.token_urlsafe(24)

    @property
    def db_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'nnx_ppo.db').resolve()}"

    @property
    def api_url(self) -> str:
        if self.public_url:
            return self.public_url.rstrip("/")
        host = socket.gethostname() if self.host in ("0.0.0.0", "::") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    @property
    def runs_dir(self) -> Path:
        return (self.data_dir / "runs").resolve()

    @property
    def compile_cache(self) -> Path:
        return (self.jax_cache or self.data_dir / "jax_cache").resolve()

    @property
    def heartbeat_timeout(self) -> float:
        return 5 * self.heartbeat_seconds

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    def ensure_dirs(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.compile_cache.mkdir(parents=True, exist_ok=True)
