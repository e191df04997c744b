"""A tracked run (``nnx_ppo.track``) as a script asks for it, and the answer with its token."""

from __future__ import annotations

from pydantic import BaseModel, Field

from server.schemas.runs import RunPublic
from server.user_text import JsonObject, NoteText, PlainText


class TrackCreate(BaseModel):
    name: PlainText = Field(min_length=1, max_length=200)
    config: JsonObject = Field(
        default_factory=dict,
        description="Stored as the run's spec. A run spec (kind, env, network, config, as "
        "POST /api/runs takes) lets its checkpoints be resumed as queued runs.",
    )
    tags: list[PlainText] = Field(default_factory=list, max_length=32)
    notes: NoteText = Field(default="", max_length=10_000)
    total_steps: int = Field(
        default=0, ge=0, le=10**15, description="0: the config's total_steps, if it names one."
    )


class TrackedRunPublic(BaseModel):
    run: RunPublic
    token: str = Field(description="The run token its reports carry (shown once).")
    timeout_seconds: float = Field(
        description="Silent (no report, no heartbeat) this long, the run is crashed."
    )
