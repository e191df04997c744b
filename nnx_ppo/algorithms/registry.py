"""The training algorithms as records: what differs between PPO and distillation, looked up
instead of branched on.

Each ``Algorithm`` is an ``AlgorithmLayout`` (its config class and the section of it that
holds the loop's parameters, ``TrainConfig.ppo``, ``DistillationTrainConfig.distillation``;
its public state class and which of that state's fields the host loop carries) plus its
hooks: train, start a checkpoint callback, load a state to resume from a checkpoint.
``algorithm_for`` finds the record of a name, a config, a state, or one of their classes.

This module sits above the modules that implement the hooks (``training``,
``distillation``, ``checkpointing``); those look up the layouts in ``algorithm_layout``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from nnx_ppo.algorithms.algorithm_layout import LAYOUTS, AlgorithmLayout, layout_for
from nnx_ppo.algorithms.algorithm_layout import Kind as Kind
from nnx_ppo.algorithms.checkpointing import load_checkpoint, make_checkpoint_fn
from nnx_ppo.algorithms.distillation import (
    load_distillation_state,
    make_distillation_checkpoint_fn,
    train_distillation,
)
from nnx_ppo.algorithms.training import train_ppo, training_state_for

__all__ = ["ALGORITHMS", "Algorithm", "Kind", "algorithm_for"]


@dataclasses.dataclass(frozen=True)
class Algorithm(AlgorithmLayout):
    """One training algorithm: its layout (see ``AlgorithmLayout``) and its hooks.

    Attributes:
        train: ``train(env, networks, config, *, teacher=None, **keywords)``: the train
            function (``train_ppo``, ``train_distillation``) with its keyword arguments.
        checkpoint_fn: ``checkpoint_fn(directory, config)``: a ``checkpoint_fn`` writing
            the algorithm's checkpoints into ``directory``.
        load_state: ``load_state(path, env, networks, config, teacher=None)``: the state to
            resume from the checkpoint at ``path``, ``networks`` the template it loads into.
    """

    train: Callable[..., Any]
    checkpoint_fn: Callable[[str, Any], Callable[[Any, int], None]]
    load_state: Callable[..., Any]


def _train_ppo(env: Any, networks: Any, config: Any, *, teacher: Any = None, **kw: Any) -> Any:
    if teacher is not None:
        raise ValueError("PPO takes no teacher")
    return train_ppo(env, networks, config, **kw)


def _load_ppo(path: str, env: Any, networks: Any, config: Any, teacher: Any = None) -> Any:
    template = training_state_for(env, networks, config)
    return load_checkpoint(path, template.networks, template.optimizer)["training_state"]


def _train_distillation(
    env: Any, networks: Any, config: Any, *, teacher: Any = None, **kw: Any
) -> Any:
    if teacher is None:
        raise ValueError("distillation needs a teacher")
    return train_distillation(env, networks, teacher, config, **kw)


def _distillation_checkpoint_fn(directory: str, config: Any) -> Callable[[Any, int], None]:
    return make_distillation_checkpoint_fn(directory)  # its checkpoints hold no config


def _load_distillation(path: str, env: Any, networks: Any, config: Any, teacher: Any = None) -> Any:
    if teacher is None:
        raise ValueError("distillation needs a teacher")
    return load_distillation_state(path, env, networks, teacher, config)


def _algorithm(layout: AlgorithmLayout, **hooks: Any) -> Algorithm:
    fields = {f.name: getattr(layout, f.name) for f in dataclasses.fields(layout)}
    return Algorithm(**fields, **hooks)


ALGORITHMS: dict[str, Algorithm] = {
    "ppo": _algorithm(
        LAYOUTS["ppo"], train=_train_ppo, checkpoint_fn=make_checkpoint_fn, load_state=_load_ppo
    ),
    "distillation": _algorithm(
        LAYOUTS["distillation"],
        train=_train_distillation,
        checkpoint_fn=_distillation_checkpoint_fn,
        load_state=_load_distillation,
    ),
}
"""Every algorithm by name, in ``LAYOUTS``' order."""


def algorithm_for(what: Any) -> Algorithm:
    """The algorithm of ``what``: its name, a config or a state (or their classes).

    Raises:
        ValueError: If ``what`` is none of these.
    """
    return ALGORITHMS[layout_for(what).name]
