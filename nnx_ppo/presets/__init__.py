"""Training setups per env: an env, its network and a ``TrainConfig``.

``PRESETS`` maps every env name that ``nnx_ppo.envs.load`` knows to a preset:

- ``PRESETS["CartpoleBalance"]`` is tuned here: it reaches a deterministic eval reward above
  900 (of 1000) in about 4-6M env steps, a couple of minutes on a 2-core CPU
  (``bench/learning.py`` measures it for several seeds).
- Every MuJoCo Playground env has a preset mapped from Playground's own Brax PPO
  parameters (``nnx_ppo.presets.playground`` documents the mapping, field by field, and
  each preset's ``unmapped`` lists what did not carry over). It is the CPU variant when JAX
  runs on the CPU, the GPU variant Playground publishes otherwise; ``preset(name,
  variant=...)`` picks one, ``playground_preset`` the mapped one also for tuned envs.
  The envs Playground trains with a domain randomizer (``catalogue.RANDOMIZED_ENVS``) have
  ``randomize`` on.
- The built-in envs have small presets of their own.

Playground presets are built on first use (Playground's configs take seconds to import),
never when ``nnx_ppo`` or this package is imported.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator, Mapping
from typing import Any

from nnx_ppo import catalogue
from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig
from nnx_ppo.envs import randomization
from nnx_ppo.envs.randomization import RandomizationFn
from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.from_spec import make_networks as make_networks

VARIANTS = ("cpu", "gpu")


@dataclasses.dataclass(frozen=True)
class Preset:
    """A named training setup.

    Attributes:
        env: Name for ``nnx_ppo.envs.load``.
        env_overrides: Env config overrides.
        network: ``{"kind": "mlp" | "lstm", **factory keyword arguments}``.
        config: The training configuration.
        source: ``"tuned"`` (set up here) or ``"playground"`` (mapped from Playground's
            Brax PPO parameters).
        variant: ``"cpu"`` or ``"gpu"``: the machine it is sized for.
        unmapped: What of the source parameters this preset does not carry over, and why.
        randomize: Train with the env's domain randomizer from MuJoCo Playground
            (``randomization_fn``): on in the presets of the envs that have one
            (``catalogue.RANDOMIZED_ENVS``), as Playground trains them.
    """

    env: str
    env_overrides: dict[str, Any]
    network: dict[str, Any]
    config: TrainConfig
    source: str = "tuned"
    variant: str = "cpu"
    unmapped: tuple[str, ...] = ()
    randomize: bool = False

    def make_networks(self, obs_size: Any, action_size: int, seed: int) -> StatefulModule:
        """Builds this preset's network for an env with these sizes."""
        return make_networks(self.network, obs_size, action_size, seed)

    def randomization_fn(self) -> RandomizationFn | None:
        """The domain randomizer to train with (``train_ppo``'s ``randomization_fn``):
        Playground's for this env when ``randomize``, else None.

        Raises:
            ValueError: If ``randomize`` is set for an env without a randomizer.
        """
        if not self.randomize:
            return None
        fn = randomization.randomizer(self.env)
        if fn is None:
            raise ValueError(f"env.randomize: {self.env!r} has no domain randomizer")
        return fn

    def summary(self) -> dict[str, Any]:
        """The preset as JSON in run-spec terms: ``{"env": {"name", "overrides",
        "randomize"}, "network", "config": {"ppo", "eval", "checkpoint_every_steps"},
        "source", "variant", "unmapped"}`` (what the dashboard's New Run form fills in)."""
        config = self.config
        return {
            "env": {
                "name": self.env,
                "overrides": dict(self.env_overrides),
                "randomize": self.randomize,
            },
            "network": _jsonable(self.network),
            "config": {
                "ppo": _fields(config.ppo, ("logging_level", "logging_percentiles")),
                "eval": _fields(config.eval, ("logging_level", "logging_percentiles")),
                "checkpoint_every_steps": config.checkpoint_every_steps,
            },
            "source": self.source,
            "variant": self.variant,
            "unmapped": list(self.unmapped),
        }

    def with_overrides(
        self,
        *,
        n_envs: int | None = None,
        n_minibatches: int | None = None,
        rollout_length: int | None = None,
        total_steps: int | None = None,
        eval_every_steps: int | None = None,
    ) -> Preset:
        """This preset with some sizes replaced. A new ``n_envs`` without
        ``n_minibatches`` rescales the minibatch count with it (keeping envs per
        minibatch), down to a divisor of ``n_envs``. A new ``total_steps`` moves the
        evaluation (unless ``eval_every_steps`` is given) and checkpoint cadences with it:
        the preset's number of each over the new total (``follow_total``).

        Raises:
            ValueError: from the config's validation (e.g. ``n_envs`` not divisible by
                ``n_minibatches``), naming the field.
        """
        ppo = self.config.ppo
        changes: dict[str, Any] = {}
        if n_envs is not None:
            changes["n_envs"] = n_envs
            if n_minibatches is None and isinstance(n_envs, int) and n_envs > 0:
                changes["n_minibatches"] = rescaled_minibatches(ppo, n_envs)
        if n_minibatches is not None:
            changes["n_minibatches"] = n_minibatches
        if rollout_length is not None:
            changes["rollout_length"] = rollout_length
        if total_steps is not None:
            changes["total_steps"] = total_steps
        config = dataclasses.replace(self.config, ppo=dataclasses.replace(ppo, **changes))
        if total_steps is not None:
            config = with_total(self.config, config, follow_eval=eval_every_steps is None)
        if eval_every_steps is not None:
            config = dataclasses.replace(
                config, eval=dataclasses.replace(config.eval, every_steps=eval_every_steps)
            )
        return dataclasses.replace(self, config=config)


