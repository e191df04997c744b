"""A population-graph actor-critic from a JSON description (a run spec's ``network.kind:
"graph"``).

The description names populations and connections the way ``graph.PopulationGraph``'s
builder does, plus which graph outputs parameterise the policy and the value::

    {"kind": "graph", "normalize_obs": true,
     "populations": [{"name": "in", "size": 4, "input_from": "state"},
                     {"name": "hidden", "size": 32, "activation": "swish"},
                     {"name": "arm", "size": 4, "output_to": "arm"},
                     {"name": "critic", "size": 1, "output_to": "value"}],
     "connections": [{"src": "in", "dst": "hidden"},
                     {"src": "hidden", "dst": "hidden", "delay": 1},
                     {"src": "hidden", "dst": "arm"}, {"src": "hidden", "dst": "critic"}],
     "actions": {"arm": "arm"}, "value": "value"}

The network is ``Sequential([Normalizer?, PopulationGraph, PPOAdapter])``: an action head's
output population holds a tanh-Gaussian's mean and raw std (``2 * action_size`` units); for
an env with dict actions (``action_size`` ``{head: size}``) ``actions`` names one output per
env head and the action port is ``Map({head: NormalTanhSampler})``. The value output has
one unit (or, for an env with reward streams, ``value`` maps each stream to an output). An
array observation is the graph's obs key ``"obs"``.

``graph_problems`` finds every mistake at once as ``(loc, message)`` with ``loc`` a path into
the description (``("connections", 3, "delay")``), before anything is built: what the
service turns into one 422 and ``make_graph_actor_critic`` raises as ``GraphSpecError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from flax import nnx

from nnx_ppo.networks.adapter import PPOAdapter
from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.containers import Sequential
from nnx_ppo.networks.graph import Edge, PopulationGraph, zero_delay_cycle
from nnx_ppo.networks.layers import ACTIVATIONS
from nnx_ppo.networks.normalizer import Normalizer, obs_shapes
from nnx_ppo.networks.precision import DEFAULT_PRECISION
from nnx_ppo.networks.sampling_layers import NormalTanhSampler
from nnx_ppo.networks.utils import Filter, Flattener, Map

Loc = tuple[str | int, ...]
Problem = tuple[Loc, str]

ARRAY_OBS_KEY = "obs"
"""The obs key an input population names when the env's observation is one array."""
MAX_POPULATIONS = 256
MAX_CONNECTIONS = 4096
MAX_SIZE = 65536
MAX_DELAY = 1000


