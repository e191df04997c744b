"""``train_ppo``: PPO's host loop (see ``host_loop``) around the pure ``ppo_step``.

The jitted call follows the functional NNX pattern: the networks and optimizer are split
once into a graph definition and a state pytree, merged inside.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.algorithms.config import TrainConfig, TrainResult, VideoData
from nnx_ppo.algorithms.host_loop import (
    MAX_ITERATIONS_PER_CALL as MAX_ITERATIONS_PER_CALL,
)
from nnx_ppo.algorithms.host_loop import (
    ChunkedLoop,
    LogFn,
    StopFn,
    passed_multiple,
    scan_iterations,
)
from nnx_ppo.algorithms.step import new_training_state, ppo_step
from nnx_ppo.algorithms.types import RLEnv, TrainingState
from nnx_ppo.algorithms.video import VideoRecorder, check_renderable


def default_config() -> TrainConfig:
    """Return default training configuration."""
    return TrainConfig()


def _resolve_config(
    config: TrainConfig | None, total_steps: int | None, seed: int | None
) -> TrainConfig:
    config = default_config() if config is None else config
    if not isinstance(config, TrainConfig):
        raise ValueError(f"config must be a TrainConfig, got {type(config).__name__}")
    if total_steps is not None:
        config = dataclasses.replace(
            config, ppo=dataclasses.replace(config.ppo, total_steps=total_steps)
        )
    if seed is not None:
        config = dataclasses.replace(config, seed=seed)
    return config


def _split(ts: TrainingState) -> tuple[Any, tuple[Any, ...]]:
    """``(graphdef, carried pytrees)`` of a training state; the pytrees are copies, so that
    donating them to the jitted loop never deletes the caller's buffers."""
    graphdef, module_state = nnx.split((ts.networks, ts.optimizer))
    state = (module_state, ts.network_states, ts.env_states, ts.rng_key, ts.steps_taken)
    return graphdef, jax.tree.map(jnp.copy, state)


def _merge(graphdef: Any, state: tuple[Any, ...]) -> TrainingState:
    """The ``TrainingState`` (with new module objects) of carried pytrees."""
    module_state, network_states, env_states, rng_key, steps = state
    networks, optimizer = nnx.merge(graphdef, module_state)
    return TrainingState(networks, network_states, env_states, optimizer, rng_key, steps)


def _one_iteration(env: RLEnv, graphdef: Any, step_kwargs: dict[str, Any]):
    """``ppo_step`` on the carried pytrees, for ``scan_iterations``."""

    def one_iteration(state: tuple[Any, ...], _: Any) -> tuple[tuple[Any, ...], dict]:
        module_state, network_states, env_states, rng_key, steps = state
        networks, optimizer = nnx.merge(graphdef, module_state)
        ts = TrainingState(networks, network_states, env_states, optimizer, rng_key, steps)
        ts, metrics = ppo_step(env, ts, **step_kwargs)
        module_state = nnx.state((ts.networks, ts.optimizer))
        return (module_state, ts.network_states, ts.env_states, ts.rng_key, ts.steps_taken), metrics

    return one_iteration


