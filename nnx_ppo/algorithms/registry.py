"""The training algorithms as records: what differs between PPO and distillation, looked up
instead of branched on.

Each ``Algorithm`` names its config class and the section of it that holds the loop's
parameters (``TrainConfig.ppo``, ``DistillationTrainConfig.distillation``), its public state
class and which of that state's fields the host loop carries, and its hooks: train, start a
checkpoint callback, load a state to resume from a checkpoint. ``algorithm_for`` finds the
record of a name, a config, a state, or one of their classes.

The hooks import the modules that implement them at their first call, because those modules
(``training``, ``distillation``, ``carry``) look this registry up themselves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

from nnx_ppo.algorithms.config import DistillationTrainConfig, TrainConfig
from nnx_ppo.algorithms.types import DistillationState, TrainingState

__all__ = ["ALGORITHMS", "Algorithm", "Kind", "algorithm_for"]

Kind = Literal["ppo", "distillation"]
"""The algorithms' names."""


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """One training algorithm.

    Attributes:
        name: The spec's ``kind`` and ``LoopCarry.kind`` (``"ppo"``, ``"distillation"``).
        config_class: Its complete training config (``TrainConfig``, ...).
        section: The config field holding the loop's parameters (``n_envs``,
            ``total_steps``, ...).
        state_class: Its public training state (``TrainingState``, ...).
        network_field: The state field holding the trained network.
        network_states_field: The state field holding the trained network's recurrent state.
        teacher_states_field: The state field holding the teacher's recurrent state (carried
            in ``LoopCarry.teacher_states``), or None.
        needs_teacher: Whether ``train`` and ``load_state`` take a teacher network.
        train: ``train(env, networks, config, *, teacher=None, **keywords)``: the train
            function (``train_ppo``, ``train_distillation``) with its keyword arguments.
        checkpoint_fn: ``checkpoint_fn(directory, config)``: a ``checkpoint_fn`` writing
            the algorithm's checkpoints into ``directory``.
        load_state: ``load_state(path, env, networks, config, teacher=None)``: the state to
            resume from the checkpoint at ``path``, ``networks`` the template it loads into.
    """

    name: Kind
    config_class: type
    section: str
    state_class: type
    network_field: str
    network_states_field: str
    teacher_states_field: str | None
    needs_teacher: bool
    train: Callable[..., Any]
    checkpoint_fn: Callable[[str, Any], Callable[[Any, int], None]]
    load_state: Callable[..., Any]

    def loop_config(self, config: Any) -> Any:
        """The section of ``config`` with the loop's parameters (``config.ppo``, ...)."""
        return getattr(config, self.section)


def _train_ppo(env: Any, networks: Any, config: Any, *, teacher: Any = None, **kw: Any) -> Any:
    if teacher is not None:
        raise ValueError("PPO takes no teacher")
    from nnx_ppo.algorithms.training import train_ppo

    return train_ppo(env, networks, config, **kw)


def _ppo_checkpoint_fn(directory: str, config: Any) -> Callable[[Any, int], None]:
    from nnx_ppo.algorithms.checkpointing import make_checkpoint_fn

    return make_checkpoint_fn(directory, config)


def _load_ppo(path: str, env: Any, networks: Any, config: Any, teacher: Any = None) -> Any:
    from nnx_ppo.algorithms.checkpointing import load_checkpoint
    from nnx_ppo.algorithms.training import training_state_for

    template = training_state_for(env, networks, config)
    return load_checkpoint(path, template.networks, template.optimizer)["training_state"]


def _train_distillation(
    env: Any, networks: Any, config: Any, *, teacher: Any = None, **kw: Any
) -> Any:
    if teacher is None:
        raise ValueError("distillation needs a teacher")
    from nnx_ppo.algorithms.distillation import train_distillation

    return train_distillation(env, networks, teacher, config, **kw)


def _distillation_checkpoint_fn(directory: str, config: Any) -> Callable[[Any, int], None]:
    from nnx_ppo.algorithms.distillation import make_distillation_checkpoint_fn

    return make_distillation_checkpoint_fn(directory)  # its checkpoints hold no config


def _load_distillation(path: str, env: Any, networks: Any, config: Any, teacher: Any = None) -> Any:
    if teacher is None:
        raise ValueError("distillation needs a teacher")
    from nnx_ppo.algorithms.distillation import load_distillation_state

    return load_distillation_state(path, env, networks, teacher, config)


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm(
            name="ppo",
            config_class=TrainConfig,
            section="ppo",
            state_class=TrainingState,
            network_field="networks",
            network_states_field="network_states",
            teacher_states_field=None,
            needs_teacher=False,
            train=_train_ppo,
            checkpoint_fn=_ppo_checkpoint_fn,
            load_state=_load_ppo,
        ),
        Algorithm(
            name="distillation",
            config_class=DistillationTrainConfig,
            section="distillation",
            state_class=DistillationState,
            network_field="student",
            network_states_field="student_states",
            teacher_states_field="teacher_states",
            needs_teacher=True,
            train=_train_distillation,
            checkpoint_fn=_distillation_checkpoint_fn,
            load_state=_load_distillation,
        ),
    )
}
"""Every algorithm by name."""


def algorithm_for(what: Any) -> Algorithm:
    """The algorithm of ``what``: its name, a config or a state (or their classes).

    Raises:
        ValueError: If ``what`` is none of these.
    """
    if isinstance(what, str):
        if what in ALGORITHMS:
            return ALGORITHMS[what]
        raise ValueError(f"unknown algorithm {what!r}; known: {', '.join(ALGORITHMS)}")
    cls = what if isinstance(what, type) else type(what)
    for algorithm in ALGORITHMS.values():
        if issubclass(cls, algorithm.config_class | algorithm.state_class):
            return algorithm
    raise ValueError(f"no algorithm trains with a {cls.__name__}")