class GraphSpecError(ValueError):
    """A graph description with mistakes; ``problems`` lists them as ``(loc, message)``."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        super().__init__(
            "; ".join(f"{'.'.join(map(str, loc)) or 'network'}: {msg}" for loc, msg in problems)
        )


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _obs_features(obs_size: Any) -> dict[str, int]:
    """Features per obs key (``{"obs": n}`` for an array observation)."""
    shapes = obs_shapes(obs_size)
    if not isinstance(shapes, dict):
        shapes = {ARRAY_OBS_KEY: shapes}
    features = {}
    for key, shape in shapes.items():
        n = 1
        for d in shape:
            n *= d
        features[key] = n
    return features


def _population_problems(
    populations: Any, features: dict[str, int]
) -> tuple[list[Problem], dict[str, dict[str, Any]]]:
    """Problems of ``populations``, and the populations by name (every one whose name is
    valid, so that connections to a population with another mistake are not refused too)."""
    if not isinstance(populations, list) or not populations:
        return [(("populations",), "a non-empty list of populations")], {}
    if len(populations) > MAX_POPULATIONS:
        return [(("populations",), f"at most {MAX_POPULATIONS} populations")], {}
    problems: list[Problem] = []
    valid: dict[str, dict[str, Any]] = {}
    outputs: dict[str, str] = {}
    allowed = {"name", "size", "activation", "input_from", "output_to"}
    for i, pop in enumerate(populations):
        at: Loc = ("populations", i)
        if not isinstance(pop, Mapping):
            problems.append((at, "a population is an object {name, size, ...}"))
            continue
        for key in sorted(set(pop) - allowed):
            problems.append(((*at, key), f"unknown field; a population has {sorted(allowed)}"))
        name, size = pop.get("name"), pop.get("size")
        if not isinstance(name, str) or not name or len(name) > 100:
            problems.append(((*at, "name"), "a non-empty name (at most 100 characters)"))
        elif name in valid:
            problems.append(((*at, "name"), f"population {name!r} is named twice"))
        else:
            valid[name] = dict(pop)
        if not _is_int(size) or not 1 <= size <= MAX_SIZE:
            problems.append(((*at, "size"), f"size must be an integer in 1..{MAX_SIZE}"))
        activation = pop.get("activation")
        if activation is not None and activation not in ACTIVATIONS:
            problems.append(
                ((*at, "activation"), f"activation must be one of {sorted(ACTIVATIONS)} or null")
            )
        source, target = pop.get("input_from"), pop.get("output_to")
        if source is not None:
            if source not in features:
                problems.append(
                    (
                        (*at, "input_from"),
                        f"the env's observation has no key {source!r}; its keys: "
                        f"{sorted(features)}",
                    )
                )
            elif _is_int(size) and size != features[source]:
                problems.append(
                    (
                        (*at, "size"),
                        f"input population {name!r} reads obs[{source!r}], which has "
                        f"{features[source]} features, but its size is {size}",
                    )
                )
        if target is not None:
            if source is not None:
                problems.append(
                    ((*at, "output_to"), "an input population cannot also be an output")
                )
            elif not isinstance(target, str) or not target:
                problems.append(((*at, "output_to"), "output_to names an output (a string)"))
            elif target in outputs:
                problems.append(
                    ((*at, "output_to"), f"output {target!r} is already {outputs[target]!r}'s")
                )
            else:
                outputs[target] = str(name)
    return problems, valid


def _edges(
    connections: Any, populations: dict[str, dict[str, Any]]
) -> tuple[list[Problem], list[tuple[int, Edge]]]:
    """Problems of ``connections`` and the valid edges (with the connection's index)."""
    if not isinstance(connections, list):
        return [(("connections",), "a list of connections {src, dst, delay}")], []
    if len(connections) > MAX_CONNECTIONS:
        return [(("connections",), f"at most {MAX_CONNECTIONS} connections")], []
    problems: list[Problem] = []
    edges: list[tuple[int, Edge]] = []
    allowed = {"src", "dst", "delay", "reciprocal"}
    for i, conn in enumerate(connections):
        at: Loc = ("connections", i)
        if not isinstance(conn, Mapping):
            problems.append((at, "a connection is an object {src, dst, delay}"))
            continue
        found = [
            ((*at, k), f"unknown field; a connection has {sorted(allowed)}")
            for k in sorted(set(conn) - allowed)
        ]
        for end in ("src", "dst"):
            if conn.get(end) not in populations:
                found.append(
                    (
                        (*at, end),
                        f"no population {conn.get(end)!r}; populations: {sorted(populations)}",
                    )
                )
        delay, reciprocal = conn.get("delay", 0), conn.get("reciprocal", False)
        if not _is_int(delay) or not 0 <= delay <= MAX_DELAY:
            found.append(((*at, "delay"), f"delay must be an integer in 0..{MAX_DELAY}"))
        if not isinstance(reciprocal, bool):
            found.append(((*at, "reciprocal"), "reciprocal must be true or false"))
        problems.extend(found)
        if not found:
            src, dst = conn["src"], conn["dst"]
            edges.append((i, Edge(src, dst, delay, 0)))
            if reciprocal:
                edges.append((i, Edge(dst, src, delay, 0)))
    return problems, edges


def _output_sizes(populations: dict[str, dict[str, Any]]) -> dict[str, int]:
    return {
        p["output_to"]: p["size"]
        for p in populations.values()
        if isinstance(p.get("output_to"), str) and _is_int(p.get("size"))
    }


def _action_problems(
    actions: Mapping[str, Any], outputs: dict[str, int], action_size: int | Mapping[str, int]
) -> list[Problem]:
    """The ``actions`` entries that do not fit the env: one head for an env that takes one
    action array, the env's heads (``{head: size}``) for one that takes a dict of them, and
    each head's output ``2 * size`` units."""
    problems: list[Problem] = []
    if isinstance(action_size, Mapping):
        sizes = dict(action_size)
        for head in sizes:
            if head not in actions:
                problems.append(
                    (
                        ("actions", head),
                        f"the env's action head {head!r} has no output; the env's heads: "
                        f"{sorted(sizes)}",
                    )
                )
        for head in actions:
            if head not in sizes:
                problems.append(
                    (
                        ("actions", head),
                        f"the env has no action head {head!r}; its heads: {sorted(sizes)}",
                    )
                )
    elif len(actions) > 1:
        return [
            (
                ("actions",),
                f"the env takes one action array of {action_size}: actions maps one head to "
                f"an output, got {len(actions)} heads {sorted(actions)}",
            )
        ]
    else:
        sizes = dict.fromkeys(actions, action_size)
    for head, output in actions.items():
        if head not in sizes:
            continue
        if output not in outputs:
            problems.append(
                (("actions", head), f"no output {output!r}; outputs: {sorted(outputs)}")
            )
        elif outputs[output] != 2 * sizes[head]:
            problems.append(
                (
                    ("actions", head),
                    f"output {output!r} has {outputs[output]} units; a head for "
                    f"{sizes[head]} actions needs {2 * sizes[head]} (a mean and a raw std "
                    "per action)",
                )
            )
    return problems


def _head_problems(
    description: Mapping[str, Any],
    outputs: dict[str, int],
    action_size: int | Mapping[str, int],
    reward_streams: Sequence[str] | None,
) -> list[Problem]:
    actions = description.get("actions")
    if not isinstance(actions, Mapping) or not actions:
        problems: list[Problem] = [
            (("actions",), 'maps an action head to an output: {"arm": "arm"}')
        ]
    else:
        problems = _action_problems(actions, outputs, action_size)
    value = description.get("value", "value")
    if reward_streams:
        if not isinstance(value, Mapping) or set(value) != set(reward_streams):
            return [
                *problems,
                (
                    ("value",),
                    f"the env's reward has streams {list(reward_streams)}: value maps each "
                    "to an output of one unit",
                ),
            ]
        named = dict(value)
    elif not isinstance(value, str):
        return [*problems, (("value",), "value names the output of one unit (a string)")]
    else:
        named = {"": value}
    for stream, output in named.items():
        loc: Loc = ("value", stream) if stream else ("value",)
        if output not in outputs:
            problems.append((loc, f"no output {output!r}; outputs: {sorted(outputs)}"))
        elif outputs[output] != 1:
            problems.append((loc, f"output {output!r} has {outputs[output]} units, not 1"))
    return problems


def graph_problems(
    description: Mapping[str, Any],
    obs_size: Any,
    action_size: int | Mapping[str, int],
    reward_streams: Sequence[str] | None = None,
) -> list[Problem]:
    """Every mistake in a graph description, as ``(loc, message)``; empty when it builds."""
    problems, populations = _population_problems(
        description.get("populations"), _obs_features(obs_size)
    )
    edge_problems, edges = _edges(description.get("connections", []), populations)
    problems += edge_problems
    plain = [e for _, e in edges]
    cycle = zero_delay_cycle(list(populations), plain)
    if cycle is not None:
        first = next(i for i, e in edges if e.delay == 0 and (e.src, e.dst) == tuple(cycle[:2]))
        problems.append(
            (
                ("connections", first, "delay"),
                "zero-delay cycle through populations "
                + " -> ".join(repr(n) for n in cycle)
                + ": give one of its connections a delay >= 1",
            )
        )
    if not edge_problems:
        driven = {e.dst for e in plain}
        for i, pop in enumerate(description.get("populations") or []):
            name = pop.get("name") if isinstance(pop, Mapping) else None
            if name in populations and pop.get("input_from") is None and name not in driven:
                problems.append(
                    (
                        ("populations", i),
                        f"population {name!r} has no incoming connection and reads no observation",
                    )
                )
    if not problems or populations:
        problems += _head_problems(
            description, _output_sizes(populations), action_size, reward_streams
        )
    return problems


def _whole(x: Any) -> Any:
    return x


def _action_port(
    actions: Mapping[str, str], rngs: nnx.Rngs, entropy_weight: float, min_std: float
) -> StatefulModule:
    """One head: its output's tanh-normal sampler (the env's plain array action). Several:
    ``Map({head: sampler})`` over the heads' outputs (a dict action)."""
    if len(actions) == 1:
        (action_output,) = actions.values()
        return Sequential(
            [
                Filter({"mean_and_std": action_output}),
                Flattener(),
                NormalTanhSampler(rngs, entropy_weight, min_std=min_std),
            ]
        )
    samplers = {h: NormalTanhSampler(rngs, entropy_weight, min_std=min_std) for h in actions}
    return Sequential([Filter(dict(actions)), Map(samplers)])


def make_graph_actor_critic(
    obs_size: Any,
    action_size: int | Mapping[str, int],
    *,
    rngs: nnx.Rngs,
    populations: Sequence[Mapping[str, Any]],
    connections: Sequence[Mapping[str, Any]] = (),
    actions: Mapping[str, str],
    value: str | Mapping[str, str] = "value",
    normalize_obs: bool = True,
    entropy_weight: float = 1e-2,
    min_std: float = 1e-3,
    reward_streams: Sequence[str] | None = None,
    precision: str = DEFAULT_PRECISION,
) -> StatefulModule:
    """A ``PopulationGraph`` actor-critic from its description (see the module docstring);
    ``precision`` (``"float32"`` or ``"bfloat16"``) is the arithmetic of its edges' products.

    Raises:
        GraphSpecError: listing every mistake of the description (``graph_problems``).
    """
    description = {
        "populations": list(populations),
        "connections": list(connections),
        "actions": actions,
        "value": value,
    }
    problems = graph_problems(description, obs_size, action_size, reward_streams)
    if problems:
        raise GraphSpecError(problems)
    graph = PopulationGraph(rngs, precision=precision)
    for pop in populations:
        name, size, activation = pop["name"], pop["size"], pop.get("activation")
        if pop.get("input_from") is not None:
            graph.add_input(name, size, input_from=pop["input_from"], activation=activation)
        elif pop.get("output_to") is not None:
            graph.add_output(name, size, output_to=pop["output_to"], activation=activation)
        else:
            graph.add_population(name, size, activation=activation)
    for conn in connections:
        graph.connect(
            conn["src"],
            conn["dst"],
            delay=conn.get("delay", 0),
            reciprocal=conn.get("reciprocal", False),
        )
    graph.finalize()
    action_port = _action_port(actions, rngs, entropy_weight, min_std)
    if isinstance(value, str):
        value_port: StatefulModule = Sequential([Filter({"value": value}), Flattener()])
    else:
        value_port = Filter(dict(value))
    layers: list[StatefulModule] = []
    if normalize_obs:
        layers.append(Normalizer(obs_size))
    if not isinstance(obs_shapes(obs_size), dict):
        layers.append(Filter({ARRAY_OBS_KEY: _whole}))
    layers += [graph, PPOAdapter(action=action_port, value=value_port)]
    return Sequential(layers)
