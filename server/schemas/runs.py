"""A run as the API shows it, its list, and the edit of its name, tags and notes."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from server.store.run_status import RunStatus
from server.user_text import NoteText, PlainText


class RunUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: PlainText | None = Field(default=None, min_length=1, max_length=200)
    tags: list[PlainText] | None = Field(default=None, max_length=32)
    notes: NoteText | None = Field(default=None, max_length=10_000)


class RunPublic(BaseModel):
    id: str
    kind: str
    name: str
    status: RunStatus
    spec: dict[str, Any]
    tags: list[str]
    notes: str
    created_at: float = Field(description="Epoch seconds.")
    started_at: float | None
    finished_at: float | None
    steps: int = Field(description="Env steps done.")
    total_steps: int
    latest_metrics: dict[str, float | str] = Field(
        description="Newest value of each metric; non-finite values as 'NaN', 'Infinity', "
        "'-Infinity'."
    )
    error: str | None
    last_seq: int = Field(description="The seq of its newest stream event.")
    cancel_requested: bool
    attempts: int = Field(description="How many times a worker started it.")
    pid: int | None = Field(description="Its run process while it runs.")
    sweep_id: str | None = Field(default=None, description="The sweep whose trial it is.")
    trial: int | None = Field(default=None, description="Its trial number in the sweep.")
    trial_params: dict[str, Any] | None = Field(
        default=None, description="The trial's values, by spec path."
    )
    node: str | None = Field(
        default=None, description="Where its process runs or ran: a host, or a Ray node."
    )
    external: bool = Field(
        default=False,
        description="A tracked run: trained by a script outside the service (nnx_ppo.track).",
    )


class RunList(BaseModel):
    items: list[RunPublic]
    total: int
    events_seq: int = Field(
        description="The newest service event when the list was read: follow "
        "WS /api/events?after_seq=events_seq for every change since."
    )
