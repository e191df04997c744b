"""What the jitted training loop carries: ``LoopCarry``, and the conversions between it and
the public states (``TrainingState`` for PPO, ``DistillationState`` for distillation).

The functional NNX pattern: the trained network and its optimizer are split once into a
graph definition (static, host side) and an ``nnx.State`` (device arrays) that travels in
the carry; ``merge_state`` rebuilds module objects from it inside or outside ``jit``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import jax
import jax.numpy as jnp
from flax import nnx, struct

from nnx_ppo.algorithms.types import DistillationState, TrainingState

State = TrainingState | DistillationState
Kind = Literal["ppo", "distillation"]


@struct.dataclass
class LoopCarry:
    """The training state as plain pytrees, carried from one iteration to the next.

    Attributes:
        modules: ``nnx.State`` of ``(trained network, optimizer)``.
        network_states: The trained network's recurrent state, ``[B]`` leaves.
        env_states: The envs' states, ``[B]`` leaves.
        rng_key: The key the next iteration splits.
        steps_taken: int32 ``[]`` env steps taken so far.
        teacher_states: The teacher's recurrent state (distillation), ``[B]`` leaves; None
            for PPO.
        kind: Which public state this carry stands for (static).
    """

    modules: Any
    network_states: Any
    env_states: Any
    rng_key: jax.Array
    steps_taken: jax.Array
    teacher_states: Any = None
    kind: Kind = struct.field(pytree_node=False, default="ppo")

    if TYPE_CHECKING:  # struct.dataclass adds it at run time

        def replace(self, **changes: Any) -> LoopCarry: ...


def _modules(state: State) -> tuple[nnx.Module, nnx.Optimizer]:
    if isinstance(state, DistillationState):
        return state.student, state.optimizer
    return state.networks, state.optimizer


def carry_of(state: State, module_state: Any) -> LoopCarry:
    """The carry of ``state`` whose modules' ``nnx.State`` is ``module_state``."""
    if isinstance(state, DistillationState):
        return LoopCarry(
            module_state,
            state.student_states,
            state.env_states,
            state.rng_key,
            state.steps_taken,
            state.teacher_states,
            kind="distillation",
        )
    return LoopCarry(
        module_state, state.network_states, state.env_states, state.rng_key, state.steps_taken
    )


def split_state(state: State) -> tuple[Any, LoopCarry]:
    """``(graphdef, carry)`` of a public state. The carry's arrays are copies, so that
    donating it to the jitted loop never deletes the caller's buffers."""
    graphdef, module_state = nnx.split(_modules(state))
    return graphdef, jax.tree.map(jnp.copy, carry_of(state, module_state))


def merge_state(graphdef: Any, carry: LoopCarry) -> State:
    """The public state (with new module objects) of a carry."""
    network, optimizer = nnx.merge(graphdef, carry.modules)
    if carry.kind == "distillation":
        return DistillationState(
            student=network,
            student_states=carry.network_states,
            teacher_states=carry.teacher_states,
            env_states=carry.env_states,
            optimizer=optimizer,
            rng_key=carry.rng_key,
            steps_taken=carry.steps_taken,
        )
    return TrainingState(
        networks=network,
        network_states=carry.network_states,
        env_states=carry.env_states,
        optimizer=optimizer,
        rng_key=carry.rng_key,
        steps_taken=carry.steps_taken,
    )


def traced_step(graphdef: Any, step: Any) -> Any:
    """``step(state, extra) -> (state, metrics)`` on public states, as the chunk driver's
    ``one_iteration(carry, extra) -> (carry, metrics)``."""

    def one_iteration(carry: LoopCarry, extra: Any) -> tuple[LoopCarry, dict[str, Any]]:
        state, metrics = step(merge_state(graphdef, carry), extra)
        return carry_of(state, nnx.state(_modules(state))), metrics

    return one_iteration


def adopt(initial: State, final: State) -> State:
    """``final`` with the caller's module objects of ``initial``, updated in place to the
    trained values (their buffers were never donated)."""
    nnx.update(_modules(initial), nnx.state(_modules(final)))
    network, optimizer = _modules(initial)
    if isinstance(final, DistillationState):
        return final.replace(student=network, optimizer=optimizer)
    return final.replace(networks=network, optimizer=optimizer)


def check_n_envs(env_states: Any, n_envs: int, field: str) -> None:
    """Raises ValueError unless ``env_states`` holds ``n_envs`` envs (``field`` names the
    config field in the message)."""
    leaves = jax.tree.leaves(env_states)
    if leaves and leaves[0].shape[:1] != (n_envs,):
        raise ValueError(f"initial_state holds {leaves[0].shape[0]} envs but {field} is {n_envs}")