def follow_total(preset_total: int, preset_every: int, total: int) -> int:
    """A cadence for ``total`` steps with as many events as ``preset_every`` gives over
    ``preset_total`` (the service's spec filling, ``server.spec.preset_fill``, does the same).

    >>> follow_total(60_000_000, 6_666_667, 5_000_000)  # Playground's 9 evals, over 5M
    555556
    """
    count = max(1, round(preset_total / preset_every))
    return max(1, math.ceil(total / count))


def with_total(
    before: TrainConfig,
    config: TrainConfig,
    *,
    follow_eval: bool = True,
    follow_checkpoint: bool = True,
) -> TrainConfig:
    """``config`` (``before`` with a new ``ppo.total_steps``) with its evaluation and
    checkpoint cadences following the new total (``follow_total``), where asked."""
    total, old = config.ppo.total_steps, before.ppo.total_steps
    if total == old or not isinstance(total, int) or total <= 0:
        return config  # an invalid total is refused by the config itself
    if follow_eval:
        every = follow_total(old, before.eval.every_steps, total)
        config = dataclasses.replace(
            config, eval=dataclasses.replace(config.eval, every_steps=every)
        )
    if follow_checkpoint:
        every = follow_total(old, before.checkpoint_every_steps, total)
        config = dataclasses.replace(config, checkpoint_every_steps=every)
    return config


def rescaled_minibatches(ppo: PPOConfig, n_envs: int) -> int:
    """``n_minibatches`` scaled like ``n_envs / ppo.n_envs`` (at least 1), lowered to a
    divisor of ``n_envs``."""
    wanted = max(1, round(ppo.n_minibatches * n_envs / ppo.n_envs))
    return max(d for d in range(1, wanted + 1) if n_envs % d == 0)


TUNED: dict[str, Preset] = {
    "CartpoleBalance": Preset(
        env="CartpoleBalance",
        env_overrides={},
        network={
            "kind": "mlp",
            "actor_hidden_sizes": (32, 32),
            "critic_hidden_sizes": (64, 64),
            "normalize_obs": True,
            "entropy_weight": 1e-2,
        },
        config=TrainConfig(
            ppo=PPOConfig(
                n_envs=512,
                rollout_length=32,
                total_steps=10_000_000,
                discounting_factor=0.995,
                learning_rate=1e-3,
                n_minibatches=8,
                n_epochs=4,
                anneal_learning_rate=True,
            ),
            eval=EvalConfig(every_steps=250_000, n_envs=64, max_episode_length=1000),
        ),
    ),
}
"""Presets tuned here; they are served whatever the backend."""


