"""Runtime types for the PPO algorithm.

Axis names used in the annotations: ``time`` is the rollout step (``T``), ``batch`` the
environment index (``B``). A single-step value has shape ``[B]``; a rollout ``[T, B]``.
"""

from __future__ import annotations

import enum
from typing import Any, Protocol

import jax
from flax import struct
from jaxtyping import Array, Bool, Float, Key, PyTree, Shaped, UInt32

from nnx_ppo.networks.types import PPONetworkOutput

PRNGKeyArray = Key[Array, ""] | UInt32[Array, "2"] | UInt32[Array, "4"]


class JaxDataclass(struct.PyTreeNode):
    """Frozen dataclass that is a JAX pytree: every field is a child of the tree."""


class EnvState(Protocol):
    """Minimal environment state interface.

    Satisfied by ``mujoco_playground.State`` and by ``nnx_ppo.envs.State``. Fields are
    read-only properties so that frozen dataclasses satisfy the protocol.
    """

    @property
    def obs(self) -> Any: ...

    @property
    def done(self) -> Shaped[Array, "..."]: ...

    @property
    def reward(self) -> Any: ...

    @property
    def info(self) -> dict[str, Any]: ...

    @property
    def metrics(self) -> dict[str, Any]: ...


class RLEnv(Protocol):
    """Minimal RL environment interface: a single, unbatched environment.

    Satisfied by ``mujoco_playground.MjxEnv`` and the built-in envs in ``nnx_ppo.envs``.
    The trainer vmaps ``reset`` and ``step`` over environments and resets finished episodes
    itself, so an env must not reset itself.
    """

    def reset(self, rng: jax.Array) -> EnvState: ...

    def step(self, state: EnvState, action: jax.Array) -> EnvState: ...


class TrainingState(JaxDataclass):
    """Everything PPO training carries from one iteration to the next.

    Attributes:
        networks: The actor-critic ``StatefulModule`` being trained.
        network_states: The networks' recurrent state, one entry per env (``[B, ...]``).
        env_states: The batched environment state (``[B, ...]`` leaves).
        optimizer: An ``nnx.Optimizer`` over the networks' ``nnx.Param`` variables.
        rng_key: Key for environment resets and minibatch shuffling.
        steps_taken: Environment steps taken so far, summed over envs. ``new_training_state``
            makes it an int32 scalar (exact up to 2**31 steps; a float32 count stops
            increasing past 2**24 for some batch sizes).
    """

    networks: Any
    network_states: Any
    env_states: Any
    optimizer: Any
    rng_key: PRNGKeyArray
    steps_taken: Float[Array, ""]


class Transition(JaxDataclass):
    """Environment state for training and inference.

    Note: rewards, done, truncated use ``*time`` to allow both ``[batch]`` (single timestep)
    and ``[time, batch]`` (full rollout) shapes.

    Attributes:
        obs: Observation the network acted on.
        network_output: What the network produced for ``obs`` (actions, log-likelihoods,
            value estimates, ...).
        rewards: Reward of the step (a pytree when the env has several reward streams).
        done: The episode ended at this step (termination or truncation).
        truncated: The episode ended at this step because of its time limit.
        next_obs: Observation after the step, before any reset.
        metrics: Env metrics after the step.
        rollout_extras: What the network recorded to replay this step exactly in the loss
            (for the tanh-normal sampler: the raw action).
        bootstrap_values: Value estimate of ``next_obs`` where ``truncated`` (zero elsewhere),
            so that a truncated step bootstraps instead of being treated as terminal.
    """

    obs: PyTree[Float[Array, "..."]]
    network_output: PPONetworkOutput
    rewards: PyTree[Float[Array, "*time batch"]]
    done: Bool[Array, "*time batch"]
    truncated: Bool[Array, "*time batch"]
    next_obs: PyTree[Float[Array, "..."]]
    metrics: dict[str, Any]
    rollout_extras: Any = None
    bootstrap_values: Any = None


class DistillationTransition(JaxDataclass):
    """Rollout transition for distillation training.

    Carries both student and teacher network outputs. The student's actions drive the
    environment; the teacher's outputs (pre-computed outside of gradient computation) serve
    as the distillation target.
    """

    obs: PyTree[Float[Array, "..."]]
    student_output: PPONetworkOutput
    rewards: PyTree[Float[Array, "*time batch"]]
    done: Bool[Array, "*time batch"]
    truncated: Bool[Array, "*time batch"]
    next_obs: PyTree[Float[Array, "..."]]
    metrics: dict[str, Any]
    student_rollout_extras: Any = None
    teacher_rollout_extras: Any = None


class DistillationState(JaxDataclass):
    """Training state for distillation.

    Mirrors ``TrainingState`` but has separate student and teacher states. The teacher is
    passed as an external argument (like env) and is not stored here. Only the teacher's
    per-env carry state is tracked.
    """

    student: Any
    student_states: Any
    teacher_states: Any
    env_states: Any
    optimizer: Any
    rng_key: PRNGKeyArray
    steps_taken: Float[Array, ""]


class LoggingLevel(enum.Flag):
    """Which groups of metrics training and evaluation report. Combine with ``|``.

    ``ALL`` is every group except ``ROLLOUT_OBS`` (per-dimension observation statistics,
    which can be large); ``BASIC`` is ``LOSSES``.
    """

    LOSSES = 1
    CRITIC_EXTRA = 2
    ACTOR_EXTRA = 4
    ROLLOUT_STATS = 8
    ROLLOUT_OBS = 16
    ENV_METRICS = 32
    NETWORK_METRICS = 64
    GRAD_NORM = 128
    WEIGHTS = 256
    THROUGHPUT = 512
    BASIC = LOSSES
    ALL = (
        LOSSES
        | CRITIC_EXTRA
        | ACTOR_EXTRA
        | ROLLOUT_STATS
        | ENV_METRICS
        | NETWORK_METRICS
        | GRAD_NORM
        | WEIGHTS
        | THROUGHPUT
    )
    NONE = 0
