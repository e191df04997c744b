"""What differs between the training algorithms' configs and states, by algorithm name:
``Kind``, ``AlgorithmLayout`` and ``layout_for``.

The carry and the train functions look these facts up; ``registry.Algorithm`` adds the
hooks that run an algorithm (train, checkpoint, resume) on top of them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from nnx_ppo.algorithms.config import DistillationTrainConfig, TrainConfig
from nnx_ppo.algorithms.types import DistillationState, TrainingState

Kind = Literal["ppo", "distillation"]
"""The algorithms' names."""


@dataclasses.dataclass(frozen=True)
class AlgorithmLayout:
    """Where one training algorithm keeps things in its config and state.

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
    """

    name: Kind
    config_class: type
    section: str
    state_class: type
    network_field: str
    network_states_field: str
    teacher_states_field: str | None
    needs_teacher: bool

    def loop_config(self, config: Any) -> Any:
        """The section of ``config`` with the loop's parameters (``config.ppo``, ...)."""
        return getattr(config, self.section)


LAYOUTS: dict[str, AlgorithmLayout] = {
    a.name: a
    for a in (
        AlgorithmLayout(
            name="ppo",
            config_class=TrainConfig,
            section="ppo",
            state_class=TrainingState,
            network_field="networks",
            network_states_field="network_states",
            teacher_states_field=None,
            needs_teacher=False,
        ),
        AlgorithmLayout(
            name="distillation",
            config_class=DistillationTrainConfig,
            section="distillation",
            state_class=DistillationState,
            network_field="student",
            network_states_field="student_states",
            teacher_states_field="teacher_states",
            needs_teacher=True,
        ),
    )
}
"""Every algorithm's layout by name."""


def layout_for(what: Any) -> AlgorithmLayout:
    """The layout of ``what``: an algorithm's name, a config or a state (or their classes).

    Raises:
        ValueError: If ``what`` is none of these.
    """
    if isinstance(what, str):
        if what in LAYOUTS:
            return LAYOUTS[what]
        raise ValueError(f"unknown algorithm {what!r}; known: {', '.join(LAYOUTS)}")
    cls = what if isinstance(what, type) else type(what)
    for layout in LAYOUTS.values():
        if issubclass(cls, layout.config_class | layout.state_class):
            return layout
    raise ValueError(f"no algorithm trains with a {cls.__name__}")
