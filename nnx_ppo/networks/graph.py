"""``PopulationGraph``: populations of units joined by (possibly delayed) connections.

Built in two phases: ``add_input`` / ``add_population`` / ``add_output`` and ``connect``,
then ``finalize`` (validation; the graph is frozen after it). Each step:

1. every delayed edge reads its source as it was ``delay`` steps ago, from the source's
   circular buffer (zeros until the buffer has filled);
2. in topological order over the zero-delay edges, each population sums its incoming edges'
   outputs (plus ``obs[input_from]`` for an input population) and applies its activation
   once;
3. every population with delayed outgoing edges writes its new value into its buffer.

The carry is ``{"buffers": {population: [B, D, size]}, "step": [B], "transforms": [...]}``:
one buffer per population, ``D`` its longest outgoing delay; ``step`` counts the episode's
steps modulo the buffers' common period. ``reset_state`` (at episode ends) zeroes it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.networks.base import StatefulModule, zero_loss
from nnx_ppo.networks.delay import read_slot, write_slot
from nnx_ppo.networks.feedforward import Activation, Dense, resolve_activation
from nnx_ppo.networks.precision import DEFAULT_PRECISION, check_precision, linear_kwargs
from nnx_ppo.networks.recording import ACTIVATIONS_PREFIX
from nnx_ppo.networks.types import StatefulOutput


@dataclasses.dataclass(frozen=True)
class Population:
    """One population of units (static description)."""

    name: str
    size: int
    activation: Callable[[jax.Array], jax.Array] | None
    input_from: str | None = None
    output_to: str | None = None


@dataclasses.dataclass(frozen=True)
class Edge:
    """A connection ``src -> dst`` read ``delay`` steps late through ``transforms[index]``."""

    src: str
    dst: str
    delay: int
    index: int


def _check_size(name: str, size: Any) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"population {name!r}: size must be a positive int, got {size!r}")
    return size


def zero_delay_cycle(names: list[str], edges: list[Edge]) -> list[str] | None:
    """A cycle of zero-delay edges as ``[a, b, ..., a]``, or None."""
    succ: dict[str, list[str]] = {n: [] for n in names}
    for e in edges:
        if e.delay == 0:
            succ[e.src].append(e.dst)
    color = dict.fromkeys(names, 0)  # 0 new, 1 on the stack, 2 done
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        color[n] = 1
        stack.append(n)
        for m in succ[n]:
            if color[m] == 1:
                return [*stack[stack.index(m) :], m]
            if color[m] == 0 and (found := visit(m)) is not None:
                return found
        stack.pop()
        color[n] = 2
        return None

    for n in names:
        if color[n] == 0 and (found := visit(n)) is not None:
            return found
    return None


def topological_order(names: list[str], edges: list[Edge]) -> list[str]:
    """``names`` ordered so that every zero-delay edge goes forward (Kahn, stable)."""
    indegree = dict.fromkeys(names, 0)
    for e in edges:
        if e.delay == 0:
            indegree[e.dst] += 1
    order, ready = [], [n for n in names if indegree[n] == 0]
    while ready:
        n = ready.pop(0)
        order.append(n)
        for e in edges:
            if e.delay == 0 and e.src == n:
                indegree[e.dst] -= 1
                if indegree[e.dst] == 0:
                    ready.append(e.dst)
    return order


class PopulationGraph(StatefulModule):
    """A recurrent network of named populations; output ``{output_to or name: [B, size]}``.

    With recording on (``nnx_ppo.networks.recording.with_recording``) every population's
    post-activation value is in the metrics as ``activations/<population name>``.

    Args:
        rngs: Streams for the default edge transforms (``Dense``).
        precision: The arithmetic of the default transforms' products, ``"float32"`` or
            ``"bfloat16"`` (``nnx_ppo.networks.precision``); given transforms keep their own.
    """

    def __init__(self, rngs: nnx.Rngs, *, precision: str = DEFAULT_PRECISION):
        self.rngs = rngs
        self.precision = check_precision(precision)
        self.populations: dict[str, Population] = {}
        self.edges: list[Edge] = []
        self.transforms: nnx.List[StatefulModule] = nnx.List([])
        self.finalized = False
        self.record_populations = False

    # -- building ---------------------------------------------------------------------------

    def _add(self, population: Population) -> None:
        if self.finalized:
            raise ValueError(f"population {population.name!r}: the graph is already finalized")
        if not isinstance(population.name, str) or not population.name:
            raise ValueError(
                f"a population's name must be a non-empty str, got {population.name!r}"
            )
        if population.name in self.populations:
            raise ValueError(f"population {population.name!r} is already in the graph")
        self.populations = {**self.populations, population.name: population}

    def add_input(
        self, name: str, size: int, *, input_from: str, activation: Activation = None
    ) -> None:
        """A population whose integrated input includes ``obs[input_from]`` (``[B, size]``)."""
        if not isinstance(input_from, str) or not input_from:
            raise ValueError(
                f"population {name!r}: input_from must be an obs key, got {input_from!r}"
            )
        self._add(
            Population(name, _check_size(name, size), resolve_activation(activation), input_from)
        )

    def add_population(self, name: str, size: int, *, activation: Activation = None) -> None:
        """An internal population."""
        self._add(Population(name, _check_size(name, size), resolve_activation(activation)))

    def add_output(
        self, name: str, size: int, *, output_to: str | None = None, activation: Activation = None
    ) -> None:
        """A population whose value is the graph's output ``output_to or name``."""
        key = output_to or name
        taken = [p.name for p in self.populations.values() if (p.output_to or None) == key]
        if taken:
            raise ValueError(f"population {name!r}: output {key!r} is already {taken[0]!r}'s")
        pop = Population(name, _check_size(name, size), resolve_activation(activation))
        self._add(dataclasses.replace(pop, output_to=key))

    def _population(self, name: str, role: str) -> Population:
        if name not in self.populations:
            raise ValueError(
                f"connect: unknown {role} population {name!r}; populations: "
                f"{sorted(self.populations)}"
            )
        return self.populations[name]

    def _transform_for(self, src: Population, dst: Population, transform: Any) -> StatefulModule:
        if transform is None:
            return Dense(src.size, dst.size, self.rngs, **linear_kwargs(self.precision))
        if not isinstance(transform, StatefulModule):
            raise ValueError(
                f"connection {src.name!r} -> {dst.name!r}: transform must be a StatefulModule"
            )

        def call() -> Any:
            return transform(transform.initialize_state(1), jnp.zeros((1, src.size))).output

        out = jax.eval_shape(call)
        if not hasattr(out, "shape") or out.shape != (1, dst.size):
            shape = getattr(out, "shape", type(out).__name__)
            raise ValueError(
                f"connection {src.name!r} -> {dst.name!r}: its transform maps [B, {src.size}] "
                f"(size of {src.name!r}) to {shape}, but {dst.name!r} has size {dst.size}"
            )
        return transform

    def connect(
        self,
        src: str,
        dst: str,
        *,
        transform: StatefulModule | None = None,
        delay: int = 0,
        reciprocal: bool = False,
    ) -> None:
        """An edge ``src -> dst`` (and ``dst -> src`` with ``reciprocal``, its own transform
        and the same delay); ``delay=k`` reads ``src`` as it was ``k`` steps ago.

        The default transform is ``Dense(src.size, dst.size)`` (a fresh one for the reverse
        edge); a given ``transform`` must map ``[B, src.size]`` to ``[B, dst.size]``, and
        the reverse edge of a reciprocal pair gets a copy of it (``nnx.clone``: same initial
        values, its own variables), so it must fit both ways.

        Raises:
            ValueError: for an unknown population, a negative delay, a finalized graph, or a
                transform of the wrong size (naming the edge and both sizes).
        """
        if self.finalized:
            raise ValueError(f"connection {src!r} -> {dst!r}: the graph is already finalized")
        s, d = self._population(src, "source"), self._population(dst, "destination")
        if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
            raise ValueError(
                f"connection {src!r} -> {dst!r}: delay must be an int >= 0, got {delay!r}"
            )
        pairs = [(s, d, transform)]
        if reciprocal:
            reverse = None if transform is None else nnx.clone(transform)
            pairs.append((d, s, reverse))
        for a, b, t in pairs:
            module = self._transform_for(a, b, t)
            self.edges = [*self.edges, Edge(a.name, b.name, delay, len(self.transforms))]
            self.transforms.append(module)

    def finalize(self) -> PopulationGraph:
        """Validates and freezes the graph; returns it.

        Raises:
            ValueError: for a cycle of zero-delay edges (naming its populations), a
                population that nothing drives, or a graph without outputs.
        """
        if self.finalized:
            return self
        names = list(self.populations)
        cycle = zero_delay_cycle(names, self.edges)
        if cycle is not None:
            raise ValueError(
                "zero-delay cycle through populations "
                + " -> ".join(repr(n) for n in cycle)
                + ": give one of its connections a delay >= 1"
            )
        driven = {e.dst for e in self.edges}
        for p in self.populations.values():
            if p.input_from is None and p.name not in driven:
                raise ValueError(
                    f"population {p.name!r} has no incoming connection and reads no observation"
                )
        if not any(p.output_to for p in self.populations.values()):
            raise ValueError("the graph has no output population (add_output)")
        self.order = topological_order(names, self.edges)
        depth = {n: 0 for n in names}
        for e in self.edges:
            depth[e.src] = max(depth[e.src], e.delay)
        self.buffer_depth = {n: k for n, k in depth.items() if k > 0}
        self.period = math.lcm(*self.buffer_depth.values()) if self.buffer_depth else 1
        del self.rngs  # only the default transforms needed it
        self.finalized = True
        return self

    # -- running ----------------------------------------------------------------------------

    def _require_finalized(self) -> None:
        if not self.finalized:
            raise ValueError("PopulationGraph must be finalized (graph.finalize()) before use")

    def initialize_state(self, batch_size: int) -> dict[str, Any]:
        self._require_finalized()
        buffers = {
            n: jnp.zeros((batch_size, k, self.populations[n].size), jnp.float32)
            for n, k in self.buffer_depth.items()
        }
        return {
            "buffers": buffers,
            "step": jnp.zeros((batch_size,), jnp.int32),
            "transforms": [t.initialize_state(batch_size) for t in self.transforms],
        }

    def reset_state(self, prev_state: dict[str, Any]) -> dict[str, Any]:
        return {
            "buffers": jax.tree.map(jnp.zeros_like, prev_state["buffers"]),
            "step": jnp.zeros_like(prev_state["step"]),
            "transforms": [
                t.reset_state(s)
                for t, s in zip(self.transforms, prev_state["transforms"], strict=True)
            ],
        }

    def _obs_input(self, pop: Population, x: Any) -> jax.Array:
        key = pop.input_from
        if not isinstance(x, Mapping):
            raise ValueError(
                f"input population {pop.name!r} reads obs[{key!r}], but the observation is "
                f"not a dict ({type(x).__name__})"
            )
        if key not in x:
            raise ValueError(
                f"input population {pop.name!r} reads obs[{key!r}], but the observation has "
                f"no key {key!r}; its keys: {sorted(x)}"
            )
        leaf = x[key]
        flat = leaf.reshape(leaf.shape[0], -1)
        if flat.shape[-1] != pop.size:
            raise ValueError(
                f"input population {pop.name!r} has size {pop.size}, but obs[{key!r}] has "
                f"{flat.shape[-1]} features (shape {tuple(leaf.shape[1:])})"
            )
        return flat

    def __call__(self, state: dict[str, Any], x: Any, rollout_extras: Any = None) -> StatefulOutput:
        self._require_finalized()
        n_edges = len(self.edges)
        extras_in = [None] * n_edges if rollout_extras is None else rollout_extras
        step, buffers = state["step"], state["buffers"]
        incoming: dict[str, list[jax.Array]] = {n: [] for n in self.populations}
        t_state = list(state["transforms"])
        extras_out: list[Any] = [None] * n_edges
        loss, metrics = zero_loss(), {}

        def run_edge(e: Edge, src_value: jax.Array) -> None:
            nonlocal loss
            out = self.transforms[e.index](t_state[e.index], src_value, extras_in[e.index])
            t_state[e.index], extras_out[e.index] = out.next_state, out.rollout_extras
            loss = loss + out.regularization_loss
            metrics.update(out.metrics)
            incoming[e.dst].append(out.output)

        for e in self.edges:
            if e.delay > 0:
                slot = (step - e.delay) % self.buffer_depth[e.src]
                run_edge(e, read_slot(buffers[e.src], slot))
        values: dict[str, jax.Array] = {}
        for name in self.order:
            pop = self.populations[name]
            parts = incoming[name]
            if pop.input_from is not None:
                parts = [self._obs_input(pop, x), *parts]
            total = sum(parts[1:], parts[0])
            values[name] = total if pop.activation is None else pop.activation(total)
            for e in self.edges:
                if e.delay == 0 and e.src == name:
                    run_edge(e, values[name])
        next_buffers = {
            n: write_slot(buf, step % self.buffer_depth[n], values[n]) for n, buf in buffers.items()
        }
        next_state = {
            "buffers": next_buffers,
            "step": (step + 1) % self.period,
            "transforms": t_state,
        }
        outputs = {p.output_to: values[p.name] for p in self.populations.values() if p.output_to}
        if self.record_populations:
            metrics.update({ACTIVATIONS_PREFIX + n: v for n, v in values.items()})
        return StatefulOutput(next_state, outputs, loss, metrics, extras_out)