def train_ppo(
    env: RLEnv,
    networks: nnx.Module,
    config: TrainConfig | None = None,
    *,
    total_steps: int | None = None,
    seed: int | None = None,
    log_fn: LogFn | None = None,
    video_fn: Callable[[VideoData], None] | None = None,
    checkpoint_fn: Callable[[TrainingState, int], None] | None = None,
    eval_env: RLEnv | None = None,
    initial_state: TrainingState | None = None,
    should_stop: StopFn | None = None,
) -> TrainResult:
    """Train a PPO agent.

    Training performs whole PPO iterations while the step count is below
    ``config.ppo.total_steps``. Evaluation (deterministic policy, ``config.eval``) runs each
    time the step count passes a multiple of ``eval.every_steps`` and once at the end;
    its metrics (``eval/...``) join that iteration's metrics. Checkpoints follow
    ``config.checkpoint_every_steps`` and the end of training. With ``config.video.enabled``
    and a ``video_fn``, one deterministic episode of the eval env is rendered each time the
    step count passes a multiple of ``video.every_steps`` (not at the end otherwise).

    Args:
        env: Training environment (MjxEnv).
        networks: PPO network (actor-critic); trained in place.
        config: Training configuration. If None, uses default_config().
        total_steps: Override config.ppo.total_steps (convenience parameter).
        seed: Override config.seed (convenience parameter).
        log_fn: Called with (metrics_dict, step) after each PPO step. If None, no logging
            is performed.
        video_fn: Called with VideoData after rendering eval episodes. If None, no videos
            are recorded even if config.video.enabled.
        checkpoint_fn: Called with (training_state, step) at config.checkpoint_every_steps
            intervals. If None, no checkpointing is performed.
        eval_env: Environment for evaluation rollouts. If None, uses env.
        initial_state: Resume training from an existing TrainingState (its networks and
            optimizer are the ones trained). If None, creates a new TrainingState.
        should_stop: Asked after each jitted call of up to ``MAX_ITERATIONS_PER_CALL``
            iterations (an addition to the seed API): when it returns True, training stops
            there, after a checkpoint (with a ``checkpoint_fn``). For cancelling a run.

    Returns:
        TrainResult containing final TrainingState, metrics, and eval history.
    """
    config = _resolve_config(config, total_steps, seed)
    video_fn = video_fn if config.video.enabled else None
    if video_fn is not None:
        check_renderable(eval_env or env)  # before anything is compiled
    p = config.ppo
    if initial_state is None:
        check_compatible(env, networks)
        initial_state = training_state_for(env, networks, config)
    _check_batch(initial_state, p.n_envs)
    loop = _HostLoop(
        env, eval_env or env, initial_state, config, log_fn, checkpoint_fn, video_fn, should_stop
    )
    return loop.train()


def training_state_for(env: RLEnv, networks: nnx.Module, config: TrainConfig) -> TrainingState:
    """A new ``TrainingState`` as ``train_ppo`` starts one for ``config`` (its optimizer
    included, with the learning-rate schedule of ``anneal_learning_rate``): also the template
    a checkpoint of such a run loads into (an addition to the seed API)."""
    p = config.ppo
    iterations = math.ceil(p.total_steps / (p.n_envs * p.rollout_length))
    decay = iterations * p.n_epochs * p.n_minibatches if p.anneal_learning_rate else None
    return new_training_state(
        env,
        networks,
        p.n_envs,
        config.seed,
        p.learning_rate,
        p.gradient_clipping,
        p.weight_decay,
        learning_rate_decay_steps=decay,
    )


def check_compatible(env: RLEnv, networks: nnx.Module) -> None:
    """Raises ValueError unless ``networks`` accepts ``env``'s observations and returns
    actions of its size. Works on shapes only (``jax.eval_shape``): nothing is compiled."""
    obs = jax.eval_shape(env.reset, jax.random.key(0)).obs
    batch = jax.tree.map(lambda s: jax.ShapeDtypeStruct((2, *s.shape), s.dtype), obs)
    graphdef, state = nnx.split(networks)

    def act(module_state: Any, observations: Any) -> jax.Array:
        module = nnx.merge(graphdef, module_state)
        return module(module.initialize_state(2), observations).output.actions

    shapes = jax.tree.map(lambda s: s.shape, obs)
    try:
        actions = jax.eval_shape(act, state, batch)
    except (TypeError, ValueError, KeyError) as error:
        raise ValueError(
            f"the network does not accept this env's observations {shapes}: {error}"
        ) from None
    action_size = getattr(env, "action_size", None)
    if action_size is not None and actions.shape[-1] != action_size:
        raise ValueError(
            f"the network's actions have size {actions.shape[-1]}, the env's {action_size}"
        )


