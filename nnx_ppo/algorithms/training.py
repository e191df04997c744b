"""The PPO host loop: ``train_ppo``.

Host loop (impure): it decides how many PPO iterations can run before the next host-side
event (evaluation, checkpoint, video, the end), runs them in one jitted call (a
``lax.scan`` over ``ppo_step``), then hands each iteration's metrics to ``log_fn`` in order
and performs the event. The jitted call follows the functional NNX pattern: the networks
and optimizer are split once into a graph definition and a state pytree, merged inside.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.algorithms.config import TrainConfig, TrainResult, VideoData
from nnx_ppo.algorithms.rollout import eval_rollout
from nnx_ppo.algorithms.step import new_training_state, ppo_step
from nnx_ppo.algorithms.types import LoggingLevel, RLEnv, TrainingState
from nnx_ppo.algorithms.video import VideoRecorder, check_renderable

MAX_ITERATIONS_PER_CALL = 32
"""Upper bound on PPO iterations fused into one jitted call."""

LogFn = Callable[[dict[str, Any], int], None]


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


def iterations_until(steps: int, every: int, steps_per_iteration: int) -> int:
    """PPO iterations until the step count first passes a multiple of ``every``."""
    target = (steps // every + 1) * every
    return max(1, math.ceil((target - steps) / steps_per_iteration))


def passed_multiple(before: int, after: int, every: int) -> bool:
    """Whether the step count passed a multiple of ``every`` going from before to after."""
    return after // every > before // every


@dataclasses.dataclass
class _Carry:
    """What the jitted loop carries, as plain pytrees, and how to rebuild the objects."""

    graphdef: Any
    state: tuple[Any, ...]

    @classmethod
    def from_training_state(cls, ts: TrainingState) -> _Carry:
        graphdef, module_state = nnx.split((ts.networks, ts.optimizer))
        state = (module_state, ts.network_states, ts.env_states, ts.rng_key, ts.steps_taken)
        return cls(graphdef, jax.tree.map(jnp.copy, state))  # donation must not hit the caller

    def training_state(self, state: tuple[Any, ...] | None = None) -> TrainingState:
        module_state, network_states, env_states, rng_key, steps = state or self.state
        networks, optimizer = nnx.merge(self.graphdef, module_state)
        return TrainingState(networks, network_states, env_states, optimizer, rng_key, steps)


def _make_train_chunk(env: RLEnv, graphdef: Any, step_kwargs: dict[str, Any], length: int):
    """A jitted function running up to ``length`` PPO iterations.

    ``run(state, n_active)`` performs the first ``n_active`` iterations (a traced count, so
    any count up to ``length`` reuses one compilation) and returns the new state and the
    per-iteration metrics stacked on a leading ``[length]`` axis.
    """

    def one_iteration(state: tuple[Any, ...]) -> tuple[tuple[Any, ...], dict[str, jax.Array]]:
        module_state, network_states, env_states, rng_key, steps = state
        networks, optimizer = nnx.merge(graphdef, module_state)
        ts = TrainingState(networks, network_states, env_states, optimizer, rng_key, steps)
        ts, metrics = ppo_step(env, ts, **step_kwargs)
        module_state = nnx.state((ts.networks, ts.optimizer))
        return (module_state, ts.network_states, ts.env_states, ts.rng_key, ts.steps_taken), metrics

    def run(state: tuple[Any, ...], n_active: jax.Array) -> tuple[tuple[Any, ...], dict]:
        metric_shapes = jax.eval_shape(one_iteration, state)[1]

        def skip(s: tuple[Any, ...]) -> tuple[tuple[Any, ...], dict]:
            return s, jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), metric_shapes)

        def body(s: tuple[Any, ...], i: jax.Array) -> tuple[tuple[Any, ...], dict]:
            return jax.lax.cond(i < n_active, one_iteration, skip, s)

        return jax.lax.scan(body, state, jnp.arange(length))

    return jax.jit(run, donate_argnums=0)


def _make_evaluator(env: RLEnv, graphdef: Any, config: TrainConfig):
    cfg = config.eval

    def evaluate(module_state: Any, key: jax.Array) -> dict[str, jax.Array]:
        networks, _ = nnx.merge(graphdef, module_state)
        return eval_rollout(
            env,
            networks,
            cfg.n_envs,
            cfg.max_episode_length,
            key,
            cfg.logging_percentiles,
            cfg.logging_level,
        )

    return jax.jit(evaluate)


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
        iterations = math.ceil(p.total_steps / (p.n_envs * p.rollout_length))
        decay = iterations * p.n_epochs * p.n_minibatches if p.anneal_learning_rate else None
        initial_state = new_training_state(
            env,
            networks,
            p.n_envs,
            config.seed,
            p.learning_rate,
            p.gradient_clipping,
            p.weight_decay,
            learning_rate_decay_steps=decay,
        )
    _check_batch(initial_state, p.n_envs)
    loop = _HostLoop(env, eval_env or env, initial_state, config, log_fn, checkpoint_fn, video_fn)
    return loop.run()


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


class _HostLoop:
    """Host loop: jitted chunks of PPO iterations with host-side events in between."""

    def __init__(
        self,
        env: RLEnv,
        eval_env: RLEnv,
        initial_state: TrainingState,
        config: TrainConfig,
        log_fn: LogFn | None,
        checkpoint_fn: Callable[[TrainingState, int], None] | None,
        video_fn: Callable[[VideoData], None] | None = None,
    ):
        p = config.ppo
        self.config = config
        self.initial_state = initial_state
        self.log_fn = log_fn
        self.checkpoint_fn = checkpoint_fn
        self.carry = _Carry.from_training_state(initial_state)
        self.steps_per_iteration = p.n_envs * p.rollout_length
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
        steps = int(initial_state.steps_taken)
        total_iterations = max(0, math.ceil((p.total_steps - steps) / self.steps_per_iteration))
        self.chunk_length = max(1, min(MAX_ITERATIONS_PER_CALL, total_iterations))
        self.train_chunk = _make_train_chunk(
            env, self.carry.graphdef, step_kwargs, self.chunk_length
        )
        self.evaluate = _make_evaluator(eval_env, self.carry.graphdef, config)
        self.eval_key = jax.random.fold_in(jax.random.key(config.seed), 1)
        self.eval_history: list[dict[str, Any]] = []
        self.video_fn = video_fn
        if video_fn is not None:
            v = config.video
            self.record_video = VideoRecorder(
                eval_env, self.carry.graphdef, v.episode_length, v.render_kwargs
            )
            self.video_key = jax.random.fold_in(jax.random.key(config.seed), 2)

    def _events(self) -> list[int]:
        """The step intervals of the host-side events that are active."""
        every = []
        if self.config.eval.enabled:
            every.append(self.config.eval.every_steps)
        if self.checkpoint_fn is not None:
            every.append(self.config.checkpoint_every_steps)
        if self.video_fn is not None:
            every.append(self.config.video.every_steps)
        return every

    def run(self) -> TrainResult:
        total = self.config.ppo.total_steps
        steps = int(self.initial_state.steps_taken)
        iterations, last_metrics = 0, {}
        while steps < total:
            remaining = math.ceil((total - steps) / self.steps_per_iteration)
            n = min(self.chunk_length, remaining)
            for every in self._events():
                n = min(n, iterations_until(steps, every, self.steps_per_iteration))
            start = time.perf_counter()
            self.carry.state, metrics = self.train_chunk(self.carry.state, jnp.asarray(n))
            metrics = jax.device_get(metrics)
            seconds = time.perf_counter() - start
            after = steps + n * self.steps_per_iteration
            host_metrics = self._host_events(steps, after, final=after >= total)
            if self.config.ppo.logging_level & LoggingLevel.THROUGHPUT:
                host_metrics["throughput/env_steps_per_second"] = (after - steps) / seconds
                host_metrics["throughput/seconds_per_iteration"] = seconds / n
            for i in range(n):
                step_metrics = {k: float(v[i]) for k, v in metrics.items()}
                if i == n - 1:
                    step_metrics.update(host_metrics)
                if self.log_fn is not None:
                    self.log_fn(step_metrics, steps + (i + 1) * self.steps_per_iteration)
                last_metrics = step_metrics
            self._video_event(steps, after)
            steps, iterations = after, iterations + n
        return self._result(last_metrics, steps, iterations)

    def _host_events(self, before: int, after: int, final: bool) -> dict[str, Any]:
        """Evaluation and checkpoint due at ``after``; returns the evaluation's metrics."""
        out: dict[str, Any] = {}
        eval_cfg = self.config.eval
        if eval_cfg.enabled and (final or passed_multiple(before, after, eval_cfg.every_steps)):
            key = jax.random.fold_in(self.eval_key, after)
            out = {
                k: float(v)
                for k, v in jax.device_get(self.evaluate(self.carry.state[0], key)).items()
            }
            self.eval_history.append({"step": after, **out})
        every = self.config.checkpoint_every_steps
        if self.checkpoint_fn is not None and (final or passed_multiple(before, after, every)):
            snapshot = jax.tree.map(jnp.copy, self.carry.state)
            self.checkpoint_fn(self.carry.training_state(snapshot), after)
        return out

    def _video_event(self, before: int, after: int) -> None:
        """Renders and hands over a video when one is due at ``after``.

        Runs after the chunk's metrics went to ``log_fn``, so a logger that needs increasing
        steps (W&B) gets the video at ``after`` after the metrics of the steps before it.
        """
        every = self.config.video.every_steps
        if self.video_fn is not None and passed_multiple(before, after, every):
            key = jax.random.fold_in(self.video_key, after)
            self.video_fn(self.record_video(self.carry.state[0], key, after))

    def _result(self, last_metrics: dict[str, Any], steps: int, iterations: int) -> TrainResult:
        final = self.carry.training_state()
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
