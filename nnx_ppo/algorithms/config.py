"""Configuration dataclasses for ``train_ppo`` and ``train_distillation``.

Every config validates itself on creation and raises ``ValueError`` naming the offending
field, so a bad value fails before anything is compiled. Configs are frozen: derive a
changed one with ``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nnx_ppo.algorithms.types import DistillationState, LoggingLevel, TrainingState


def _require(condition: Any, field: str, value: Any, requirement: str) -> None:
    if not condition:
        raise ValueError(f"{field} must be {requirement}, got {value!r}")


def _positive_int(owner: str, field: str, value: Any) -> None:
    ok = isinstance(value, int | np.integer) and not isinstance(value, bool) and value > 0
    _require(ok, f"{owner}.{field}", value, "a positive integer")


def _positive_float(owner: str, field: str, value: Any) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    _require(ok and np.isfinite(value), f"{owner}.{field}", value, "a positive number")


def _optional_positive_float(owner: str, field: str, value: Any) -> None:
    if value is not None:
        _positive_float(owner, field, value)


def _percentiles(owner: str, value: Any) -> None:
    if value is None:
        return
    ok = isinstance(value, tuple | list) and all(
        isinstance(p, int | float) and 0 <= p <= 100 for p in value
    )
    _require(ok, f"{owner}.logging_percentiles", value, "None or a tuple of numbers in [0, 100]")


def _logging_level(owner: str, value: Any) -> None:
    _require(isinstance(value, LoggingLevel), f"{owner}.logging_level", value, "a LoggingLevel")


def _validate_optimization(owner: str, cfg: Any) -> None:
    """Checks the fields PPOConfig and DistillationConfig share."""
    for name in ("n_envs", "rollout_length", "total_steps", "n_epochs", "n_minibatches"):
        _positive_int(owner, name, getattr(cfg, name))
    if cfg.n_envs % cfg.n_minibatches:
        raise ValueError(
            f"{owner}.n_envs ({cfg.n_envs}) must be divisible by "
            f"{owner}.n_minibatches ({cfg.n_minibatches}): minibatches split the env axis"
        )
    _positive_float(owner, "learning_rate", cfg.learning_rate)
    _optional_positive_float(owner, "gradient_clipping", cfg.gradient_clipping)
    if cfg.weight_decay is not None:
        ok = isinstance(cfg.weight_decay, int | float) and cfg.weight_decay >= 0
        _require(ok, f"{owner}.weight_decay", cfg.weight_decay, "None or a number >= 0")
    _logging_level(owner, cfg.logging_level)
    _percentiles(owner, cfg.logging_percentiles)


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """Core PPO algorithm parameters.

    One PPO iteration collects ``rollout_length`` steps from each of ``n_envs`` envs, then
    runs ``n_epochs`` passes of ``n_minibatches`` gradient steps over it.
    """

    n_envs: int = 256
    """Parallel environments; the batch axis of every rollout."""
    rollout_length: int = 20
    """Environment steps per env collected in each PPO iteration."""
    total_steps: int = 512000
    """Training stops once this many env steps (summed over envs) have been taken."""
    gae_lambda: float = 0.95
    """GAE lambda in [0, 1]: 0 is one-step TD, 1 is Monte-Carlo."""
    discounting_factor: float = 0.99
    """Discount gamma in (0, 1]."""
    clip_range: float = 0.2
    """PPO ratio clipping epsilon, in (0, 1)."""
    learning_rate: float = 0.0001
    """Adam learning rate."""
    normalize_advantages: bool = True
    """Standardize advantages per minibatch."""
    combine_advantages: bool = False
    """With several reward streams (a dict reward and one value head per stream): sum the
    streams' advantages, normalize the sum and take one clipped policy loss of it (True), or
    normalize each stream's advantages and add one clipped policy-loss term per stream
    (False; with ``normalize_advantages`` every stream then weighs the same, whatever the
    scale of its rewards). One stream: no difference."""
    n_epochs: int = 4
    """Passes over each rollout."""
    n_minibatches: int = 4
    """Minibatches per pass; they split the env axis, so ``n_envs`` must be divisible."""
    critic_loss_weight: float = 1.0
    """Weight of the value loss relative to the policy loss."""
    gradient_clipping: float | None = None
    """Global gradient-norm clip, or None for no clipping."""
    weight_decay: float | None = None
    """Decoupled weight decay (AdamW) or None for plain Adam."""
    logging_level: LoggingLevel = LoggingLevel.LOSSES
    """Which metric groups each PPO step reports."""
    logging_percentiles: tuple[int, ...] | None = None
    """Percentiles for distribution metrics; None reports mean and std."""
    anneal_learning_rate: bool = False
    """Decay the learning rate linearly to zero at ``total_steps`` (an addition to the seed
    API; off by default)."""
    reward_scaling: float = 1.0
    """Factor applied to every reward stream before GAE and the value loss (Brax's
    ``reward_scaling``; an addition to the seed API). Evaluation reports unscaled rewards."""
    minibatch_segment_length: int | None = None
    """None: each minibatch holds whole envs' ``rollout_length``-step sequences (what a
    recurrent network needs). A length ``S`` dividing ``rollout_length``: the rollout is cut
    into ``S``-step segments, and the minibatches shuffle the ``n_envs * rollout_length / S``
    segments, as Brax shuffles its ``unroll_length`` segments; GAE then restarts at each
    segment, bootstrapping from the value of its last next observation. Stateless networks
    only (an addition to the seed API)."""

    env_step_chunk: int | None = None
    """None: each step of the training envs is one ``vmap`` of ``env.step`` over all
    ``n_envs``. A size ``C`` dividing ``n_envs``: the envs step ``C`` at a time, a
    ``lax.map`` over ``n_envs / C`` vmapped chunks (``nnx_ppo.envs.chunked``). The same
    physics and settings; MJX's float32 results on XLA:CPU differ in their last bits with the
    width of the batch (as they do between two values of ``n_envs``), so losses are not the
    same bit for bit. On a CPU, envs with contacts step faster so (in chunks of 32 of 256:
    FingerSpin 1.71x, WalkerWalk 1.28x), small ones slower (Cartpole, Pendulum, Acrobot,
    Reacher: 0.53-0.94x); ``python -m bench.step_chunks --env NAME`` measures an env. One
    device only (an addition to the seed API)."""

    def __post_init__(self) -> None:
        _validate_optimization("ppo", self)
        chunk = self.env_step_chunk
        if chunk is not None:
            _positive_int("ppo", "env_step_chunk", chunk)
            requirement = f"None or a divisor of ppo.n_envs ({self.n_envs})"
            _require(self.n_envs % chunk == 0, "ppo.env_step_chunk", chunk, requirement)
        segment = self.minibatch_segment_length
        if segment is not None:
            _positive_int("ppo", "minibatch_segment_length", segment)
            divides = self.rollout_length % segment == 0
            requirement = f"a divisor of ppo.rollout_length ({self.rollout_length})"
            _require(divides, "ppo.minibatch_segment_length", segment, requirement)
        lam, gamma, clip = self.gae_lambda, self.discounting_factor, self.clip_range
        _require(_is_number(lam) and 0 <= lam <= 1, "ppo.gae_lambda", lam, "in [0, 1]")
        _require(_is_number(gamma) and 0 < gamma <= 1, "ppo.discounting_factor", gamma, "in (0, 1]")
        _require(_is_number(clip) and 0 < clip < 1, "ppo.clip_range", clip, "in (0, 1)")
        weight = self.critic_loss_weight
        _require(_is_number(weight) and weight >= 0, "ppo.critic_loss_weight", weight, ">= 0")
        _positive_float("ppo", "reward_scaling", self.reward_scaling)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Evaluation rollout configuration (deterministic policy, fresh envs)."""

    enabled: bool = True
    """Run evaluations during training."""
    every_steps: int = 50000
    """Evaluate each time training passes a multiple of this many env steps."""
    n_envs: int = 64
    """Episodes per evaluation (one per env)."""
    max_episode_length: int = 1000
    """Steps an evaluation episode runs at most."""
    logging_level: LoggingLevel = LoggingLevel.NONE
    """Extra metric groups to report from evaluation."""
    logging_percentiles: tuple[int, ...] | None = (0, 25, 50, 75, 100)
    """Percentiles of the episode reward to report; None reports mean and std."""

    def __post_init__(self) -> None:
        for name in ("every_steps", "n_envs", "max_episode_length"):
            _positive_int("eval", name, getattr(self, name))
        _logging_level("eval", self.logging_level)
        _percentiles("eval", self.logging_percentiles)