def _check_batch(ts: TrainingState, n_envs: int) -> None:
    leaves = jax.tree.leaves(ts.env_states)
    if leaves and leaves[0].shape[:1] != (n_envs,):
        raise ValueError(
            f"initial_state holds {leaves[0].shape[0]} envs but config.ppo.n_envs is {n_envs}"
        )


class _HostLoop(ChunkedLoop):
    """PPO's host loop: jitted chunks of ``ppo_step`` with eval, checkpoints and videos."""

    def __init__(
        self,
        env: RLEnv,
        eval_env: RLEnv,
        initial_state: TrainingState,
        config: TrainConfig,
        log_fn: LogFn | None,
        checkpoint_fn: Callable[[TrainingState, int], None] | None,
        video_fn: Callable[[VideoData], None] | None = None,
        should_stop: StopFn | None = None,
    ):
        p = config.ppo
        self.config = config
        self.initial_state = initial_state
        self.graphdef, self.state = _split(initial_state)
        super().__init__(
            total_steps=p.total_steps,
            start_steps=int(initial_state.steps_taken),
            steps_per_iteration=p.n_envs * p.rollout_length,
            eval_env=eval_env,
            eval_config=config.eval,
            seed=config.seed,
            logging_level=p.logging_level,
            log_fn=log_fn,
            checkpoint_fn=checkpoint_fn,
            checkpoint_every_steps=config.checkpoint_every_steps,
            should_stop=should_stop,
        )
        step_kwargs = {
            "n_envs": p.n_envs,
            "rollout_length": p.rollout_length,
            "gae_lambda": p.gae_lambda,
            "discounting_factor": p.discounting_factor,
            "clip_range": p.clip_range,
            "normalize_advantages": p.normalize_advantages,
            "combine_advantages": p.combine_advantages,
            "n_epochs": p.n_epochs,
            "n_minibatches": p.n_minibatches,
            "critic_loss_weight": p.critic_loss_weight,
            "logging_level": p.logging_level,
            "logging_percentiles": p.logging_percentiles,
        }
        one_iteration = _one_iteration(env, self.graphdef, step_kwargs)
        self.train_chunk = scan_iterations(one_iteration, self.chunk_length)
        self.video_fn = video_fn
        if video_fn is not None:
            v = config.video
            self.record_video = VideoRecorder(
                eval_env, self.graphdef, v.episode_length, v.render_kwargs
            )
            self.video_key = jax.random.fold_in(jax.random.key(config.seed), 2)

    def run_chunk(self, n: int) -> dict[str, Any]:
        self.state, metrics = self.train_chunk(self.state, None, jnp.asarray(n))
        return metrics

    def checkpoint_state(self, snapshot: tuple[Any, ...]) -> TrainingState:
        return _merge(self.graphdef, snapshot)

    def extra_events(self) -> list[int]:
        return [self.config.video.every_steps] if self.video_fn is not None else []

    def after_logging(self, before: int, after: int) -> None:
        """Renders and hands over a video when one is due at ``after``.

        Runs after the chunk's metrics went to ``log_fn``, so a logger that needs increasing
        steps (W&B) gets the video at ``after`` after the metrics of the steps before it.
        """
        every = self.config.video.every_steps
        if self.video_fn is not None and passed_multiple(before, after, every):
            key = jax.random.fold_in(self.video_key, after)
            self.video_fn(self.record_video(self.state[0], key, after))

    def train(self) -> TrainResult:
        last_metrics, steps, iterations = self.run()
        final = _merge(self.graphdef, self.state)
        # The caller's modules take the trained values (their own buffers were never donated).
        nnx.update(
            (self.initial_state.networks, self.initial_state.optimizer),
            nnx.state((final.networks, final.optimizer)),
        )
        training_state = final.replace(
            networks=self.initial_state.networks, optimizer=self.initial_state.optimizer
        )
        return TrainResult(
            training_state=training_state,
            final_metrics=last_metrics,
            eval_history=self.eval_history,
            total_steps=steps,
            total_iterations=iterations,
        )