def two_arm_graph() -> dict[str, Any]:
    """``TwoArmReach``'s preset network, a population graph (a dict action needs one
    action head per arm): each arm's observation drives a hidden population of its own
    that parameterises that arm's action head; the critic reads both arms."""
    populations: list[dict[str, Any]] = []
    connections: list[dict[str, Any]] = []
    for arm in ("left", "right"):
        populations += [
            {"name": f"in_{arm}", "size": 6, "input_from": arm},
            {"name": f"{arm}_hidden", "size": 32, "activation": "swish"},
            {"name": f"{arm}_arm", "size": 4, "output_to": arm},
        ]
        connections += [
            {"src": f"in_{arm}", "dst": f"{arm}_hidden"},
            {"src": f"{arm}_hidden", "dst": f"{arm}_arm"},
            {"src": f"in_{arm}", "dst": "critic_hidden"},
        ]
    populations += [
        {"name": "critic_hidden", "size": 64, "activation": "swish"},
        {"name": "critic", "size": 1, "output_to": "value"},
    ]
    connections.append({"src": "critic_hidden", "dst": "critic"})
    return {
        "kind": "graph",
        "normalize_obs": True,
        "populations": populations,
        "connections": connections,
        "actions": {"left": "left", "right": "right"},
        "value": "value",
    }


def _builtin_preset(name: str) -> Preset:
    """A small starting setup for a built-in env (sized for a CPU; not tuned)."""
    episode = {"MemoryCue": 12}.get(name, 100)
    kind = "lstm" if name == "MemoryCue" else "mlp"
    network: dict[str, Any] = {"kind": kind, "actor_hidden_sizes": (32,)}
    if name == "PointReachEnergy":
        network["reward_streams"] = ("energy", "task")
    network["critic_hidden_sizes"] = (32,) if kind == "lstm" else (64, 64)
    if kind == "lstm":
        network["lstm_size"] = 32
    if name == "TwoArmReach":  # dict actions: one action head per arm, a graph network's
        network = two_arm_graph()
    return Preset(
        env=name,
        env_overrides={},
        network=network,
        config=TrainConfig(
            ppo=PPOConfig(
                n_envs=64,
                rollout_length=16,
                total_steps=300_000,
                learning_rate=1e-3,
                n_minibatches=4,
                n_epochs=4,
            ),
            eval=EvalConfig(every_steps=50_000, n_envs=32, max_episode_length=episode),
            checkpoint_every_steps=100_000,
        ),
    )


def default_variant() -> str:
    """``"cpu"`` when JAX's default backend is the CPU, else ``"gpu"``."""
    import jax

    return "cpu" if jax.default_backend() == "cpu" else "gpu"


@functools.cache
def playground_preset(name: str, variant: str | None = None) -> Preset:
    """The preset mapped from Playground's Brax PPO parameters for ``name``.

    Args:
        name: A MuJoCo Playground env.
        variant: ``"cpu"``, ``"gpu"``, or None for ``default_variant()``.
    """
    from nnx_ppo.presets import playground

    variant = _check_variant(variant)
    params = playground.brax_ppo_params(name)
    return playground.from_brax_params(name, params, cpu=variant == "cpu")


def preset(name: str, variant: str | None = None) -> Preset:
    """The preset for env ``name``: tuned when there is one, else Playground's mapped one
    (``variant`` as in ``playground_preset``), else a built-in env's.

    Raises:
        ValueError: for an unknown name (the message lists the known ones).
    """
    if name in TUNED:
        _check_variant(variant)
        return TUNED[name]
    if name in catalogue.PLAYGROUND_FAMILIES:
        return playground_preset(name, variant)
    if name in catalogue.BUILTIN_ENV_NAMES:
        _check_variant(variant)
        return _builtin_preset(name)
    raise ValueError(
        f"unknown preset {name!r}{catalogue.did_you_mean(name)}; "
        f"known: {', '.join(catalogue.env_names())}"
    )


def _check_variant(variant: str | None) -> str:
    if variant is None:
        return default_variant()
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS} or None, got {variant!r}")
    return variant


class _Presets(Mapping[str, Preset]):
    """Every env name -> ``preset(name)``; Playground presets are built on first access."""

    def __getitem__(self, name: str) -> Preset:
        if not isinstance(name, str) or name not in catalogue.env_names():
            raise KeyError(name)
        return preset(name)

    def __iter__(self) -> Iterator[str]:
        return iter(catalogue.env_names())

    def __len__(self) -> int:
        return len(catalogue.env_names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in catalogue.env_names()


PRESETS: Mapping[str, Preset] = _Presets()
"""Every env name -> its preset (see the module docstring)."""


def _fields(obj: Any, skip: tuple[str, ...]) -> dict[str, Any]:
    return {
        f.name: _jsonable(getattr(obj, f.name))
        for f in dataclasses.fields(obj)
        if f.name not in skip
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
