"""The env catalogue and an env's preset."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class EnvPublic(BaseModel):
    name: str
    observation_size: int | dict[str, list[int]] | None = Field(
        default=None, description="Null until the service has loaded the env once."
    )
    action_size: int | None = Field(
        default=None,
        description="Null until the service has loaded the env once. For an env with dict "
        "actions (action_heads), the total over its heads.",
    )
    action_heads: dict[str, int] | None = Field(
        default=None,
        description="For an env whose action is a dict of arrays, {head: size}: a network "
        "needs one action head per key (a graph network's 'actions'). Null for a plain "
        "[action_size] action.",
    )
    source: str = Field(
        description="'builtin', 'playground', or 'plugin:<package>' for an env an installed "
        "package registers (entry-point group nnx_ppo.envs)."
    )
    details_known: bool = Field(
        default=True, description="False while the sizes are still being learned."
    )
    available: bool = Field(default=True, description="False when the env cannot load here.")
    reason: str | None = Field(default=None, description="Why it is not available, and the fix.")
    reward_streams: list[str] | None = None
    domain_randomizer: bool = Field(
        default=False,
        description="MuJoCo Playground has a domain randomizer for it (a run spec's "
        "env.randomize may be true).",
    )


class PresetPublic(BaseModel):
    env: str
    variant: Literal["cpu", "gpu"] = Field(
        description="The machine it is sized for: by default gpu when a live worker has a "
        "GPU, else cpu."
    )
    source: str = Field(
        description="'tuned', 'playground' (mapped from Playground's Brax "
        "PPO parameters) or the built-in env's own."
    )
    unmapped: list[str] = Field(description="What of the source parameters does not carry over.")
    spec: dict[str, Any] = Field(
        description="env, network and config of a run spec, as POST /api/runs takes them."
    )


class EnvList(BaseModel):
    items: list[EnvPublic]
    total: int
    complete: bool = Field(
        description="False while the service is still reading the MuJoCo Playground envs."
    )


class NetworkKindPublic(BaseModel):
    kind: str = Field(
        description="A run spec's network.kind: 'mlp', 'lstm', 'graph' or 'plugin:<name>'."
    )
    source: str = Field(
        description="'builtin', or 'plugin:<package>' for an installed plugin network."
    )


class NetworkKindList(BaseModel):
    items: list[NetworkKindPublic]
