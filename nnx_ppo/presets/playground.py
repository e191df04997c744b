"""Presets for every MuJoCo Playground env, mapped from Playground's own Brax PPO parameters.

``brax_ppo_params(name)`` reads ``mujoco_playground.config.{dm_control_suite,locomotion,
manipulation}_params.brax_ppo_config(name)`` (a slow import: only here, on first use);
``from_brax_params`` maps it field by field:

| Playground (Brax ``ppo.train``)    | nnx-ppo                                               |
| ---------------------------------- | ----------------------------------------------------- |
| ``num_envs``                       | ``ppo.n_envs`` (GPU variant; the CPU variant divides)  |
| ``unroll_length``, ``batch_size``, | ``ppo.rollout_length = unroll_length * batch_size *   |
| ``num_minibatches``                | num_minibatches / num_envs``: one iteration collects   |
|                                    | what one Brax training step collects                  |
| ``num_minibatches``                | ``ppo.n_minibatches`` (same samples per minibatch)    |
| ``num_updates_per_batch``          | ``ppo.n_epochs``                                      |
| ``discounting``                    | ``ppo.discounting_factor``                            |
| ``learning_rate``                  | ``ppo.learning_rate`` (constant, as in Brax)          |
| ``entropy_cost``                   | network ``entropy_weight`` (the sampler's entropy      |
|                                    | bonus: ``-weight * mean(entropy)``, Brax's form)      |
| ``reward_scaling``                 | ``ppo.reward_scaling``                                |
| ``clipping_epsilon`` (Brax: 0.3)   | ``ppo.clip_range``                                    |
| ``max_grad_norm`` (Brax: None)     | ``ppo.gradient_clipping``                             |
| ``gae_lambda`` (Brax: 0.95)        | ``ppo.gae_lambda``                                    |
| ``vf_loss_coefficient`` (0.5)      | ``ppo.critic_loss_weight = 0.5`` (both value losses   |
|                                    | are ``0.5 * mean(err^2)`` before the weight)          |
| ``normalize_advantage`` (True)     | ``ppo.normalize_advantages``                          |
| ``network_factory`` sizes          | ``actor_hidden_sizes`` / ``critic_hidden_sizes``      |
|                                    | (Brax defaults: policy 4x32, value 5x256)             |
| activation (Brax: swish)           | ``activation="swish"``                                |
| ``policy_obs_key``/``value_obs_key``| network ``policy_obs_key`` / ``value_obs_key``       |
| ``normalize_observations``         | network ``normalize_obs``                             |
| ``episode_length``                 | env override ``episode_length`` and                   |
|                                    | ``eval.max_episode_length``                           |
| ``num_timesteps``                  | ``ppo.total_steps``                                   |
| ``num_evals``                      | ``eval.every_steps = num_timesteps / (num_evals - 1)`` |
|                                    | (Brax evaluates at step 0 too)                        |
| ``num_eval_envs`` (Brax: 128)      | ``eval.n_envs``                                       |
| ``randomization_fn`` (Playground's | ``randomize=True`` where Playground has a randomizer  |
| ``get_domain_randomizer(name)``)   | (``catalogue.RANDOMIZED_ENVS``): each env steps its   |
|                                    | own model variant (``nnx_ppo.envs.randomization``)    |

Not mapped, and listed in each preset's ``unmapped``: ``action_repeat`` other than 1 (the
library has no action repeat), ``num_resets_per_eval`` (the trainer resets each finished
env itself), and these Brax behaviours: GAE runs over the whole rollout instead of per
``unroll_length`` segment, minibatches group whole envs instead of shuffled segments, and
evaluation is deterministic (Brax's default ``deterministic_eval=False`` samples). Any field
this table does not know is listed too. For a stateless network, setting
``ppo.minibatch_segment_length`` to ``unroll_length`` restores Brax's shuffled segments and
its GAE per segment (not the default: on FingerSpin it learned the same, ``bench/RESULTS.md``).

The CPU variant (``cpu=True``) divides ``num_envs`` and ``num_minibatches`` by the same
factor (to about ``CPU_N_ENVS`` envs): the samples per minibatch, the epochs, and so the
gradient steps per env step stay those of the GPU variant.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nnx_ppo import catalogue
from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig

CPU_N_ENVS = 256
"""About how many envs the CPU variant runs."""
CPU_EVAL_ENVS = 64
"""At most this many evaluation episodes in the CPU variant."""

BRAX_DEFAULTS: dict[str, Any] = {
    "clipping_epsilon": 0.3,
    "max_grad_norm": None,
    "num_eval_envs": 128,
    "action_repeat": 1,
    "num_evals": 1,
    "normalize_observations": False,
}
"""``brax.training.agents.ppo.train`` defaults (0.14.2) for fields a config may omit."""
BRAX_POLICY_SIZES = (32, 32, 32, 32)
BRAX_VALUE_SIZES = (256, 256, 256, 256, 256)

_KNOWN = {
    "num_envs",
    "unroll_length",
    "batch_size",
    "num_minibatches",
    "num_updates_per_batch",
    "discounting",
    "learning_rate",
    "entropy_cost",
    "reward_scaling",
    "clipping_epsilon",
    "max_grad_norm",
    "network_factory",
    "normalize_observations",
    "episode_length",
    "num_timesteps",
    "num_evals",
    "num_eval_envs",
    "action_repeat",
    "num_resets_per_eval",
}
_KNOWN_NETWORK = {
    "policy_hidden_layer_sizes",
    "value_hidden_layer_sizes",
    "policy_obs_key",
    "value_obs_key",
}
_ALWAYS_UNMAPPED = (
    "GAE: over the whole rollout, where Brax restarts it at each unroll_length segment",
    "minibatches: whole envs (sequences kept for recurrent networks), where Brax shuffles "
    "unroll_length segments (ppo.minibatch_segment_length = unroll_length does both, for "
    "stateless networks)",
    "evaluation: deterministic (tanh of the mean), where Brax's default samples",
)

_PARAM_MODULES = {
    "dm_control_suite": "dm_control_suite_params",
    "locomotion": "locomotion_params",
    "manipulation": "manipulation_params",
}


def brax_ppo_params(name: str) -> dict[str, Any]:
    """Playground's published Brax PPO parameters for ``name``, as a plain dict.

    Raises:
        ValueError: if ``name`` is not a MuJoCo Playground env.
    """
    family = catalogue.PLAYGROUND_FAMILIES.get(name)
    if family is None:
        raise ValueError(f"{name!r} is not a MuJoCo Playground env")
    import importlib

    module = importlib.import_module(f"mujoco_playground.config.{_PARAM_MODULES[family]}")
    return dict(module.brax_ppo_config(name).to_dict())


def from_brax_params(name: str, params: Mapping[str, Any], *, cpu: bool) -> Any:
    """The preset for env ``name`` from Brax PPO ``params`` (see the module's table).

    Args:
        name: The env.
        params: ``brax_ppo_config(name)`` as a dict.
        cpu: The CPU variant (fewer envs, same gradient steps per sample) or the GPU one.

    Returns:
        A ``nnx_ppo.presets.Preset`` whose ``unmapped`` lists what was not carried over.
    """
    from nnx_ppo.presets import Preset  # the package imports this module lazily

    p = {**BRAX_DEFAULTS, **params}
    unmapped = list(_ALWAYS_UNMAPPED)
    unmapped += [f"{key}={p[key]!r} (unknown field)" for key in sorted(set(p) - _KNOWN)]
    factory_extra = set(p.get("network_factory") or {}) - _KNOWN_NETWORK
    unmapped += [f"network_factory.{key} (unknown field)" for key in sorted(factory_extra)]
    if p["action_repeat"] != 1:
        unmapped.append(f"action_repeat={p['action_repeat']} (no action repeat in nnx-ppo)")
    if "num_resets_per_eval" in p:
        unmapped.append(
            f"num_resets_per_eval={p['num_resets_per_eval']} (each finished env is reset)"
        )

    n_envs, n_minibatches = int(p["num_envs"]), int(p["num_minibatches"])
    segments_per_env, rest = divmod(int(p["batch_size"]) * n_minibatches, n_envs)
    if rest or segments_per_env == 0:
        unmapped.append(
            f"batch_size={p['batch_size']} (batch_size * num_minibatches is not a multiple of "
            "num_envs: one unroll per env per iteration)"
        )
        segments_per_env = 1
    rollout_length = int(p["unroll_length"]) * segments_per_env
    if cpu:
        factor = cpu_factor(n_envs, n_minibatches)
        n_envs, n_minibatches = n_envs // factor, n_minibatches // factor

    total_steps = int(p["num_timesteps"])
    eval_every = max(1, math.ceil(total_steps / max(int(p["num_evals"]) - 1, 1)))
    eval_envs = int(p["num_eval_envs"])
    episode_length = int(p["episode_length"])
    ppo = PPOConfig(
        n_envs=n_envs,
        rollout_length=rollout_length,
        total_steps=total_steps,
        gae_lambda=0.95,
        discounting_factor=float(p["discounting"]),
        clip_range=float(p["clipping_epsilon"]),
        learning_rate=float(p["learning_rate"]),
        normalize_advantages=True,
        n_epochs=int(p["num_updates_per_batch"]),
        n_minibatches=n_minibatches,
        critic_loss_weight=0.5,
        gradient_clipping=None if p["max_grad_norm"] is None else float(p["max_grad_norm"]),
        reward_scaling=float(p.get("reward_scaling", 1.0)),
    )
    config = TrainConfig(
        ppo=ppo,
        eval=EvalConfig(
            every_steps=eval_every,
            n_envs=min(eval_envs, CPU_EVAL_ENVS) if cpu else eval_envs,
            max_episode_length=episode_length,
        ),
        checkpoint_every_steps=eval_every,
    )
    return Preset(
        env=name,
        env_overrides={"episode_length": episode_length},
        network=_network(p),
        config=config,
        source="playground",
        variant="cpu" if cpu else "gpu",
        unmapped=tuple(unmapped),
        randomize=name in catalogue.RANDOMIZED_ENVS,
    )


def cpu_factor(n_envs: int, n_minibatches: int) -> int:
    """The largest factor ``<= n_envs / CPU_N_ENVS`` dividing both counts (at least 1)."""
    factor = max(1, n_envs // CPU_N_ENVS)
    while factor > 1 and (n_envs % factor or n_minibatches % factor):
        factor -= 1
    return factor


def _network(p: Mapping[str, Any]) -> dict[str, Any]:
    factory = dict(p.get("network_factory") or {})
    network: dict[str, Any] = {
        "kind": "mlp",
        "actor_hidden_sizes": tuple(factory.get("policy_hidden_layer_sizes", BRAX_POLICY_SIZES)),
        "critic_hidden_sizes": tuple(factory.get("value_hidden_layer_sizes", BRAX_VALUE_SIZES)),
        "activation": "swish",
        "normalize_obs": bool(p["normalize_observations"]),
        "entropy_weight": float(p["entropy_cost"]),
    }
    if "policy_obs_key" in factory or "value_obs_key" in factory:
        network["policy_obs_key"] = str(factory.get("policy_obs_key", "state"))
        network["value_obs_key"] = str(factory.get("value_obs_key", "state"))
    return network
