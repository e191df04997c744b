"""``train_ppo``: the one host loop (``host_loop.run_training``) around the pure
``ppo_iteration``, with the PPO config static in the jitted step."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, TypeVar

import jax
from flax import nnx

from nnx_ppo.algorithms.action_heads import action_shape, check_action_structure
from nnx_ppo.algorithms.algorithm_layout import layout_for
from nnx_ppo.algorithms.carry import check_n_envs
from nnx_ppo.algorithms.config import DistillationTrainConfig, TrainConfig, TrainResult, VideoData
from nnx_ppo.algorithms.host_loop import MAX_ITERATIONS_PER_CALL as MAX_ITERATIONS_PER_CALL
from nnx_ppo.algorithms.host_loop import (
    Callbacks,
    LogFn,
    NonFiniteError,
    PhaseFn,
    Programs,
    Schedule,
    StopFn,
    run_training,
)
from nnx_ppo.algorithms.matmul_precision import explicit_matmul_precision
from nnx_ppo.algorithms.program_cache import ProgramCache
from nnx_ppo.algorithms.sharding import check_devices
from nnx_ppo.algorithms.step import check_segments, new_training_state, ppo_iteration
from nnx_ppo.algorithms.streams import check_streams
from nnx_ppo.algorithms.types import RLEnv, TrainingState
from nnx_ppo.algorithms.video import check_renderable
from nnx_ppo.envs import randomization
from nnx_ppo.envs.chunked import step_in_chunks
from nnx_ppo.envs.randomization import RandomizationFn
from nnx_ppo.networks.base import StatefulModule

__all__ = [
    "MAX_ITERATIONS_PER_CALL",
    "NonFiniteError",
    "check_compatible",
    "default_config",
    "resolve_config",
    "train_ppo",
    "training_state_for",
]

AnyConfig = TypeVar("AnyConfig", TrainConfig, DistillationTrainConfig)


def default_config() -> TrainConfig:
    """Return default training configuration."""
    return TrainConfig()


def resolve_config(
    config: AnyConfig | None, kind: type[AnyConfig], total_steps: int | None, seed: int | None
) -> AnyConfig:
    """``config`` (the default ``kind()`` when None) with the convenience overrides of
    ``train_ppo``/``train_distillation`` applied; ``replace`` validates the new values."""
    config = kind() if config is None else config
    if not isinstance(config, kind):
        raise ValueError(f"config must be a {kind.__name__}, got {type(config).__name__}")
    if total_steps is not None:
        section = layout_for(kind).section
        inner = dataclasses.replace(getattr(config, section), total_steps=total_steps)
        config = dataclasses.replace(config, **{section: inner})
    if seed is not None:
        config = dataclasses.replace(config, seed=seed)
    return config


def schedule_of(config: TrainConfig | DistillationTrainConfig) -> Schedule:
    """The host loop's schedule of a training config."""
    section = layout_for(config).section
    inner = getattr(config, section)
    return Schedule(
        total_steps=inner.total_steps,
        steps_per_iteration=inner.n_envs * inner.rollout_length,
        checkpoint_every_steps=config.checkpoint_every_steps,
        eval=config.eval,
        video=config.video,
        seed=config.seed,
        logging_level=inner.logging_level,
        stop_on_non_finite=config.stop_on_non_finite,
        devices=check_devices(config.devices, inner.n_envs, inner.n_minibatches, section),
    )


