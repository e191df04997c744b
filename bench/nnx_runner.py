"""nnx-ppo on a MuJoCo Playground env: our side of the benchmark against Brax PPO.

Run one configuration and print one JSON line::

    python -m bench.nnx_runner --preset speed
    python -m bench.nnx_runner --preset speed --json '{"total_steps": 307200, "num_evals": 3}'

It takes the same settings dicts as :func:`bench.brax_runner.run_brax_ppo` (validated by
:class:`bench.brax_config.BraxPPOSettings`) and maps them onto ``train_ppo`` so that both
libraries do the same work per update:

* ``env``, ``physics_impl``, ``episode_length`` -> ``envs.load(env, {"impl": physics_impl,
  "episode_length": episode_length})`` (an ``EpisodeWrapper`` with that time limit).
* ``n_envs``, ``rollout_length``, ``n_minibatches``, ``n_epochs``, ``learning_rate``,
  ``gae_lambda``, ``total_steps`` -> the ``PPOConfig`` fields of those names;
  ``discounting`` -> ``discounting_factor``; ``clipping_epsilon`` -> ``clip_range``;
  ``max_grad_norm`` -> ``gradient_clipping``; ``vf_loss_coefficient`` ->
  ``critic_loss_weight`` (both libraries' value loss is ``0.5 * weight * mean(err**2)``).
* ``policy_hidden`` -> ``actor_hidden_sizes``, ``value_hidden`` -> ``critic_hidden_sizes``,
  ``normalize_observations`` -> ``normalize_obs``, ``entropy_cost`` -> ``entropy_weight`` of
  ``make_mlp_actor_critic`` (swish MLPs and a tanh-normal policy, as Brax's).
* ``seed`` -> ``TrainConfig.seed`` and the network's ``nnx.Rngs(seed)``.
* ``num_evals`` -> ``eval.every_steps = total_steps // (num_evals - 1)``; ``num_eval_envs`` ->
  ``eval.n_envs``; ``episode_length`` -> ``eval.max_episode_length``. We evaluate (with the
  deterministic policy, as Brax) each time training passes a multiple of ``every_steps`` and
  at the end, but not at step 0.
* ``batch_size``: our minibatches split the env axis of one rollout, so an update always uses
  exactly one rollout of ``n_envs x rollout_length`` steps. Brax's update takes ``k =
  batch_size * n_minibatches / n_envs`` consecutive rollouts of ``rollout_length`` from
  every env; ours then takes one rollout of ``k * rollout_length`` steps (the mapping of
  ``nnx_ppo.presets.playground``): the same env steps per update and per minibatch
  (``batch_size`` trajectories of ``rollout_length`` there, ``n_envs / n_minibatches`` envs
  of ``k * rollout_length`` here), the same Adam steps.
* ``precision`` (nnx-ppo only; ``float32`` when absent) -> ``make_mlp_actor_critic``'s
  ``precision`` (``bfloat16``: bf16 matrix products, f32 accumulation; ``bench.precision``).
* ``network`` (nnx-ppo only; ``"composed"`` when absent): which network trains
  (``NETWORKS``): ``"composed"`` is ``make_mlp_actor_critic``'s, built from the toolkit's
  parts (``composed.compose_mlp_actor_critic``); ``"fixed"`` the same actor-critic as the
  ``PPONetwork`` the factory built before (``legacy.ppo_network_mlp_actor_critic``, equal
  parameters for equal seeds), ``"graph6"`` the population graph ``SIX_POPULATIONS``
  (the hidden sizes are then ignored; ``bench.network_parts``); ``"lstm"`` and
  ``"lstm_fixed"`` the same two builds of ``make_lstm_actor_critic`` (an LSTM of 64 before
  each side's hidden layers).
* ``minibatches`` (nnx-ppo only; ``"envs"`` when absent): ``"segments"`` cuts the rollout
  into ``rollout_length``-step segments and shuffles those into the minibatches, as Brax
  does (``PPOConfig.minibatch_segment_length``; GAE then restarts at each segment, as
  Brax's); ``"envs"`` keeps whole envs, as described under ``batch_size``.
* ``env_step_chunk`` (nnx-ppo only; None when absent) -> ``PPOConfig.env_step_chunk``: the
  training envs step that many at a time (``nnx_ppo.envs.chunked``).
* ``reward_scaling`` -> ``PPOConfig.reward_scaling`` (both libraries multiply rewards inside
  the loss only). ``num_resets_per_eval`` must be 0 (we never reset
  all envs): other values are rejected rather than silently ignored, so "equal settings"
  stay equal.

Timing: ``train_ppo`` runs up to 32 PPO iterations per jitted call and, with
``LoggingLevel.THROUGHPUT``, reports that call's env steps/s (its wall time, evaluation
excluded) in the last metrics of each burst of ``log_fn`` calls. :func:`summarize_timing`
turns those into steady-state throughput and compile time.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import threading
import time
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from flax import nnx

from bench.brax_config import BraxPPOSettings
from bench.jax_setup import enable_compilation_cache
from bench.runs import (
    count_files,
    peak_rss_mb,
    run_runner_subprocess,
    settings_from_cli,
    startup_seconds,
)
from nnx_ppo import envs
from nnx_ppo.algorithms import config as C
from nnx_ppo.algorithms import ppo
from nnx_ppo.algorithms.compile_ahead import THREAD_NAME
from nnx_ppo.networks import factories, legacy
from nnx_ppo.networks.normalizer import flat_size

NNX_ONLY_KEYS = (
    "anneal_learning_rate",
    "devices",
    "precision",
    "network",
    "minibatches",
    "env_step_chunk",
)
"""Settings only nnx-ppo understands (Brax's runner rejects them)."""
SPS_KEY = "throughput/env_steps_per_second"
"""The metric ``train_ppo`` adds to the last iteration of each jitted call."""
EVAL_KEY = "eval/episode_reward"
"""Mean deterministic-policy episode return, present where an evaluation ran."""
LOSS_TRACE_ITERATIONS = 20
"""How many iterations' losses a result keeps (``loss_trace``), to compare two networks."""


@dataclasses.dataclass(frozen=True)
class _Call:
    """One jitted training call, as seen from ``log_fn``."""

    end_step: int
    """Env steps taken after the call."""
    env_steps: int
    """Env steps the call took."""
    seconds: float
    """Wall time of the call (``train_ppo``'s timing: device work and metric transfer)."""
    logged_at: float
    """``time.perf_counter()`` when ``log_fn`` saw the call's last iteration (after its eval)."""
    eval_reward: float | None
    """The evaluation after the call, if one ran."""
    beside_compile: bool = False
    """A background compile (the evaluator's, after the chunk's) ran at the call's start or
    end: the call shared the CPU with it, so its time is not the steady rate's."""


@dataclasses.dataclass
class _HostLog:
    """Host-side record of ``log_fn`` calls (``log_fn`` runs in the host loop, outside jit)."""

    t0: float
    """``time.perf_counter()`` before the networks were built."""
    calls: list[_Call] = dataclasses.field(default_factory=list)
    losses: list[dict[str, float]] = dataclasses.field(default_factory=list)
    """The ``losses/*`` metrics of the first ``LOSS_TRACE_ITERATIONS`` iterations."""
    compiling: bool = False
    """Whether a background compile ran when ``log_fn`` last saw a call end."""

    def on_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        if len(self.losses) < LOSS_TRACE_ITERATIONS:
            self.losses.append({k: float(v) for k, v in metrics.items() if k.startswith("losses/")})
        if SPS_KEY not in metrics:  # not the last iteration of a jitted call
            return
        previous = self.calls[-1].end_step if self.calls else 0
        env_steps = step - previous
        compiling = any(t.name == THREAD_NAME and t.is_alive() for t in threading.enumerate())
        beside_compile, self.compiling = compiling or self.compiling, compiling
        self.calls.append(
            _Call(
                end_step=step,
                env_steps=env_steps,
                seconds=env_steps / metrics[SPS_KEY],
                logged_at=time.perf_counter(),
                eval_reward=float(metrics[EVAL_KEY]) if EVAL_KEY in metrics else None,
                beside_compile=beside_compile,
            )
        )

    def curve(self) -> list[dict[str, float]]:
        """One point per evaluation: step, wall and cumulative training seconds, reward."""
        points, train_seconds = [], 0.0
        for call in self.calls:
            train_seconds += call.seconds
            if call.eval_reward is not None:
                points.append(
                    {
                        "step": call.end_step,
                        "wall_seconds": call.logged_at - self.t0,
                        "eval_reward": call.eval_reward,
                        "train_seconds": train_seconds,
                    }
                )
        return points

    def host_gaps(self) -> list[float]:
        """Per call: wall time between the previous ``log_fn`` burst and this one, minus the
        call itself, i.e. host work (evaluation, metric conversion; setup before call 0)."""
        starts = [self.t0, *(c.logged_at for c in self.calls[:-1])]
        return [c.logged_at - s - c.seconds for c, s in zip(self.calls, starts, strict=True)]


def summarize_timing(
    env_steps: Sequence[int], seconds: Sequence[float], steady: Sequence[bool] | None = None
) -> dict[str, float | list[float]]:
    """Steady-state throughput and the training call's compile time.

    The first jitted call traces and compiles the training chunk (one compilation serves
    every later call, whatever its iteration count); later calls only execute, some beside
    the evaluator's background compile (``steady`` False: left out where any call is left).
    So, over the steady calls after the first:

    * ``env_steps_per_second = sum(env_steps[1:]) / sum(seconds[1:])``
    * ``train_compile_seconds = seconds[0] - env_steps[0] / env_steps_per_second``: the first
      call's time minus what its iterations take at the steady rate.

    Args:
        env_steps: Env steps taken by each jitted call, ``[n_calls]``.
        seconds: Wall time of each call, ``[n_calls]``.

    Returns:
        The two quantities above and ``call_sps`` (per-call env steps/s; the first includes
        compilation).

    Raises:
        ValueError: With fewer than two calls or mismatched lengths.
    """
    if len(env_steps) < 2 or len(env_steps) != len(seconds):
        raise ValueError(
            f"need >= 2 jitted calls with matching times, got env_steps={list(env_steps)} "
            f"seconds={list(seconds)}"
        )
    kept = [i for i in range(1, len(env_steps)) if steady is None or steady[i]]
    kept = kept or list(range(1, len(env_steps)))
    sps = sum(env_steps[i] for i in kept) / sum(seconds[i] for i in kept)
    return {
        "env_steps_per_second": sps,
        "train_compile_seconds": seconds[0] - env_steps[0] / sps,
        "call_sps": [n / s for n, s in zip(env_steps, seconds, strict=True)],
    }


def nnx_settings(settings: Mapping[str, Any]) -> BraxPPOSettings:
    """Validates a settings dict for nnx-ppo: Brax's checks plus what we cannot honour.

    Raises:
        ValueError: On invalid settings (see :class:`BraxPPOSettings`), or settings that
            nnx-ppo has no equivalent for (see the module docstring).
    """
    brax_keys = {k: v for k, v in settings.items() if k not in NNX_ONLY_KEYS}
    cfg = BraxPPOSettings.from_mapping(brax_keys)
    if cfg.n_envs % cfg.n_minibatches:
        raise ValueError(
            f"n_envs ({cfg.n_envs}) must be divisible by n_minibatches ({cfg.n_minibatches}): "
            "nnx-ppo's minibatches split one rollout's env axis"
        )
    if cfg.num_resets_per_eval != 0:
        raise ValueError(
            f"num_resets_per_eval ({cfg.num_resets_per_eval}) must be 0: nnx-ppo never resets "
            "all envs during training"
        )
    return cfg


def train_config(
    cfg: BraxPPOSettings,
    anneal_learning_rate: bool = False,
    devices: int | None = None,
    minibatches: str = "envs",
) -> C.TrainConfig:
    """The ``TrainConfig`` equal to ``cfg`` (see the module docstring for the mapping).

    ``anneal_learning_rate`` (an nnx-ppo-only setting) decays the learning rate linearly to
    zero at ``total_steps``; ``devices`` (nnx-ppo only) trains data-parallel on that many
    local devices; ``minibatches`` (nnx-ppo only) ``"segments"`` shuffles
    ``rollout_length``-step segments into the minibatches, as Brax does
    (``PPOConfig.minibatch_segment_length``), ``"envs"`` keeps whole envs.
    """
    if minibatches not in ("envs", "segments"):
        raise ValueError(f"minibatches must be 'envs' or 'segments', got {minibatches!r}")
    rollouts_per_update = cfg.resolved_batch_size * cfg.n_minibatches // cfg.n_envs
    ppo = C.PPOConfig(
        n_envs=cfg.n_envs,
        rollout_length=cfg.rollout_length * rollouts_per_update,
        n_minibatches=cfg.n_minibatches,
        n_epochs=cfg.n_epochs,
        total_steps=cfg.total_steps,
        learning_rate=cfg.learning_rate,
        discounting_factor=cfg.discounting,
        gae_lambda=cfg.gae_lambda,
        clip_range=cfg.clipping_epsilon,
        critic_loss_weight=cfg.vf_loss_coefficient,
        gradient_clipping=cfg.max_grad_norm,
        reward_scaling=cfg.reward_scaling,
        logging_level=C.LoggingLevel.LOSSES | C.LoggingLevel.THROUGHPUT,
        anneal_learning_rate=anneal_learning_rate,
        minibatch_segment_length=cfg.rollout_length if minibatches == "segments" else None,
    )
    evaluation = C.EvalConfig(
        every_steps=cfg.total_steps // (cfg.num_evals - 1),
        n_envs=cfg.num_eval_envs,
        max_episode_length=cfg.episode_length,
    )
    return C.TrainConfig(ppo=ppo, eval=evaluation, seed=cfg.seed, devices=devices)


SIX_POPULATIONS: Mapping[str, Any] = MappingProxyType(
    {
        # An array observation enters as "obs" (the sensors' size is set to its features);
        # two populations excite each other through
        # delay-1 edges both ways and feed a third, which feeds one of them back two steps
        # later and drives the action (2 x action_size parameters) and the value.
        "populations": (
            {"name": "sensors", "size": 0, "input_from": "obs", "activation": "swish"},
            {"name": "left", "size": 64, "activation": "tanh"},
            {"name": "right", "size": 64, "activation": "tanh"},
            {"name": "motor_pool", "size": 64, "activation": "swish"},
            {"name": "motor", "size": 2, "output_to": "motor"},
            {"name": "critic", "size": 1, "output_to": "value"},
        ),
        "connections": (
            {"src": "sensors", "dst": "left"},
            {"src": "sensors", "dst": "right"},
            {"src": "left", "dst": "right", "delay": 1, "reciprocal": True},
            {"src": "left", "dst": "motor_pool"},
            {"src": "right", "dst": "motor_pool"},
            {"src": "motor_pool", "dst": "left", "delay": 2},
            {"src": "motor_pool", "dst": "motor"},
            {"src": "motor_pool", "dst": "critic"},
            {"src": "sensors", "dst": "critic"},
        ),
        "actions": {"motor": "motor"},
        "value": "value",
    }
)
"""The 6-population graph of ``network: "graph6"`` (the motor's size is set to 2 x the env's
action size)."""


def _graph6(cfg: BraxPPOSettings, obs_size: Any, action_size: Any, **kwargs: Any) -> nnx.Module:
    spec = json.loads(json.dumps(dict(SIX_POPULATIONS)))
    spec["populations"][0]["size"] = flat_size(obs_size)
    spec["populations"][4]["size"] = 2 * action_size
    return factories.make_graph_network(
        obs_size,
        action_size,
        normalize_obs=cfg.normalize_observations,
        entropy_weight=cfg.entropy_cost,
        **kwargs,
        **spec,
    )


def _mlp(factory: Any) -> Any:
    def make(cfg: BraxPPOSettings, obs_size: Any, action_size: Any, **kwargs: Any) -> Any:
        return factory(
            obs_size,
            action_size,
            actor_hidden_sizes=cfg.policy_hidden,
            critic_hidden_sizes=cfg.value_hidden,
            normalize_obs=cfg.normalize_observations,
            entropy_weight=cfg.entropy_cost,
            **kwargs,
        )

    return make


def _lstm(factory: Any) -> Any:
    def make(cfg: BraxPPOSettings, obs_size: Any, action_size: Any, **kwargs: Any) -> Any:
        return factory(
            obs_size,
            action_size,
            lstm_size=64,
            actor_hidden_sizes=cfg.policy_hidden,
            critic_hidden_sizes=cfg.value_hidden,
            normalize_obs=cfg.normalize_observations,
            entropy_weight=cfg.entropy_cost,
            **kwargs,
        )

    return make


NETWORKS: Mapping[str, Any] = MappingProxyType(
    {
        "fixed": _mlp(legacy.ppo_network_mlp_actor_critic),
        "composed": _mlp(factories.make_mlp_actor_critic),
        "graph6": _graph6,
        "lstm_fixed": _lstm(legacy.ppo_network_lstm_actor_critic),
        "lstm": _lstm(factories.make_lstm_actor_critic),
    }
)
"""The builders of the ``network`` setting's values."""


def settings_train_config(settings: Mapping[str, Any], cfg: BraxPPOSettings) -> C.TrainConfig:
    """:func:`train_config` of ``cfg`` with ``settings``' nnx-only keys (learning-rate
    annealing, devices, minibatches, env_step_chunk)."""
    config = train_config(
        cfg,
        bool(settings.get("anneal_learning_rate", False)),
        settings.get("devices"),
        settings.get("minibatches", "envs"),
    )
    ppo = dataclasses.replace(config.ppo, env_step_chunk=settings.get("env_step_chunk"))
    return dataclasses.replace(config, ppo=ppo)


def settings_networks(settings: Mapping[str, Any], cfg: BraxPPOSettings, env: Any) -> nnx.Module:
    """:func:`make_networks` of ``cfg`` with ``settings``' nnx-only ``precision`` and
    ``network``."""
    return make_networks(
        cfg, env, settings.get("precision", "float32"), settings.get("network", "composed")
    )


def make_networks(
    cfg: BraxPPOSettings, env: Any, precision: str = "float32", network: str = "composed"
) -> nnx.Module:
    """The actor-critic of ``cfg`` for ``env`` (see the module docstring for the mapping);
    ``precision`` and ``network`` are the nnx-only settings of those names."""
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {sorted(NETWORKS)}, got {network!r}")
    return NETWORKS[network](
        cfg,
        env.observation_size,
        env.action_size,
        rngs=nnx.Rngs(cfg.seed),
        precision=precision,
    )


def run_nnx_ppo(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Trains nnx-ppo on a Playground env and reports throughput, compile time and learning.

    Run each configuration in a fresh process (the CLI, or :func:`run_nnx_ppo_subprocess`),
    for the same reasons as :func:`bench.brax_runner.run_brax_ppo`; the persistent
    compilation cache is on (``NNX_PPO_BENCH_JAX_CACHE`` at an empty directory for a cold
    compile).

    Args:
        settings: Keys of :class:`BraxPPOSettings` (e.g. ``bench.settings.SPEED``).

    Returns:
        A JSON-serialisable dict; keys shared with ``run_brax_ppo`` mean the same (seconds):

        * ``library``: ``"nnx_ppo"``; ``settings``: as ``run_brax_ppo``; ``train_config``: the
          ``TrainConfig`` they became.
        * ``env_steps_per_second``: steady-state training throughput, compile and eval
          excluded: env steps / wall time summed over every jitted call after the first,
          less those a background compile ran beside (``calls_beside_compile``: the
          evaluator compiles after the chunk, while the first calls run).
        * ``train_compile_seconds``: the first call's time minus its env steps at the steady
          rate (compiling the training chunk; Brax's key of the same name is its epoch's).
        * ``compile_seconds``: start-up overhead, defined as for Brax
          (:func:`bench.runs.startup_seconds`): from ``t0`` (before building the networks) to
          the end of the first evaluation, minus the training and the evaluation in it at
          their steady speed: network and optimizer init, env reset, and compiling the
          training chunk and the evaluator.
        * ``setup_seconds``: ``t0`` to the first call's end minus the call (init, env reset,
          and the first evaluation if it fell after the first call).
        * ``first_metric_seconds``: the cold start a user waits through: ``t0`` to the first
          training metric ``log_fn`` receives (as Brax's key of the same name).
        * ``eval_seconds``: steady time of one evaluation: the median, over the evaluations
          after the first (which compiles), of the host time around the evaluation.
        * ``total_seconds``: wall time from ``t0`` to the end of ``train_ppo``.
        * ``total_steps``: env steps trained (whole iterations, so up to one over).
        * ``steps_per_update``: as Brax's; ``call_sps``: per jitted call.
        * ``peak_rss_mb``, ``compilation_cache_new_entries``: as ``run_brax_ppo``.
        * ``curve``: ``[{"step", "wall_seconds", "eval_reward", "train_seconds"}]``, one per
          evaluation (none at step 0); ``wall_seconds`` counts from ``t0``, including
          compile and evaluation; ``train_seconds`` sums the jitted calls so far.
        * ``final_eval_reward``: the last curve point's ``eval_reward``.
        * ``loss_trace``: the ``losses/*`` metrics of the first ``LOSS_TRACE_ITERATIONS``
          iterations, one dict each.
    """
    cfg = nnx_settings(settings)
    config = settings_train_config(settings, cfg)
    cache_dir = enable_compilation_cache()
    cache_files_before = count_files(cache_dir)
    env = envs.load(cfg.env, {"impl": cfg.physics_impl, "episode_length": cfg.episode_length})
    log = _HostLog(t0=time.perf_counter())
    networks = settings_networks(settings, cfg, env)
    result = ppo.train_ppo(env, networks, config, log_fn=log.on_metrics)
    total_seconds = time.perf_counter() - log.t0
    out = _result(cfg, log, total_seconds, result.total_steps)
    out["train_config"] = json.loads(json.dumps(dataclasses.asdict(config), default=str))
    out["compilation_cache_new_entries"] = count_files(cache_dir) - cache_files_before
    return out


def _result(
    cfg: BraxPPOSettings, log: _HostLog, total_seconds: float, total_steps: int
) -> dict[str, Any]:
    """Assembles ``run_nnx_ppo``'s result dict from the host log."""
    calls = log.calls
    timing = summarize_timing(
        [c.env_steps for c in calls],
        [c.seconds for c in calls],
        [not c.beside_compile for c in calls],
    )
    gaps = log.host_gaps()
    evaluated = [i for i, c in enumerate(calls) if c.eval_reward is not None]
    if len(evaluated) < 2:
        raise RuntimeError(f"need >= 2 evaluations for a steady eval time, got {len(evaluated)}")
    eval_seconds = statistics.median(gaps[i] for i in evaluated[1:])
    sps = timing["env_steps_per_second"]
    resolved = dataclasses.asdict(cfg) | {"batch_size": cfg.resolved_batch_size}
    curve = log.curve()
    return {
        "library": "nnx_ppo",
        "settings": json.loads(json.dumps(resolved)),
        "env_steps_per_second": sps,
        "compile_seconds": startup_seconds(curve[0], 1, sps, eval_seconds),
        "train_compile_seconds": timing["train_compile_seconds"],
        "setup_seconds": gaps[0],
        "first_metric_seconds": calls[0].logged_at - log.t0,
        "eval_seconds": eval_seconds,
        "total_seconds": total_seconds,
        "total_steps": int(total_steps),
        "steps_per_update": cfg.steps_per_update,
        "call_sps": timing["call_sps"],
        "calls_beside_compile": [i for i, c in enumerate(calls) if c.beside_compile],
        "peak_rss_mb": peak_rss_mb(),
        "curve": curve,
        "final_eval_reward": curve[-1]["eval_reward"],
        "loss_trace": log.losses,
    }


def run_nnx_ppo_subprocess(
    settings: Mapping[str, Any],
    timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Runs :func:`run_nnx_ppo` in a fresh Python process and returns its result dict.

    ``env`` adds environment variables for the child (e.g. an empty
    ``NNX_PPO_BENCH_JAX_CACHE`` for a cold compile). See
    :func:`bench.runs.run_runner_subprocess`.

    Raises:
        subprocess.CalledProcessError: If the child fails.
        subprocess.TimeoutExpired: After ``timeout_s``.
    """
    return run_runner_subprocess("bench.nnx_runner", settings, env=env, timeout_s=timeout_s)


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: run one configuration and print the result as one JSON line on stdout."""
    result = run_nnx_ppo(settings_from_cli(argv, __doc__.split("\n\n")[0]))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
