"""``PPOAdapter``: an action port and a value port packed into the trainer's
``PPONetworkOutput``."""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.containers import has_statistics
from nnx_ppo.networks.samplers import squashed_entropy
from nnx_ppo.networks.types import PPONetworkOutput, StatefulOutput

SAMPLER_KEYS = frozenset({"action", "log_likelihood", "raw_action", "loc", "scale"})


def is_sampler_dict(x: Any) -> bool:
    """Whether ``x`` is one sampler's output (``sampling_layers.NormalTanhSampler``)."""
    return isinstance(x, Mapping) and set(x) >= SAMPLER_KEYS


def squeeze_value(v: jax.Array) -> jax.Array:
    """A ``[B, 1]`` value as ``[B]``; ``[B]`` stays."""
    return v[..., 0] if v.ndim >= 2 and v.shape[-1] == 1 else v


def pack_actions(action_out: Any) -> tuple[dict[str, Any], dict[str, jax.Array] | None]:
    """The action port's output as ``PPONetworkOutput`` fields, and the action metrics of
    several heads (``head_metrics``; None for one head, whose sampler's metrics stand).

    One sampler dict gives the arrays as they are, and so does a dict of one sampler dict
    (a single head's action is the env's plain array action); a dict of several sampler
    dicts (one per action head, ``Map({head: sampler})``) gives dicts ``{head: [B,
    A_head]}`` of actions, raw actions and distribution parameters, and the joint
    log-likelihood of the independent heads (their sum).

    Raises:
        ValueError: if the output is neither.
    """
    if is_sampler_dict(action_out):
        heads = None
        samples = {"": action_out}
    elif (
        isinstance(action_out, Mapping)
        and len(action_out) == 1
        and all(is_sampler_dict(v) for v in action_out.values())
    ):
        heads = None
        samples = {"": next(iter(action_out.values()))}
    elif isinstance(action_out, Mapping) and all(is_sampler_dict(v) for v in action_out.values()):
        heads = list(action_out)
        samples = dict(action_out)
    else:
        raise ValueError(
            "PPOAdapter's action port must output a sampler dict (a NormalTanhSampler's "
            "output) or a dict of them, one per action head; got "
            f"{jax.tree.map(jnp.shape, action_out)}"
        )

    def field(key: str) -> Any:
        if heads is None:
            return samples[""][key]
        return {head: samples[head][key] for head in heads}

    loglik = sum(s["log_likelihood"] for s in samples.values())
    packed = {
        "actions": field("action"),
        "raw_actions": field("raw_action"),
        "loglikelihoods": loglik,
        "distribution_params": {"loc": field("loc"), "scale": field("scale")},
    }
    return packed, None if heads is None else head_metrics(samples)


def head_metrics(samples: Mapping[str, Any]) -> dict[str, jax.Array]:
    """The action metrics of several heads, ``[B]`` each: ``entropy`` (the joint
    entropy: the heads' sum, they sample independently) and ``action_std`` (the mean scale
    over all heads' dimensions), plus ``entropy/<head>`` and ``action_std/<head>``.

    A head's entropy is ``NormalTanhSampler``'s estimate recomputed from its sampler dict
    (the same arithmetic on the same arrays); ``Map`` keeps only one child's metrics under a
    name, so the samplers' own metrics cannot be told apart.
    """
    metrics: dict[str, jax.Array] = {}
    for head, s in samples.items():
        metrics[f"entropy/{head}"] = squashed_entropy(s["raw_action"], s["loc"], s["scale"])
        metrics[f"action_std/{head}"] = jnp.mean(s["scale"], axis=-1)
    entropies = [metrics[f"entropy/{head}"] for head in samples]
    metrics["entropy"] = functools.reduce(operator.add, entropies)
    scales = jnp.concatenate([s["scale"] for s in samples.values()], axis=-1)
    metrics["action_std"] = jnp.mean(scales, axis=-1)
    return metrics


