"""``PPONetwork``: normalizer, actor, critic and action sampler in one ``StatefulModule``."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.normalizer import Normalizer, flatten_obs
from nnx_ppo.networks.samplers import TanhNormalSampler
from nnx_ppo.networks.types import PPONetworkOutput, StatefulOutput


class PPONetwork(StatefulModule):
    """An actor-critic for PPO.

    ``obs -> normalizer -> actor -> sampler -> actions`` and ``normalizer -> critic ->
    value``. The actor and critic are any ``StatefulModule``s (MLP, LSTM stacks, ...) and
    keep separate states. ``output`` of a call is a ``PPONetworkOutput``.

    Args:
        actor: Maps features ``[B, F]`` to distribution parameters ``[B, 2A]``.
        critic: Maps features ``[B, F]`` to values ``[B, 1]``.
        sampler: Turns distribution parameters into actions.
        normalizer: Observation normalizer; None flattens observations unchanged.
        obs_shapes: Observation shapes, needed to flatten when there is no normalizer.
        value_streams: Names of the reward streams, for a critic with one output per
            stream (``[B, K]``): ``value_estimates`` is then ``{name: [B]}``. None: the critic
            has one output and ``value_estimates`` is ``[B]``.
    """

    recipe: str | None = None
    """The factory and arguments that built this network, as JSON (set by
    ``nnx_ppo.networks.factories``; ``factories.recipe_of`` reads it); None otherwise."""

    def __init__(
        self,
        actor: StatefulModule,
        critic: StatefulModule,
        sampler: TanhNormalSampler,
        normalizer: Normalizer | None,
        obs_shapes: Any,
        value_streams: tuple[str, ...] | None = None,
    ):
        self.value_streams = value_streams
        self.actor = actor
        self.critic = critic
        self.sampler = sampler
        self.normalizer = normalizer
        self.obs_shapes = obs_shapes

    def initialize_state(self, batch_size: int) -> dict[str, Any]:
        return {
            "actor": self.actor.initialize_state(batch_size),
            "critic": self.critic.initialize_state(batch_size),
        }

    def reset_state(self, state: dict[str, Any]) -> dict[str, Any]:
        return {
            "actor": self.actor.reset_state(state["actor"]),
            "critic": self.critic.reset_state(state["critic"]),
        }

    def features(self, obs: Any) -> jax.Array:
        """Flattened (and normalized, when there is a normalizer) observations."""
        if self.normalizer is None:
            return flatten_obs(obs, self.obs_shapes)
        return self.normalizer.normalize(obs)

    def actor_features(self, features: jax.Array) -> jax.Array:
        """The part of ``features`` the actor reads: all of it here."""
        return features

    def critic_features(self, features: jax.Array) -> jax.Array:
        """The part of ``features`` the critic reads: all of it here."""
        return features

    def __call__(
        self, state: dict[str, Any], obs: Any, rollout_extras: Any = None
    ) -> StatefulOutput:
        x = self.features(obs)
        actor_out = self.actor(state["actor"], self.actor_features(x))
        critic_out = self.critic(state["critic"], self.critic_features(x))
        sample = self.sampler((), actor_out.output, rollout_extras)
        reg = actor_out.regularization_loss + critic_out.regularization_loss
        reg = reg + sample.regularization_loss
        metrics = {**actor_out.metrics, **critic_out.metrics, **sample.metrics}
        output = PPONetworkOutput(
            actions=sample.output["actions"],
            raw_actions=sample.output["raw_actions"],
            loglikelihoods=sample.output["loglikelihoods"],
            value_estimates=self.value_heads(critic_out.output),
            regularization_loss=reg,
            metrics=metrics,
            distribution_params={"loc": sample.output["loc"], "scale": sample.output["scale"]},
        )
        next_state = {"actor": actor_out.next_state, "critic": critic_out.next_state}
        return StatefulOutput(next_state, output, reg, metrics, sample.rollout_extras)

    def value_heads(self, values: jax.Array) -> Any:
        """The critic's ``[B, K]`` output as ``value_estimates``: ``[B]``, or one ``[B]``
        per reward stream."""
        if self.value_streams is None:
            return values[..., 0]
        return {name: values[..., i] for i, name in enumerate(self.value_streams)}

    def act(self, state: dict[str, Any], obs: Any) -> StatefulOutput:
        """A call for acting in a rollout: the critic runs only when it keeps state.

        A stateless critic's value is not needed to act (the loss recomputes values), so
        it is skipped and ``value_estimates`` are zeros. A recurrent critic still runs, to
        advance its state.
        """
        if jax.tree.leaves(state["critic"]):
            return self(state, obs)
        x = self.features(obs)
        actor_out = self.actor(state["actor"], self.actor_features(x))
        sample = self.sampler((), actor_out.output, None)
        reg = actor_out.regularization_loss + sample.regularization_loss
        metrics = {**actor_out.metrics, **sample.metrics}
        output = PPONetworkOutput(
            actions=sample.output["actions"],
            raw_actions=sample.output["raw_actions"],
            loglikelihoods=sample.output["loglikelihoods"],
            value_estimates=self.value_heads(
                jnp.zeros((*sample.output["loglikelihoods"].shape, len(self.value_streams or "v")))
            ),
            regularization_loss=reg,
            metrics=metrics,
            distribution_params={"loc": sample.output["loc"], "scale": sample.output["scale"]},
        )
        next_state = {"actor": actor_out.next_state, "critic": state["critic"]}
        return StatefulOutput(next_state, output, reg, metrics, sample.rollout_extras)

    # -- the policy alone (nnx_ppo.policy): deterministic, the critic never runs ----------

    def policy_obs_shapes(self) -> Any:
        """The shapes of the observation the policy reads (without the batch axis): all of
        the env's observation here."""
        return self.obs_shapes

    def policy_observation(self, obs: Any) -> Any:
        """The part of an env observation ``obs`` that the policy reads: all of it here."""
        return obs

    def initialize_policy_state(self, batch_size: int) -> Any:
        """The policy's (the actor's) state at the start of an episode."""
        return self.actor.initialize_state(batch_size)

    def policy_features(self, policy_obs: Any) -> jax.Array:
        """The actor's input features from the policy's observation, ``[B, F]``."""
        return self.actor_features(self.features(policy_obs))

    def policy_action(self, state: Any, policy_obs: Any) -> tuple[Any, jax.Array]:
        """``(next policy state, action)``: the action the network takes in eval mode
        (``tanh`` of the distribution's mean), from the policy's observation alone."""
        actor_out = self.actor(state, self.policy_features(policy_obs))
        loc, _ = self.sampler.distribution(actor_out.output)
        return actor_out.next_state, jnp.tanh(loc)

    def update_statistics(self, obs: Any, mask: jax.Array | None = None) -> None:
        """Updates the observation normalizer (no-op without one)."""
        if self.normalizer is not None:
            self.normalizer.update_statistics(obs, mask)