@dataclasses.dataclass(frozen=True)
class VideoConfig:
    """Video recording configuration."""

    enabled: bool = False
    """Render an evaluation episode on the video schedule."""
    every_steps: int = 200000
    """Record each time training passes a multiple of this many env steps."""
    episode_length: int = 1000
    """Steps of the rendered episode."""
    render_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Keyword arguments for the env's ``render`` (e.g. ``height``, ``width``, ``camera``)."""

    def __post_init__(self) -> None:
        for name in ("every_steps", "episode_length"):
            _positive_int("video", name, getattr(self, name))


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Complete training configuration."""

    ppo: PPOConfig = dataclasses.field(default_factory=PPOConfig)
    """PPO algorithm parameters."""
    eval: EvalConfig = dataclasses.field(default_factory=EvalConfig)
    """Evaluation schedule and size."""
    video: VideoConfig = dataclasses.field(default_factory=VideoConfig)
    """Video schedule."""
    seed: int = 17
    """Seed for environments, shuffling and (via the training state) reproducibility."""
    checkpoint_every_steps: int = 500000
    """Call ``checkpoint_fn`` each time training passes a multiple of this many env steps."""
    stop_on_non_finite: bool = True
    """Stop with ``NonFiniteError`` (naming the metric and the step) at the first iteration
    whose losses are not finite, and refuse to checkpoint non-finite parameters (an addition
    to the seed API)."""
    devices: int | None = None
    """Train data-parallel on this many local devices (``n_envs`` and the minibatch size
    must be divisible by it); None: one device. An addition to the seed API."""

    def __post_init__(self) -> None:
        _check_top_level(self)
        chunked = self.ppo.env_step_chunk is not None
        one_device = self.devices is None or self.devices == 1
        _require(
            not chunked or one_device,
            "config.devices",
            self.devices,
            "None or 1 with ppo.env_step_chunk",
        )


@dataclasses.dataclass(frozen=True)
class DistillationConfig:
    """Core distillation algorithm parameters."""

    n_envs: int = 256
    """Parallel environments."""
    rollout_length: int = 20
    """Environment steps per env collected in each iteration."""
    total_steps: int = 512000
    """Training stops once this many env steps have been taken."""
    learning_rate: float = 0.0001
    """Adam learning rate."""
    n_epochs: int = 4
    """Passes over each rollout."""
    n_minibatches: int = 4
    """Minibatches per pass (split the env axis)."""
    gradient_clipping: float | None = None
    """Global gradient-norm clip, or None."""
    weight_decay: float | None = None
    """Decoupled weight decay, or None."""
    logging_level: LoggingLevel = LoggingLevel.LOSSES
    """Which metric groups each step reports."""
    logging_percentiles: tuple[int, ...] | None = None
    """Percentiles for distribution metrics; None reports mean and std."""

    def __post_init__(self) -> None:
        _validate_optimization("distillation", self)


@dataclasses.dataclass(frozen=True)
class DistillationTrainConfig:
    """Complete training configuration for distillation."""

    distillation: DistillationConfig = dataclasses.field(default_factory=DistillationConfig)
    """Distillation algorithm parameters."""
    eval: EvalConfig = dataclasses.field(default_factory=EvalConfig)
    """Evaluation schedule and size."""
    video: VideoConfig = dataclasses.field(default_factory=VideoConfig)
    """Video schedule."""
    seed: int = 17
    """Random seed."""
    checkpoint_every_steps: int = 500000
    """Checkpoint schedule in env steps."""
    stop_on_non_finite: bool = True
    """As ``TrainConfig.stop_on_non_finite``."""
    devices: int | None = None
    """As ``TrainConfig.devices``."""

    def __post_init__(self) -> None:
        _check_top_level(self)


def _check_top_level(config: TrainConfig | DistillationTrainConfig) -> None:
    """Checks the fields TrainConfig and DistillationTrainConfig share."""
    _require(isinstance(config.seed, int | np.integer), "seed", config.seed, "an integer")
    _positive_int("config", "checkpoint_every_steps", config.checkpoint_every_steps)
    flag = config.stop_on_non_finite
    _require(isinstance(flag, bool), "config.stop_on_non_finite", flag, "true or false")
    devices = config.devices
    ok = devices is None or (isinstance(devices, int) and not isinstance(devices, bool))
    _require(ok and (devices is None or devices > 0), "config.devices", devices, "None or > 0")


@dataclasses.dataclass
class VideoData:
    """Data passed to video callback."""

    frames: np.ndarray
    """``[T, H, W, 3]`` uint8 frames."""
    step: int
    """Training env steps when the episode was recorded."""
    episode_reward: float
    episode_length: int


@dataclasses.dataclass
class TrainResult:
    """Result of train_ppo containing final state and summary."""

    training_state: TrainingState
    final_metrics: dict[str, Any]
    eval_history: list[dict[str, Any]]
    total_steps: int
    total_iterations: int


@dataclasses.dataclass
class DistillationTrainResult:
    """Result of train_distillation containing final state and summary."""

    training_state: DistillationState
    final_metrics: dict[str, Any]
    eval_history: list[dict[str, Any]]
    total_steps: int
    total_iterations: int