def train_ppo(
    env: RLEnv,
    networks: StatefulModule,
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
    program_cache: ProgramCache | None = None,
    phase_fn: PhaseFn | None = None,
    randomization_fn: RandomizationFn | None = None,
) -> TrainResult:
    """Train a PPO agent.

    Training performs whole PPO iterations while the step count is below
    ``config.ppo.total_steps``. Evaluation (deterministic policy, ``config.eval``) runs each
    time the step count passes a multiple of ``eval.every_steps`` and once at the end;
    its metrics (``eval/...``) join that iteration's metrics. Checkpoints follow
    ``config.checkpoint_every_steps`` and the end of training. With ``config.video.enabled``
    and a ``video_fn``, one deterministic episode of the eval env is rendered each time the
    step count passes a multiple of ``video.every_steps`` (not at the end otherwise).
    Training runs under an explicit matmul precision: ``"highest"`` (true float32 products,
    never TF32 on a GPU) unless the caller set one (``nnx_ppo.algorithms.matmul_precision``).

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
        program_cache: Load the jitted training chunk and evaluator from this cache of
            lowered programs, or store them there (an addition to the seed API): a second
            process with the same configuration then skips tracing and lowering. Its
            ``identity`` must name the env and the networks (the evaluator is cached only
            when ``eval_env`` is None or ``env``). Results are the same bit for bit.
        phase_fn: Called with the name of each host-loop phase as it begins
            (``training``, the first including the compile; ``evaluating``;
            ``checkpointing``; ``video``), an addition to the seed API. For progress display.
        randomization_fn: Domain randomization (an addition to the seed API), Brax's
            ``randomization_fn(model, keys) -> (models, in_axes)`` (e.g.
            ``nnx_ppo.envs.randomization.randomizer(name)``, MuJoCo Playground's): each of
            the ``config.ppo.n_envs`` training envs steps its own variant of ``env``'s
            model, made from keys split off ``config.seed``. The envs' states carry their
            variants (``nnx_ppo.envs.randomization``), so checkpoints hold them and a run
            resumed from ``initial_state`` steps the same ones. Evaluation and videos use
            the nominal model unless ``eval_env`` is itself randomized (e.g.
            ``randomization.randomize(env, fn, config.eval.n_envs, seed)``).

    Returns:
        TrainResult containing final TrainingState, metrics, and eval history.
    """
    config = resolve_config(config, TrainConfig, total_steps, seed)
    video_fn = video_fn if config.video.enabled else None
    if video_fn is not None:
        check_renderable(eval_env or env)  # before anything is compiled
    p = config.ppo
    schedule = schedule_of(config)  # validates config.devices before anything is compiled
    env_states = None if initial_state is None else initial_state.env_states
    train_env = randomization.for_training(env, randomization_fn, p.n_envs, config.seed, env_states)
    train_env = step_in_chunks(train_env, p.env_step_chunk)
    if initial_state is None:
        check_compatible(env, networks)
        initial_state = training_state_for(train_env, networks, config)
    check_n_envs(initial_state.env_states, p.n_envs, "config.ppo.n_envs")
    check_segments(initial_state.network_states, p)

    def step(state: TrainingState, _: Any) -> tuple[TrainingState, dict[str, jax.Array]]:
        return ppo_iteration(train_env, state, p)

    callbacks = Callbacks(log_fn, checkpoint_fn, video_fn, should_stop, phase_fn)
    programs = None
    if program_cache is not None:
        same_eval_env = eval_env is None or eval_env is env
        # The total reaches the program only through an annealed learning rate's schedule.
        keyed = dataclasses.asdict(p)
        if not p.anneal_learning_rate:
            del keyed["total_steps"]
        programs = Programs(program_cache, {"algorithm": "ppo", "ppo": keyed}, same_eval_env)
    eval_env = eval_env or env  # the nominal model unless randomized by the caller
    with explicit_matmul_precision():
        result = run_training(step, initial_state, None, eval_env, schedule, callbacks, programs)
    assert isinstance(result.state, TrainingState)
    return TrainResult(**result.fields())


def training_state_for(env: RLEnv, networks: StatefulModule, config: TrainConfig) -> TrainingState:
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


def check_compatible(env: RLEnv, networks: StatefulModule) -> None:
    """Raises ValueError unless ``networks`` accepts ``env``'s observations, returns actions
    of its size (for an env whose ``action_size`` is ``{head: size}``, a dict of those
    heads: ``PPOAdapter(action=Map({head: sampler}))``) and has one value head per reward
    stream of the env. Works on shapes only (``jax.eval_shape``): nothing is compiled."""
    action_size = getattr(env, "action_size", None)
    first = jax.eval_shape(env.reset, jax.random.key(0))
    batch = jax.tree.map(lambda s: jax.ShapeDtypeStruct((2, *s.shape), s.dtype), first.obs)
    graphdef, state = nnx.split(networks)

    def call(module_state: Any, observations: Any) -> Any:
        module: Any = nnx.merge(graphdef, module_state)
        return module(module.initialize_state(2), observations).output

    shapes = jax.tree.map(lambda s: s.shape, first.obs)
    try:
        output = jax.eval_shape(call, state, batch)
    except (TypeError, ValueError, KeyError) as error:
        raise ValueError(
            f"the network does not accept this env's observations {shapes}: {error}"
        ) from None
    if action_size is not None:
        check_action_structure(action_size, action_shape(output.actions))
    check_streams(first.reward, output.value_estimates)
