"""``Policy``: a trained network's deterministic policy, and ``load`` from a checkpoint.

A ``Policy`` holds an eval-mode copy of the network (its actor, sampler and observation
normalizer; the critic never runs) and acts with one jitted call per step, in the functional
NNX pattern: the module is split once, and ``act`` is a ``jax.jit`` over the parameters, the
policy state and the observation. Nothing of training (optimizer, env, config) is needed.

Recurrent policies: the state (the actor's LSTM state) is carried by the caller, who starts
each episode from ``initial_state`` and passes back what ``act`` returned.

Everything here but ``Policy.act``'s jitted function runs on the host: ``load`` reads files.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nnx_ppo.algorithms.checkpointing import load_networks, read_network_recipe
from nnx_ppo.networks import factories
from nnx_ppo.networks.adapter import PPOAdapter, pack_actions
from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.containers import Sequential
from nnx_ppo.networks.normalizer import obs_shapes

_STEP_DIR = re.compile(r"step_(\d{10})")
_POLICY_METHODS = (
    "policy_obs_shapes",
    "policy_observation",
    "initialize_policy_state",
    "policy_action",
)


class Policy:
    """A network's deterministic policy: ``tanh`` of the action distribution's mean, the
    action the network takes in eval mode.

    Args:
        network: The trained network; a ``PPONetwork`` (or any module with its
            ``policy_*`` methods). It is copied: the caller's module is left as it is.
        step: The training env steps of the checkpoint it comes from, if any.

    Attributes:
        step: As given.
        obs_shapes: The shape of the observation the policy reads, without the batch axis
            (a tuple), or a dict of them for a dict observation. An asymmetric network's
            policy reads only its ``policy_obs_key``.
        action_size: Actions are ``[B, action_size]``, in ``[-1, 1]``; for a network with
            several action heads, ``{head: size}`` and the actions ``{head: [B, size]}``.

    Raises:
        TypeError: If ``network`` has no ``policy_*`` methods and no recipe (a composed
            network made by ``nnx_ppo.networks.factories``, e.g. a population graph, acts
            through its whole step in eval mode).
    """

    def __init__(self, network: nnx.Module, *, step: int | None = None):
        acting = _acting_of(network)
        copy: Any = nnx.clone(network)  # a snapshot: later changes to network stay there
        copy.eval()
        self.network = copy
        """The eval-mode copy that acts (read it, do not change it)."""
        self.step = step
        self.action_size: int | dict[str, int]
        self._obs_key: dict[str, Any] = {}  # policy_action's keywords: see _acting_of
        if acting is None:
            self.obs_shapes = copy.policy_obs_shapes()
            self.action_size = int(copy.sampler.action_size)
        else:
            self.obs_shapes, self.action_size, self._obs_key = acting
        self._composed = acting is not None
        self._graphdef, self._params = nnx.split(copy)
        self._act = jax.jit(functools.partial(_act, self._graphdef, **self._obs_key))

    def initial_state(self, batch_size: int) -> Any:
        """The policy state at the start of an episode for ``batch_size`` envs: a pytree of
        ``[batch_size, ...]`` arrays (the empty tuple for a feed-forward policy)."""
        if self._composed:
            state = policy_carry(self.network, self.network.initialize_state(batch_size))
            return state if jax.tree.leaves(state) else ()
        return self.network.initialize_policy_state(batch_size)

    def observation(self, obs: Any) -> Any:
        """The part of ``obs`` (an env's observation) the policy reads, as ``act`` and the
        exported programs take it: for an asymmetric network, the ``policy_obs_key`` entry
        of a dict (an array is taken to be that entry already); all of it otherwise."""
        if self._obs_key and isinstance(obs, Mapping):
            obs = obs[self._obs_key["obs_key"]]
        if self._composed:
            return jax.tree.map(jnp.asarray, obs)
        return jax.tree.map(jnp.asarray, self.network.policy_observation(obs))

    def act(self, state: Any, obs: Any) -> tuple[Any, jax.Array]:
        """One step: ``(next state, action)`` for observations ``obs`` (``[B, ...]``
        leaves; an env's whole observation, or ``observation(obs)``). The action is ``[B,
        action_size]``, or ``{head: [B, size]}`` for a network with several action heads.

        Raises:
            ValueError: If the observation's shapes are not ``[B, *obs_shapes]``.
        """
        policy_obs = self.observation(obs)
        _check_shapes(policy_obs, self.obs_shapes)
        return self._act(self._params, state, policy_obs)

    def step_fn(self) -> Callable[[Any, Any], tuple[Any, jax.Array]]:
        """``act`` as a pure function ``(state, policy_obs) -> (state, action)`` with the
        parameters as constants: what the exports trace."""
        return functools.partial(policy_action, self.network, **self._obs_key)


def policy_action(
    network: Any,
    state: Any,
    policy_obs: Any,
    *,
    obs_key: str | None = None,
    env_obs_shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> tuple[Any, jax.Array]:
    """``(next state, action)`` of ``network`` in eval mode: its ``policy_action`` where it
    has one (``PPONetwork``: the actor alone); for a composed ``Sequential([..., PPOAdapter])``
    its layers up to the adapter and the adapter's action port (the value port never runs;
    its carry stays); else the whole network's step. Samplers are deterministic in eval
    mode. ``state`` is the whole carry of a composed network or its ``policy_carry``; the
    next state has the same structure.

    With ``obs_key`` (an asymmetric network, whose action port reads that key alone),
    ``policy_obs`` is that key's array and the other keys of ``env_obs_shapes`` are given as
    zeros: the observation normalizer treats each feature on its own and the action port
    drops them, so they change nothing.
    """
    if callable(getattr(network, "policy_action", None)):
        return network.policy_action(state, policy_obs)
    if obs_key is not None and env_obs_shapes is not None:
        policy_obs = {
            key: policy_obs if key == obs_key else _zeros_like_batch(policy_obs, shape)
            for key, shape in env_obs_shapes.items()
        }
    initial = policy_carry(network, network.initialize_state(1))
    carry_less = not jax.tree.leaves(state) and not jax.tree.leaves(initial)
    if carry_less:  # a feed-forward policy's state is (), whatever its carry's structure
        state = initial
    adapter = network.layers[-1] if isinstance(network, Sequential) else None
    if isinstance(adapter, PPOAdapter):
        next_state, actions = _action_port_step(network, adapter, state, policy_obs)
    else:
        out = network(state, policy_obs)
        next_state, actions = out.next_state, out.output.actions
    return (() if carry_less else next_state), actions


def policy_carry(network: Any, state: Any) -> Any:
    """The part of a composed network's carry ``state`` that acting reads and writes: for
    ``Sequential([..., PPOAdapter])`` without the adapter's value-port carry (the value
    never runs when acting; an LSTM critic's ``(c, h)`` is no policy state), else all."""
    adapter = network.layers[-1] if isinstance(network, Sequential) else None
    if not isinstance(adapter, PPOAdapter):
        return state
    return [*state[:-1], {"action": state[-1]["action"]}]


