"""A run's metric series and its phase."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class SeriesPublic(BaseModel):
    step: list[int]
    wall_time: list[float] = Field(
        description="Epoch seconds of each point (of a bucket's last point when downsampled)."
    )
    value: list[float | str]
    min: list[float | str]
    max: list[float | str]


class PhasePublic(BaseModel):
    phase: Literal["compiling", "training", "evaluating", "checkpointing", "video"]
    since: float = Field(description="When the phase began, epoch seconds.")


class MetricsPublic(BaseModel):
    series: dict[str, SeriesPublic]
    last_seq: int = Field(
        description="The seq of the run's newest event when the series were read: they hold "
        "every metric of the events up to it and none after, so the run's stream followed "
        "with after_seq=last_seq brings exactly the later ones."
    )
    phase: PhasePublic | None = Field(
        default=None,
        description="The run's phase as of last_seq (its newest phase event up to it): what "
        "a page following from last_seq shows until the next phase event.",
    )
