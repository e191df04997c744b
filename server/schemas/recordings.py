"""A run's activation recordings: the request, a recording and its list, and the
dashboard's reads of one (a slice, a 2-D projection)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class RecordingCreate(BaseModel):
    """A recording of one of the run's checkpoints: ``n_envs`` envs for ``episode_length``
    steps, deterministic actions, from the env resets of ``seed``."""

    model_config = ConfigDict(extra="forbid")

    step: int | None = Field(
        default=None, ge=0, description="The checkpoint's step; null: the newest checkpoint."
    )
    n_envs: int = Field(ge=1, le=65536, description="Envs recorded side by side (N).")
    episode_length: int = Field(
        ge=1,
        le=10_000_000,
        description="Steps recorded (T); an env whose episode ends is "
        "reset and goes on (dones marks where).",
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="Seed of the env resets.")
    video: bool = Field(
        default=False,
        description="Also render env 0 as an MP4, one frame per step (renderable envs only: "
        "MuJoCo Playground's).",
    )


class RecordingPublic(BaseModel):
    id: int
    run_id: str
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    step: int = Field(description="The checkpoint's step.")
    n_envs: int
    episode_length: int
    seed: int
    video: bool
    estimated_bytes: int = Field(description="T x N x sum(units) x 4: the activations' size.")
    bytes: int | None = Field(description="The stored files' size, once it succeeded.")
    error: str | None
    cancel_requested: bool
    created_at: float
    started_at: float | None
    finished_at: float | None
    url: str
    data_url: str | None = Field(description="The .npz download, once it succeeded.")
    video_url: str | None = Field(description="The MP4 of env 0, once it succeeded.")


class RecordingDetail(RecordingPublic):
    manifest: dict[str, Any] | None = Field(
        description="Once it succeeded: format, run_id, step, env, seed, n_envs, "
        "episode_length, arrays ({name: {file, kind, shape, dtype}}), populations "
        "({name: units}), video, and what dones means."
    )


class RecordingList(BaseModel):
    items: list[RecordingPublic]
    total: int


class RecordingSlice(BaseModel):
    """One env's activations of one population over a range of steps, downsampled to
    `points` means of `stride` steps and quantized to one byte per value over [min, max]."""

    key: str
    env: int
    t0: int
    t1: int
    stride: int = Field(description="Steps per point (each point is their mean).")
    steps: list[int] = Field(description="The first step of each point.")
    units: int = Field(description="Rows of `codes`.")
    points: int = Field(description="Columns of `codes` (as many as `steps`).")
    codes: str = Field(
        description="Base64 of `units` x `points` bytes, [units][points] row by row: byte "
        "c <= 254 is the value min + c * (max - min) / 254 (each point's mean, rounded to "
        "the nearest such level), 255 a NaN or infinite one."
    )
    dones: list[bool] = Field(description="Per point: one of its steps starts a new episode.")
    min: float = Field(description="The lowest finite point (code 0).")
    max: float = Field(description="The highest finite point (code 254).")


class RecordingPca(BaseModel):
    """One env's trajectory of one population on its first two principal components."""

    key: str
    env: int
    stride: int
    steps: list[int]
    points: list[list[float]] = Field(description="[points][2].")
    explained_variance: list[float] = Field(description="Ratio of each component.")
    loadings: list[list[float]] = Field(description="[2][units].")
