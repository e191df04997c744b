"""A run's videos and checkpoints."""

from __future__ import annotations

from pydantic import BaseModel


class VideoPublic(BaseModel):
    id: int
    step: int
    episode_reward: float | str
    episode_length: int
    url: str


class VideoList(BaseModel):
    items: list[VideoPublic]
    total: int


class CheckpointPublic(BaseModel):
    step: int
    size_bytes: int
    created_at: float
    url: str


class CheckpointList(BaseModel):
    items: list[CheckpointPublic]
    total: int
