"""Wrappers that add bookkeeping to any ``RLEnv`` (built-in or MuJoCo Playground)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


class EpisodeWrapper:
    """Ends episodes after a fixed number of steps and marks such endings as truncations.

    Works on one unbatched environment: the trainer vmaps ``reset``/``step`` over envs and
    resets finished envs itself, so this wrapper never resets anything on its own. After the
    limit is reached, further steps keep ``done = 1.`` (and ``truncated``, unless the env
    terminates) and keep counting. ``done`` is always float32, as in MuJoCo Playground.

    Keys added to ``state.info`` (float32 ``[]`` per env):

    * ``steps``: steps taken since the last ``reset`` (0. right after ``reset``).
    * ``truncated``: 1. exactly when this step ended the episode because ``steps`` reached
      ``episode_length`` while the wrapped env did not terminate on its own at this step;
      else 0. A value function should bootstrap through truncations, not through terminations.

    Every attribute not defined here (``render``, ``mj_model``, ``dt``, ...) is looked up on
    the wrapped env.

    Args:
        env: The environment to wrap (anything with ``reset``, ``step``, ``observation_size``
            and ``action_size``).
        episode_length: Maximum number of steps per episode, a positive int.

    Raises:
        ValueError: If ``episode_length`` is not a positive int.
    """

    def __init__(self, env: Any, episode_length: int) -> None:
        is_int = isinstance(episode_length, int) and not isinstance(episode_length, bool)
        if not is_int or episode_length <= 0:
            raise ValueError(f"episode_length must be a positive int, got {episode_length!r}")
        self.env = env
        self.episode_length = episode_length

    def reset(self, rng: jax.Array) -> Any:
        """Resets the wrapped env and zeroes the step counter.

        Args:
            rng: PRNG key for the wrapped env's ``reset``.

        Returns:
            The wrapped env's state with ``info["steps"] = 0.`` and ``info["truncated"] = 0.``.
        """
        state = self.env.reset(rng)
        info = dict(state.info)
        info["steps"] = jnp.zeros((), jnp.float32)
        info["truncated"] = jnp.zeros((), jnp.float32)
        return state.replace(info=info)

    def step(self, state: Any, action: jax.Array) -> Any:
        """Steps the wrapped env, counts the step, and ends the episode at the limit.

        Args:
            state: The state from the previous ``reset``/``step`` of this wrapper.
            action: Action ``[action_size]`` passed through to the wrapped env.

        Returns:
            The wrapped env's next state with ``done``, ``info["steps"]`` and
            ``info["truncated"]`` updated.
        """
        steps = state.info["steps"] + 1.0
        next_state = self.env.step(state, action)
        terminated = next_state.done.astype(jnp.float32)
        at_limit = (steps >= self.episode_length).astype(jnp.float32)
        info = dict(next_state.info)
        info["steps"] = steps.astype(jnp.float32)
        info["truncated"] = at_limit * (1.0 - terminated)
        return next_state.replace(done=jnp.maximum(terminated, at_limit), info=info)

    @property
    def observation_size(self) -> Any:
        """The wrapped env's observation size (int, or a dict of shapes)."""
        return self.env.observation_size

    @property
    def action_size(self) -> int:
        """The wrapped env's action size."""
        return self.env.action_size

    @property
    def unwrapped(self) -> Any:
        """The innermost environment, below every wrapper."""
        return getattr(self.env, "unwrapped", self.env)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails. Guard ``env`` itself so that a half-built
        # instance (e.g. during unpickling) raises AttributeError instead of recursing.
        if name == "env" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.env, name)

    def __repr__(self) -> str:
        return f"EpisodeWrapper({self.env!r}, episode_length={self.episode_length})"
