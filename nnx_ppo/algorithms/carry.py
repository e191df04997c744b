"""What the jitted training loop carries: ``LoopCarry``, and the conversions between it and
the public states (``TrainingState`` for PPO, ``DistillationState`` for distillation).

The functional NNX pattern: the trained network and its optimizer are split once into a
graph definition (static, host side) and an ``nnx.State`` (device arrays) that travels in
the carry; ``merge_state`` rebuilds module objects from it inside or outside ``jit``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from flax import nnx, struct

from nnx_ppo.algorithms.algorithm_layout import Kind as Kind
from nnx_ppo.algorithms.algorithm_layout import layout_for
from nnx_ppo.algorithms.types import DistillationState, TrainingState

State = TrainingState | DistillationState


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
    return getattr(state, layout_for(state).network_field), state.optimizer


def carry_of(state: State, module_state: Any) -> LoopCarry:
    """The carry of ``state`` whose modules' ``nnx.State`` is ``module_state``."""
    algorithm = layout_for(state)
    teacher = algorithm.teacher_states_field
    return LoopCarry(
        module_state,
        getattr(state, algorithm.network_states_field),
        state.env_states,
        state.rng_key,
        state.steps_taken,
        None if teacher is None else getattr(state, teacher),
        kind=algorithm.name,
    )


def split_state(state: State) -> tuple[Any, LoopCarry]:
    """``(graphdef, carry)`` of a public state. The carry's arrays are copies, so that
    donating it to the jitted loop never deletes the caller's buffers."""
    graphdef, module_state = nnx.split(_modules(state))
    return graphdef, jax.tree.map(jnp.copy, carry_of(state, module_state))


def merge_state(graphdef: Any, carry: LoopCarry) -> State:
    """The public state (with new module objects) of a carry."""
    network, optimizer = nnx.merge(graphdef, carry.modules)
    algorithm = layout_for(carry.kind)
    fields = {
        algorithm.network_field: network,
        algorithm.network_states_field: carry.network_states,
    }
    if algorithm.teacher_states_field is not None:
        fields[algorithm.teacher_states_field] = carry.teacher_states
    state: State = algorithm.state_class(
        **fields,
        env_states=carry.env_states,
        optimizer=optimizer,
        rng_key=carry.rng_key,
        steps_taken=carry.steps_taken,
    )
    return state


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
    return final.replace(**{layout_for(final).network_field: network}, optimizer=optimizer)


def check_n_envs(env_states: Any, n_envs: int, field: str) -> None:
    """Raises ValueError unless ``env_states`` holds ``n_envs`` envs (``field`` names the
    config field in the message)."""
    leaves = jax.tree.leaves(env_states)
    if leaves and leaves[0].shape[:1] != (n_envs,):
        raise ValueError(f"initial_state holds {leaves[0].shape[0]} envs but {field} is {n_envs}")