def _action_port_step(
    network: Sequential, adapter: PPOAdapter, state: list[Any], obs: Any
) -> tuple[Any, Any]:
    """``(next state, actions)`` of ``network = Sequential([*layers, adapter])`` without
    the adapter's value port (its carry, where ``state`` holds one, is passed on as it
    is; ``policy_carry`` leaves it out)."""
    x, next_state = obs, []
    for layer, carry in zip(list(network.layers)[:-1], state[:-1], strict=True):
        out = layer(carry, x)
        next_state.append(out.next_state)
        x = out.output
    action_out = adapter.action(state[-1]["action"], x)
    fields, _ = pack_actions(action_out.output)
    next_state.append({**state[-1], "action": action_out.next_state})
    return next_state, fields["actions"]


def _zeros_like_batch(x: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Zeros ``[B, *shape]`` for ``x``'s batch ``B``, built by broadcasting (no shape from
    ``B``, so that a symbolic batch axis, as in the ONNX export, stays symbolic)."""
    per_env = jnp.zeros_like(x[(slice(None),) + (0,) * (x.ndim - 1)])
    return jnp.expand_dims(per_env, tuple(range(1, 1 + len(shape)))) + jnp.zeros(shape, x.dtype)


def _acting_of(network: Any) -> tuple[Any, int | dict[str, int], dict[str, Any]] | None:
    """None for a network with the ``policy_*`` methods; for a composed one (a
    ``StatefulModule`` made by a factory here: an MLP actor-critic, a population graph) the
    observation shapes and the action size its recipe records, and ``policy_action``'s
    keywords: ``obs_key`` and ``env_obs_shapes`` for an asymmetric network (its recipe's
    ``policy_obs_key`` with a dict observation; the policy then reads that key alone), else
    none.

    Raises:
        TypeError: For a network that is neither.
    """
    if all(callable(getattr(network, m, None)) for m in _POLICY_METHODS):
        return None
    recipe = factories.recipe_of(network)
    if not isinstance(network, StatefulModule) or recipe is None:
        missing = [m for m in _POLICY_METHODS if not callable(getattr(network, m, None))]
        raise TypeError(
            f"a Policy needs a network with the methods {list(_POLICY_METHODS)} "
            f"(as PPONetwork has) or a composed network made by nnx_ppo.networks.factories "
            f"(it records its sizes); {type(network).__name__} lacks {missing}"
        )
    shapes = obs_shapes(recipe["obs_size"])
    key = recipe["fields"].get("policy_obs_key")
    if isinstance(shapes, dict) and isinstance(key, str) and key in shapes:
        keywords = {"obs_key": key, "env_obs_shapes": shapes}
        return shapes[key], action_size_of(recipe["action_size"]), keywords
    return shapes, action_size_of(recipe["action_size"]), {}


def action_size_of(size: Any) -> int | dict[str, int]:
    """A recorded action size as an int, or ``{head: int}`` for several action heads."""
    if isinstance(size, Mapping):
        return {str(head): int(n) for head, n in size.items()}
    return int(size)


def _act(
    graphdef: Any, params: Any, state: Any, policy_obs: Any, **obs_key: Any
) -> tuple[Any, jax.Array]:
    return policy_action(nnx.merge(graphdef, params), state, policy_obs, **obs_key)


def _check_shapes(policy_obs: Any, shapes: Any) -> None:
    """A ValueError naming the shapes when ``policy_obs`` is not ``[B, *shapes]``."""
    expected = shapes if isinstance(shapes, dict) else {"observation": shapes}
    given = policy_obs if isinstance(shapes, dict) else {"observation": policy_obs}
    if not isinstance(given, dict) or set(given) != set(expected):
        keys = sorted(given) if isinstance(given, dict) else type(given).__name__
        raise ValueError(f"the policy reads the observation keys {sorted(expected)}, got {keys}")
    batches = set()
    for name, shape in expected.items():
        got = tuple(np.shape(given[name]))
        if got[1:] != tuple(shape) or len(got) != len(shape) + 1:
            raise ValueError(f"{name} must be [B, *{tuple(shape)}], got shape {got}")
        batches.add(got[0])
    if len(batches) > 1:
        raise ValueError(f"the observation's entries have different batch sizes {batches}")


def find_checkpoint(path: str | os.PathLike[str], step: int | None = None) -> str:
    """The checkpoint directory that ``path`` names: ``path`` itself when it is one, else
    its ``step_XXXXXXXXXX`` subdirectory (a run's checkpoint directory), else that of its
    ``checkpoints/`` (a service run's directory); the one of ``step``, or the newest.

    Raises:
        FileNotFoundError: If there is no such checkpoint (the message lists the steps
            there are).
    """
    path = os.path.abspath(os.fspath(path))
    if os.path.isfile(os.path.join(path, "metadata.pkl")):
        match = _STEP_DIR.fullmatch(os.path.basename(path))
        if step is not None and match is not None and int(match.group(1)) != step:
            raise FileNotFoundError(f"{path} is the checkpoint of step {int(match.group(1))}")
        return path
    for directory in (path, os.path.join(path, "checkpoints")):
        steps = _steps_in(directory)
        if steps:
            if step is None:
                return os.path.join(directory, f"step_{max(steps):010d}")
            if step in steps:
                return os.path.join(directory, f"step_{step:010d}")
            raise FileNotFoundError(
                f"{directory} has no checkpoint of step {step}; its steps: {sorted(steps)}"
            )
    raise FileNotFoundError(
        f"{path} is neither a checkpoint nor a directory of step_* checkpoints (or one with "
        "a checkpoints/ folder of them)"
    )


def _steps_in(directory: str) -> list[int]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = [_STEP_DIR.fullmatch(n) for n in names]
    return [
        int(m.group(1))
        for m in found
        if m is not None and os.path.isfile(os.path.join(directory, m.group(0), "metadata.pkl"))
    ]


def load(
    path: str | os.PathLike[str], step: int | None = None, networks: nnx.Module | None = None
) -> Policy:
    """The policy of a checkpoint written by ``make_checkpoint_fn`` (PPO) or a distillation
    run (its student).

    Args:
        path: A checkpoint directory (``.../step_0000500000``), or a directory of them (the
            one ``make_checkpoint_fn`` writes to, or a service run's directory holding
            ``checkpoints/``).
        step: The checkpoint's step in that directory; None: the newest.
        networks: A network with the checkpoint's architecture, for a checkpoint that does
            not record how its network was built (one written before nnx-ppo recorded it,
            or whose network was not made by ``nnx_ppo.networks.factories``). It is copied,
            never changed. None: the checkpoint's recipe rebuilds the network.

    Returns:
        A ``Policy`` with the checkpoint's parameters and normalizer statistics.

    Raises:
        FileNotFoundError: If there is no such checkpoint.
        ValueError: If the checkpoint records no recipe and no ``networks`` is given, or
            if the network does not match the checkpoint (the message names the
            variables that differ).
    """
    checkpoint = find_checkpoint(path, step)
    if networks is None:
        recipe = read_network_recipe(checkpoint)
        if recipe is None:
            raise ValueError(
                f"{checkpoint} does not record how its network was built (written by an "
                "older nnx-ppo, or a network not made by nnx_ppo.networks.factories): pass "
                "networks=<a network of the same architecture>"
            )
        network: Any = factories.rebuild(recipe)
    else:
        network = nnx.clone(networks)  # load_networks writes into it
    loaded_step = load_networks(checkpoint, network)
    return Policy(network, step=loaded_step)
