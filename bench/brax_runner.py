"""Brax PPO on a MuJoCo Playground env: the reference side of the nnx-ppo benchmark.

Run one configuration and print one JSON line::

    python -m bench.brax_runner --preset speed
    python -m bench.brax_runner --json '{"env": "CartpoleBalance", "n_envs": 256, ...}'
    python -m bench.brax_runner --preset speed --json '{"total_steps": 300000, "num_evals": 3}'

How the benchmark settings map onto Brax 0.14.2 ``ppo.train`` (read from its source):

* ``n_envs`` -> ``num_envs``: environments stepped in parallel (vmapped, one device here).
* ``rollout_length`` -> ``unroll_length``: steps each env takes per rollout.
* ``batch_size`` -> ``batch_size``, ``n_minibatches`` -> ``num_minibatches``. One Brax
  *training step* (one PPO update) collects ``batch_size * num_minibatches / num_envs``
  consecutive rollouts of ``unroll_length`` steps from all ``num_envs`` envs, i.e.
  ``batch_size * num_minibatches`` trajectories of ``unroll_length`` transitions, and
  ``batch_size * num_minibatches * unroll_length * action_repeat`` env steps. ``batch_size``
  therefore counts *trajectories* per minibatch, not transitions; it defaults here to
  ``n_envs // n_minibatches`` (one rollout per update, as in nnx-ppo).
* ``n_epochs`` -> ``num_updates_per_batch``: passes over the update's trajectories; each pass
  shuffles the trajectories (whole ``[unroll_length]`` segments, never single steps) and takes
  one Adam step per minibatch. GAE is recomputed inside the loss for every minibatch with the
  *current* value parameters, bootstrapping from the value of each segment's last
  ``next_observation``.
* An env step is one transition of one env; ``action_repeat`` is 1, so env steps equal
  physics-control steps. ``total_steps`` -> ``num_timesteps``, but Brax rounds it *up*: it runs
  ``num_evals - 1`` epochs (Brax's name for the block of updates between two evals), each of
  ``ceil(num_timesteps / ((num_evals - 1) * steps_per_update))`` updates, so the run may
  exceed ``total_steps``; the result's ``total_steps`` is what actually ran.
* Observations are normalised with running Welford statistics updated once per update, before
  the SGD passes. ``reward_scaling`` multiplies rewards inside the loss only (eval rewards are
  unscaled). The policy is Brax's tanh-squashed Gaussian with swish MLPs; evaluation runs
  ``num_eval_envs`` fresh episodes of ``episode_length`` steps with the deterministic (mode)
  policy before training (step 0) and after every epoch.

Brax 0.14.2 calls ``jax.device_put_replicated``, which JAX 0.10 removed;
:func:`install_jax_shims` puts back an equivalent before training.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

from bench.brax_config import BraxPPOSettings
from bench.jax_setup import enable_compilation_cache, install_jax_shims
from bench.runs import (
    count_files,
    peak_rss_mb,
    run_runner_subprocess,
    settings_from_cli,
    startup_seconds,
)


@dataclasses.dataclass
class _HostLog:
    """Host-side record of Brax's callbacks (Brax's progress_fn runs outside jit)."""

    t0: float
    """``time.perf_counter()`` just before ``ppo.train`` was called."""
    first_epoch_start: float | None = None
    """When Brax handed over the step-0 params, i.e. just before the first epoch."""
    evals: list[dict[str, float]] = dataclasses.field(default_factory=list)
    """One entry per progress callback: step, wall time, eval reward, training walltime."""

    def on_policy_params(self, step: int, *_: Any) -> None:
        if step == 0 and self.first_epoch_start is None:
            self.first_epoch_start = time.perf_counter()

    def on_progress(self, step: int, metrics: Mapping[str, Any]) -> None:
        self.evals.append(
            {
                "step": int(step),
                "wall_seconds": time.perf_counter() - self.t0,
                "eval_reward": float(metrics["eval/episode_reward"]),
                # Cumulative seconds Brax spent inside training epochs (absent at step 0).
                "train_seconds": float(metrics.get("training/walltime", 0.0)),
                "eval_seconds": float(metrics["eval/epoch_eval_time"]),
            }
        )


def summarize_timing(
    steps: Sequence[int], train_walltimes: Sequence[float]
) -> dict[str, float | list[float]]:
    """Steady-state throughput and epoch compile time from Brax's per-epoch training walltime.

    Brax times each epoch around the pmapped call with ``block_until_ready`` and reports the
    running total as ``training/walltime``; evals and host-side work are outside it. The first
    epoch's time includes tracing and compiling the epoch; later epochs are pure execution and
    all epochs hold the same number of updates. So we average over every epoch after the first
    with walltime differences, rather than trusting one epoch's ``training/sps``:

    * ``env_steps_per_second = (steps[-1] - steps[0]) / (walltime[-1] - walltime[0])``
    * ``steady_epoch_seconds = (walltime[-1] - walltime[0]) / (n_epochs - 1)``
    * ``train_compile_seconds = walltime[0] - steady_epoch_seconds``. Brax reports no jit
      timing of its own, so this difference is the only handle on it.

    Args:
        steps: Cumulative env steps after each epoch (step 0 excluded), ``[n_epochs]``.
        train_walltimes: Brax's cumulative ``training/walltime`` after each epoch.

    Returns:
        The three quantities above and ``epoch_sps`` (per-epoch steps/s; the first includes
        compilation).

    Raises:
        ValueError: With fewer than two epochs or mismatched lengths.
    """
    if len(steps) < 2 or len(steps) != len(train_walltimes):
        raise ValueError(
            f"need >= 2 epochs with matching walltimes, got steps={list(steps)} "
            f"walltimes={list(train_walltimes)}"
        )
    steady_seconds = train_walltimes[-1] - train_walltimes[0]
    steady_epoch_seconds = steady_seconds / (len(steps) - 1)
    prev_steps = [0, *steps[:-1]]
    prev_times = [0.0, *train_walltimes[:-1]]
    return {
        "env_steps_per_second": (steps[-1] - steps[0]) / steady_seconds,
        "steady_epoch_seconds": steady_epoch_seconds,
        "train_compile_seconds": train_walltimes[0] - steady_epoch_seconds,
        "epoch_sps": [
            (s - s0) / (t - t0)
            for s, s0, t, t0 in zip(steps, prev_steps, train_walltimes, prev_times, strict=True)
        ],
    }


def brax_train_kwargs(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of Brax's ``ppo.train`` for ``settings`` (a
    ``BraxPPOSettings`` mapping), its callbacks aside; loads the env and installs the JAX
    shims Brax needs (``install_jax_shims``)."""
    cfg = BraxPPOSettings.from_mapping(settings)
    install_jax_shims()

    # Imported here so that the shims and the cache are in place whatever imported us first.
    from brax.training.agents.ppo import networks as ppo_networks
    from mujoco_playground import registry, wrapper

    env = registry.load(cfg.env, config_overrides={"impl": cfg.physics_impl})
    network_factory = functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=cfg.policy_hidden,
        value_hidden_layer_sizes=cfg.value_hidden,
    )
    return {
        "environment": env,
        "num_timesteps": cfg.total_steps,
        "wrap_env_fn": wrapper.wrap_for_brax_training,
        "num_envs": cfg.n_envs,
        "episode_length": cfg.episode_length,
        "action_repeat": 1,
        "learning_rate": cfg.learning_rate,
        "entropy_cost": cfg.entropy_cost,
        "discounting": cfg.discounting,
        "unroll_length": cfg.rollout_length,
        "batch_size": cfg.resolved_batch_size,
        "num_minibatches": cfg.n_minibatches,
        "num_updates_per_batch": cfg.n_epochs,
        "num_resets_per_eval": cfg.num_resets_per_eval,
        "normalize_observations": cfg.normalize_observations,
        "reward_scaling": cfg.reward_scaling,
        "clipping_epsilon": cfg.clipping_epsilon,
        "gae_lambda": cfg.gae_lambda,
        "max_grad_norm": cfg.max_grad_norm,
        "vf_loss_coefficient": cfg.vf_loss_coefficient,
        "network_factory": network_factory,
        "seed": cfg.seed,
        "num_evals": cfg.num_evals,
        "num_eval_envs": cfg.num_eval_envs,
        "deterministic_eval": True,
    }