class PPOAdapter(StatefulModule):
    """Runs an action port and a value port on the same input and packs a
    ``PPONetworkOutput``.

    The action port emits one sampler dict, or a dict of them (several action heads); the
    value port a ``[B, 1]`` or ``[B]`` value, or a dict of them, one per reward stream
    (trailing ``[B, 1]`` squeezed to ``[B]``). The carry, extras and ``update_statistics``
    are forwarded as ``{"action": ..., "value": ...}``. A privileged critic is a value
    port that starts with a ``utils.Filter`` of the keys only it reads.

    Args:
        action: The action port.
        value: The value port.
    """

    def __init__(self, action: StatefulModule, value: StatefulModule):
        for name, port in (("action", action), ("value", value)):
            if not isinstance(port, StatefulModule):
                raise ValueError(
                    f"PPOAdapter {name} must be a StatefulModule, got {type(port).__name__}"
                )
        self.action = action
        self.value = value

    def initialize_state(self, batch_size: int) -> dict[str, Any]:
        return {
            "action": self.action.initialize_state(batch_size),
            "value": self.value.initialize_state(batch_size),
        }

    def reset_state(self, prev_state: dict[str, Any]) -> dict[str, Any]:
        return {
            "action": self.action.reset_state(prev_state["action"]),
            "value": self.value.reset_state(prev_state["value"]),
        }

    def __call__(self, state: Any, x: Any, rollout_extras: Any = None) -> StatefulOutput:
        extras = rollout_extras or {"action": None, "value": None}
        action_out = self.action(state["action"], x, extras["action"])
        value_out = self.value(state["value"], x, extras["value"])
        reg = action_out.regularization_loss + value_out.regularization_loss
        fields, action_metrics = pack_actions(action_out.output)
        metrics = {**value_out.metrics, **action_out.metrics, **(action_metrics or {})}
        output = PPONetworkOutput(
            value_estimates=jax.tree.map(squeeze_value, value_out.output),
            regularization_loss=reg,
            metrics=metrics,
            **fields,
        )
        next_state = {"action": action_out.next_state, "value": value_out.next_state}
        new_extras = {"action": action_out.rollout_extras, "value": value_out.rollout_extras}
        return StatefulOutput(next_state, output, reg, metrics, new_extras)

    def act(self, state: dict[str, Any], x: Any) -> StatefulOutput:
        """A call for acting in a rollout: the value port runs only when it keeps a carry.

        The loss recomputes values, so a carry-less value port's are not needed to act:
        it is skipped and ``value_estimates`` are zeros of its output's shapes (as
        ``PPONetwork.act`` does). A value port with a carry still runs, to advance it.
        """
        if jax.tree.leaves(state["value"]):
            return self(state, x)
        action_out = self.action(state["action"], x, None)
        fields, action_metrics = pack_actions(action_out.output)
        metrics = {**action_out.metrics, **(action_metrics or {})}
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), self._value_shapes(state, x))
        output = PPONetworkOutput(
            value_estimates=jax.tree.map(squeeze_value, zeros),
            regularization_loss=action_out.regularization_loss,
            metrics=metrics,
            **fields,
        )
        next_state = {"action": action_out.next_state, "value": state["value"]}
        extras = {"action": action_out.rollout_extras, "value": None}
        return StatefulOutput(next_state, output, action_out.regularization_loss, metrics, extras)

    def _value_shapes(self, state: dict[str, Any], x: Any) -> Any:
        """The shapes of the value port's output for input ``x``, computed without running it."""
        graphdef, module_state = nnx.split(self.value)

        def value(module_state: Any) -> Any:
            return nnx.merge(graphdef, module_state)(state["value"], x).output

        return jax.eval_shape(value, module_state)

    def update_statistics(self, inputs: Any, mask: jax.Array | None = None) -> None:
        for port in (self.action, self.value):
            if has_statistics(port):
                port.update_statistics(inputs, mask)
