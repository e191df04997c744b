"""Settings of one Brax PPO benchmark run, validated, with Brax's derived schedule.

See :mod:`bench.brax_runner` for how each key maps onto Brax's ``ppo.train`` arguments.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class BraxPPOSettings:
    """One Brax PPO benchmark configuration (the keys of ``run_brax_ppo``'s settings dict)."""

    env: str
    """MuJoCo Playground registry name, e.g. ``CartpoleBalance``."""
    n_envs: int
    """Parallel training envs (Brax ``num_envs``)."""
    rollout_length: int
    """Steps per env per rollout (Brax ``unroll_length``)."""
    n_minibatches: int
    """Minibatches per epoch (Brax ``num_minibatches``)."""
    n_epochs: int
    """Passes over each update's data (Brax ``num_updates_per_batch``)."""
    policy_hidden: tuple[int, ...]
    """Policy MLP hidden layer sizes."""
    value_hidden: tuple[int, ...]
    """Value MLP hidden layer sizes."""
    normalize_observations: bool
    """Normalise observations with running statistics."""
    learning_rate: float
    """Adam learning rate."""
    discounting: float
    """Discount gamma."""
    entropy_cost: float
    """Weight of the entropy bonus."""
    reward_scaling: float
    """Multiplier on rewards inside the loss."""
    total_steps: int
    """Requested env steps (Brax ``num_timesteps``; rounded up to whole epochs)."""
    num_evals: int
    """Evals including the one at step 0; ``num_evals - 1`` training epochs, at least 2."""
    seed: int
    """Brax training seed."""
    num_eval_envs: int
    """Episodes per evaluation (one per eval env)."""
    episode_length: int
    """Episode time limit in env steps (1000 for CartpoleBalance)."""
    batch_size: int | None = None
    """Trajectories per minibatch (Brax ``batch_size``); None means ``n_envs // n_minibatches``."""
    gae_lambda: float = 0.95
    """GAE lambda (Brax default)."""
    clipping_epsilon: float = 0.3
    """PPO ratio clip (Brax default 0.3)."""
    vf_loss_coefficient: float = 0.5
    """Value loss weight; Brax's value loss is ``0.5 * vf_loss_coefficient * mean(err**2)``."""
    max_grad_norm: float | None = None
    """Global gradient-norm clip, or None (Brax default)."""
    num_resets_per_eval: int = 0
    """Brax ``num_resets_per_eval``: split each eval interval into this many epochs and reset
    every env after each (Brax default 0: one epoch, envs only auto-reset when done)."""
    physics_impl: str = "jax"
    """Playground physics backend; ``jax`` (MJX) is ~30x faster than ``warp`` on CPU."""

    def __post_init__(self) -> None:
        self._check_schedule()
        self._check_numbers()
        for name in ("policy_hidden", "value_hidden"):
            sizes = getattr(self, name)
            if not sizes or not all(_is_positive_int(s) for s in sizes):
                raise ValueError(f"{name} ({sizes!r}) must be a non-empty tuple of positive ints")

    def _check_schedule(self) -> None:
        positive = ("n_envs", "rollout_length", "n_minibatches", "n_epochs", "total_steps")
        positive += ("num_eval_envs", "episode_length")
        bad = {n: getattr(self, n) for n in positive if not _is_positive_int(getattr(self, n))}
        if bad:
            raise ValueError(f"these settings must be positive integers: {bad}")
        if not _is_positive_int(self.num_evals) or self.num_evals < 3:
            raise ValueError(
                f"num_evals ({self.num_evals!r}) must be >= 3: the first training epoch "
                "includes compilation, so steady-state throughput needs a second one"
            )
        if self.batch_size is None and self.n_envs % self.n_minibatches:
            raise ValueError(
                f"n_envs ({self.n_envs}) must be divisible by n_minibatches "
                f"({self.n_minibatches}) when batch_size is not given"
            )
        if self.batch_size is not None and (
            not _is_positive_int(self.batch_size)
            or (self.batch_size * self.n_minibatches) % self.n_envs
        ):
            raise ValueError(
                f"batch_size ({self.batch_size!r}) * n_minibatches ({self.n_minibatches}) "
                f"must be a positive multiple of n_envs ({self.n_envs})"
            )
        if not isinstance(self.num_resets_per_eval, int) or self.num_resets_per_eval < 0:
            raise ValueError(f"num_resets_per_eval ({self.num_resets_per_eval!r}) must be >= 0")

    def _check_numbers(self) -> None:
        checks = {
            "learning_rate": lambda x: x > 0,
            "discounting": lambda x: 0 < x <= 1,
            "gae_lambda": lambda x: 0 <= x <= 1,
            "clipping_epsilon": lambda x: x > 0,
            "entropy_cost": lambda x: x >= 0,
            "reward_scaling": lambda x: x > 0,
            "vf_loss_coefficient": lambda x: x >= 0,
            "max_grad_norm": lambda x: x > 0,
        }
        bad = {
            name: getattr(self, name)
            for name, ok in checks.items()
            if not (name == "max_grad_norm" and self.max_grad_norm is None)
            and not (_is_real(getattr(self, name)) and ok(getattr(self, name)))
        }
        if bad:
            raise ValueError(
                f"out of range: {bad} (need learning_rate, clipping_epsilon, reward_scaling, "
                "max_grad_norm > 0; discounting in (0, 1]; gae_lambda in [0, 1]; "
                "entropy_cost, vf_loss_coefficient >= 0)"
            )

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> BraxPPOSettings:
        """Builds settings from a dict (e.g. parsed JSON), checking for unknown keys.

        Raises:
            ValueError: On unknown or missing keys, or invalid values.
        """
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(settings) - set(fields))
        if unknown:
            raise ValueError(f"unknown settings {unknown}; known: {sorted(fields)}")
        missing = sorted(
            name
            for name, f in fields.items()
            if name not in settings and f.default is dataclasses.MISSING
        )
        if missing:
            raise ValueError(f"missing settings {missing}")
        values = dict(settings)
        for name in ("policy_hidden", "value_hidden"):
            values[name] = tuple(values[name])
        return cls(**values)

    @property
    def resolved_batch_size(self) -> int:
        """Brax ``batch_size`` (trajectories per minibatch)."""
        return (
            self.batch_size if self.batch_size is not None else (self.n_envs // self.n_minibatches)
        )

    @property
    def steps_per_update(self) -> int:
        """Env steps collected per PPO update (one Brax training step)."""
        return self.resolved_batch_size * self.n_minibatches * self.rollout_length

    @property
    def updates_per_epoch(self) -> int:
        """PPO updates per Brax ``training_epoch`` call, as Brax computes it.

        Brax makes ``max(num_resets_per_eval, 1)`` such calls between two evals.
        """
        return math.ceil(
            self.total_steps
            / ((self.num_evals - 1) * self.steps_per_update * max(self.num_resets_per_eval, 1))
        )


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and value > 0


def _is_real(value: Any) -> bool:
    return (
        isinstance(value, int | float | np.integer | np.floating)
        and not isinstance(value, bool)
        and bool(np.isfinite(value))
    )