def run_brax_ppo(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Trains Brax PPO on a Playground env and reports throughput, compile time and learning.

    Run each configuration in a fresh process (the CLI, or :func:`run_brax_ppo_subprocess`):
    ``peak_rss_mb`` is the process-lifetime peak, and an in-memory jit cache from an earlier
    call would hide compile time. The persistent on-disk cache is always on (see
    :mod:`bench.jax_setup`): when ``compilation_cache_new_entries`` is 0 everything was loaded
    from it, and ``compile_seconds`` measures tracing plus cache loading. For a cold compile,
    point ``NNX_PPO_BENCH_JAX_CACHE`` at an empty directory.

    Args:
        settings: Keys of :class:`BraxPPOSettings` (e.g. ``bench.settings.SPEED``).

    Returns:
        A JSON-serialisable dict with these stable keys (times in seconds):

        * ``library``: ``"brax"``.
        * ``settings``: the settings used, with ``batch_size`` filled in (lists for tuples).
        * ``env_steps_per_second``: steady-state training throughput, compile and eval excluded
          (mean over epochs 2..N of Brax's own epoch timing; see :func:`summarize_timing`).
        * ``compile_seconds``: start-up overhead (:func:`bench.runs.startup_seconds`): time
          from the ``ppo.train`` call to the end of the eval after the first epoch, minus the
          first epoch and the two evals at their steady speed. That leaves env/network init
          plus compiling env reset, the training epoch and the eval unroll (twice: Brax's
          step-0 eval and later ones differ in input weak types and shardings).
        * ``train_compile_seconds``: the training epoch's share of it (first epoch's time minus
          a steady epoch's).
        * ``setup_seconds``: from the ``ppo.train`` call to the start of the first epoch (env
          reset, network init, compiling and running the step-0 eval).
        * ``first_metric_seconds``: the cold start a user waits through: the ``ppo.train``
          call to the first training metric ``progress_fn`` receives (with the first epoch's
          eval; Brax reports training metrics only at the end of an epoch).
        * ``eval_seconds``: steady run time of one eval: the median of Brax's
          ``eval/epoch_eval_time`` over the evals after the first epoch's (which compiles).
        * ``total_seconds``: wall time of the whole ``ppo.train`` call.
        * ``total_steps``: env steps actually trained (Brax rounds ``total_steps`` up).
        * ``steps_per_update``, ``updates_per_epoch``: Brax's derived schedule.
        * ``epoch_sps``: per-epoch env steps/s (the first includes compilation).
        * ``peak_rss_mb``: peak RSS of this process, MiB.
        * ``compilation_cache_new_entries``: files this run added to the persistent cache.
        * ``curve``: ``[{"step", "wall_seconds", "eval_reward", "train_seconds"}]``, one per
          eval including step 0; ``wall_seconds`` counts from the ``ppo.train`` call and
          includes compile and eval time; ``train_seconds`` is Brax's cumulative time inside
          training epochs (no evals, no setup, but the first epoch's compile); ``eval_reward``
          is the mean deterministic-policy episode return.
        * ``final_eval_reward``: the last curve point's ``eval_reward``.
    """
    cfg = BraxPPOSettings.from_mapping(settings)
    cache_dir = enable_compilation_cache()
    cache_files_before = count_files(cache_dir)
    kwargs = brax_train_kwargs(settings)
    from brax.training.agents.ppo import train as ppo

    log = _HostLog(t0=time.perf_counter())
    ppo.train(**kwargs, progress_fn=log.on_progress, policy_params_fn=log.on_policy_params)
    total_seconds = time.perf_counter() - log.t0
    return _result(cfg, log, total_seconds, count_files(cache_dir) - cache_files_before)


def _result(
    cfg: BraxPPOSettings, log: _HostLog, total_seconds: float, new_cache_entries: int
) -> dict[str, Any]:
    """Assembles ``run_brax_ppo``'s result dict from the host log."""
    trained = [e for e in log.evals if e["step"] > 0]
    timing = summarize_timing(
        [int(e["step"]) for e in trained], [e["train_seconds"] for e in trained]
    )
    if log.first_epoch_start is None:
        raise RuntimeError("Brax never called policy_params_fn at step 0")
    setup_seconds = log.first_epoch_start - log.t0
    # The eval after the first epoch compiles the eval unroll again; later ones only run.
    eval_seconds = statistics.median(e["eval_seconds"] for e in trained[1:])
    train_compile = timing["train_compile_seconds"]
    sps = timing["env_steps_per_second"]
    resolved = dataclasses.asdict(cfg) | {"batch_size": cfg.resolved_batch_size}
    return {
        "library": "brax",
        "settings": json.loads(json.dumps(resolved)),
        "env_steps_per_second": sps,
        "compile_seconds": startup_seconds(trained[0], 2, sps, eval_seconds),
        "train_compile_seconds": train_compile,
        "setup_seconds": setup_seconds,
        "first_metric_seconds": trained[0]["wall_seconds"],
        "eval_seconds": eval_seconds,
        "total_seconds": total_seconds,
        "total_steps": int(trained[-1]["step"]),
        "steps_per_update": cfg.steps_per_update,
        "updates_per_epoch": cfg.updates_per_epoch,
        "epoch_sps": timing["epoch_sps"],
        "peak_rss_mb": peak_rss_mb(),
        "compilation_cache_new_entries": new_cache_entries,
        "curve": [
            {k: e[k] for k in ("step", "wall_seconds", "eval_reward", "train_seconds")}
            for e in log.evals
        ],
        "final_eval_reward": log.evals[-1]["eval_reward"],
    }


def run_brax_ppo_subprocess(
    settings: Mapping[str, Any],
    timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Runs :func:`run_brax_ppo` in a fresh Python process and returns its result dict.

    A fresh process gives a clean ``peak_rss_mb`` and no in-memory jit cache (the persistent
    on-disk cache still applies; pass ``env={CACHE_DIR_ENV: empty_dir}`` for a cold one).
    The child's stderr passes through. See :func:`bench.runs.run_runner_subprocess`.

    Raises:
        subprocess.CalledProcessError: If the child fails.
        subprocess.TimeoutExpired: After ``timeout_s``.
    """
    return run_runner_subprocess("bench.brax_runner", settings, env=env, timeout_s=timeout_s)


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: run one configuration and print the result as one JSON line on stdout."""
    result = run_brax_ppo(settings_from_cli(argv, __doc__.split("\n\n")[0]))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