class AsymmetricPPONetwork(PPONetwork):
    """A ``PPONetwork`` whose actor and critic read different keys of a dict observation.

    MuJoCo Playground's locomotion envs observe ``{"state", "privileged_state"}``: the
    policy must act from ``state`` alone, while the value may use ``privileged_state``
    (simulator quantities a real robot lacks). The observation is normalized as a whole
    (each feature has its own running statistics, so a key's normalized features do not
    depend on the other keys), then the actor gets the features of ``policy_obs_key`` and
    the critic those of ``value_obs_key``.

    Args:
        actor, critic, sampler, normalizer, obs_shapes, value_streams: As for
            ``PPONetwork``; ``obs_shapes`` must be a dict.
        policy_obs_key: The observation key the actor reads.
        value_obs_key: The observation key the critic reads.
    """

    def __init__(
        self,
        actor: StatefulModule,
        critic: StatefulModule,
        sampler: TanhNormalSampler,
        normalizer: Normalizer | None,
        obs_shapes: Any,
        value_streams: tuple[str, ...] | None = None,
        *,
        policy_obs_key: str,
        value_obs_key: str,
    ):
        super().__init__(actor, critic, sampler, normalizer, obs_shapes, value_streams)
        self.policy_obs_key = policy_obs_key
        self.value_obs_key = value_obs_key
        self.policy_slice = key_slice(obs_shapes, policy_obs_key, "policy_obs_key")
        self.value_slice = key_slice(obs_shapes, value_obs_key, "value_obs_key")

    def actor_features(self, features: jax.Array) -> jax.Array:
        start, stop = self.policy_slice
        return features[..., start:stop]

    def critic_features(self, features: jax.Array) -> jax.Array:
        start, stop = self.value_slice
        return features[..., start:stop]

    def policy_obs_shapes(self) -> Any:
        """The shape of ``policy_obs_key``'s observation: all the policy reads."""
        return self.obs_shapes[self.policy_obs_key]

    def policy_observation(self, obs: Any) -> Any:
        """``obs[policy_obs_key]`` of a dict observation; an array is taken to be it."""
        return obs[self.policy_obs_key] if isinstance(obs, dict) else obs

    def policy_features(self, policy_obs: Any) -> jax.Array:
        """The policy key's features, standardized with their own slice of the
        normalizer's statistics (as they are inside the whole observation)."""
        x = flatten_obs(policy_obs, self.policy_obs_shapes())
        return x if self.normalizer is None else self.normalizer.standardize(x, self.policy_slice)


def key_slice(obs_shapes: Any, key: str, field: str) -> tuple[int, int]:
    """``(start, stop)`` of ``key``'s features in a flattened dict observation (keys in
    sorted order, as ``flatten_obs`` concatenates them).

    Raises:
        ValueError: naming ``field`` when the observation is not a dict or lacks ``key``.
    """
    if not isinstance(obs_shapes, dict) or key not in obs_shapes:
        keys = sorted(obs_shapes) if isinstance(obs_shapes, dict) else "none (not a dict)"
        raise ValueError(f"{field} {key!r} is not a key of the observation; its keys: {keys}")
    start = 0
    for name, shape in sorted(obs_shapes.items()):
        size = math.prod(shape)
        if name == key:
            return start, start + size
        start += size
    raise AssertionError("unreachable")


def update_statistics(networks: nnx.Module, obs: Any, mask: jax.Array | None = None) -> None:
    """Calls ``update_statistics`` on ``networks`` when it has one."""
    update = getattr(networks, "update_statistics", None)
    if update is not None:
        update(obs, mask)
