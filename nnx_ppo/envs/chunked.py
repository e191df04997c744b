"""Stepping a batch of envs a chunk at a time (``PPOConfig.env_step_chunk``).

The trainer steps its ``B`` envs as one ``vmap`` of ``env.step``. ``StepInChunks`` steps
them ``chunk`` at a time instead: a ``lax.map`` over ``B / chunk`` vmapped chunks, each a
narrower batch of the same physics. On a CPU, XLA then runs each fused operation of the
step on ``chunk`` envs' arrays, not ``B`` envs'. MJX envs with contacts step faster so
(in chunks of 32 of 256 envs: FingerSpin 1.71x, WalkerWalk 1.28x), small ones slower
(CartpoleSwingup, PendulumSwingup, AcrobotSwingup, ReacherEasy: 0.53-0.94x);
``python -m bench.step_chunks --env NAME`` measures an env (``bench/RESULTS.md``). The
results are not the same bit for bit: MJX's float32 results on XLA:CPU depend in their last
bits on the batch's width, as they do between two values of ``n_envs``.

``step_envs`` steps a batch: ``StepInChunks.step_batch`` where the env is one, else
``vmap(env.step)``.
"""

from __future__ import annotations

from typing import Any

import jax


class StepInChunks:
    """An env whose batches step ``chunk`` envs at a time (``step_batch``).

    It is an ordinary, unbatched env otherwise: ``reset``, ``step`` and every other attribute
    are the wrapped env's. Put it outermost: a wrapper around it would look ``step_batch`` up
    here and skip its own ``step``.

    Args:
        env: The env to wrap (unbatched: ``reset``, ``step``, ...).
        chunk: Envs stepped together, a positive int; a batch's size must be a multiple of it.

    Raises:
        ValueError: If ``chunk`` is not a positive int.
    """

    def __init__(self, env: Any, chunk: int) -> None:
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk <= 0:
            raise ValueError(f"chunk must be a positive int, got {chunk!r}")
        self.env = env
        self.chunk = chunk

    def step_batch(self, state: Any, actions: Any) -> Any:
        """One step of a batch of ``B`` envs (leaves ``[B, ...]``; the actions an array or a
        dict of them), ``chunk`` at a time.

        Raises:
            ValueError: If ``B`` is not a multiple of ``chunk`` (at trace time).
        """
        n_envs = jax.tree.leaves(actions)[0].shape[0]
        if n_envs % self.chunk:
            raise ValueError(f"{n_envs} envs do not split into chunks of {self.chunk}")
        step = jax.vmap(self.env.step)
        if self.chunk == n_envs:
            return step(state, actions)
        chunks = n_envs // self.chunk
        split = lambda x: x.reshape((chunks, self.chunk, *x.shape[1:]))  # noqa: E731
        stepped = jax.lax.map(lambda pair: step(*pair), jax.tree.map(split, (state, actions)))
        return jax.tree.map(lambda x: x.reshape((n_envs, *x.shape[2:])), stepped)

    def __getattr__(self, name: str) -> Any:
        if name == "env" or name.startswith("__"):  # half-built (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.env, name)

    def __repr__(self) -> str:
        return f"StepInChunks({self.env!r}, chunk={self.chunk})"


def step_in_chunks(env: Any, chunk: int | None) -> Any:
    """``env`` stepping ``chunk`` envs at a time (``StepInChunks``), or ``env`` for None."""
    return env if chunk is None else StepInChunks(env, chunk)


def step_envs(env: Any, env_state: Any, actions: Any) -> Any:
    """One step of a batch of envs (``[B]`` states and actions): ``vmap`` of ``env.step``,
    or ``chunk`` envs at a time where ``env`` is a ``StepInChunks``."""
    if isinstance(env, StepInChunks):
        return env.step_batch(env_state, actions)
    return jax.vmap(env.step)(env_state, actions)
