"""``reset_done`` resets only the envs that ended, and each gets the state a reset of all
would have given it.

With staggered time limits some env ends on most steps; resetting every env then and
keeping the few (the reference below) was most of the rollout's time at 2048 envs
(``bench/RESULTS.md``). ``reset_done`` gathers the done envs, resets them and scatters them
back, a bounded number a round; these tests hold it to the reference, bit for bit, in each
of its cases: none done, one round's worth or less, more, all.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nnx_ppo import envs
from nnx_ppo.algorithms.rollout import reset_done, reset_envs, tree_where
from nnx_ppo.envs.randomization import VARIANT_KEY, randomize
from tests.envs.test_randomization import FRICTION, randomize_friction, slide


def reset_everything(env: Any, state: Any, done: jax.Array, key: jax.Array) -> Any:
    """The reference: every env reset, the done ones kept."""
    keys = jax.random.split(key, done.shape[0])
    return tree_where(done, reset_envs(env, keys, state), state)


def stepped_states(env: Any, n_envs: int) -> Any:
    """``[n_envs]`` states one step after a reset, so that a reset visibly changes them."""
    states = reset_envs(env, jax.random.split(jax.random.key(0), n_envs))
    actions = jnp.full((n_envs, env.action_size), 0.5, jnp.float32)
    return jax.jit(jax.vmap(env.step))(states, actions)


def done_masks(n_envs: int) -> dict[str, np.ndarray]:
    """Masks for each of ``reset_done``'s cases at ``n_envs`` (16 envs a round here)."""
    masks = {"none": np.zeros(n_envs, bool), "all": np.ones(n_envs, bool)}
    for count in (1, 3, 16, 17):
        mask = np.zeros(n_envs, bool)
        mask[np.random.default_rng(count).choice(n_envs, count, replace=False)] = True
        masks[f"{count} done"] = mask
    mask = np.zeros(n_envs, bool)
    mask[[0, n_envs - 1]] = True  # the first and the last row
    masks["ends"] = mask
    return masks


def raw(leaf: Any) -> np.ndarray:
    """A leaf as NumPy, a random key as its key data."""
    if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        leaf = jax.random.key_data(leaf)
    return np.asarray(leaf)


def assert_matches_the_reference(env: Any, n_envs: int) -> None:
    state = stepped_states(env, n_envs)
    key = jax.random.key(7)
    ours = jax.jit(lambda s, d: reset_done(env, s, d, key))
    reference = jax.jit(lambda s, d: reset_everything(env, s, d, key))
    for case, mask in done_masks(n_envs).items():
        done = jnp.asarray(mask)
        got, want = ours(state, done), reference(state, done)
        assert jax.tree.structure(got) == jax.tree.structure(want)
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            np.testing.assert_array_equal(raw(a), raw(b), err_msg=case, strict=True)
        # The envs left alone are as they were (and the reset ones are not).
        np.testing.assert_array_equal(np.asarray(got.obs)[~mask], np.asarray(state.obs)[~mask])
        if mask.any():
            assert not np.array_equal(np.asarray(got.obs)[mask], np.asarray(state.obs)[mask])


def test_a_builtin_env_resets_as_if_all_were_reset():
    assert_matches_the_reference(envs.load("PointReach"), 64)


def test_a_randomized_env_keeps_each_envs_variant():
    env = randomize(slide(), randomize_friction, 32, seed=0)
    assert_matches_the_reference(env, 32)
    state = stepped_states(env, 32)
    done = jnp.asarray(done_masks(32)["3 done"])
    again = jax.jit(lambda s, d: reset_done(env, s, d, jax.random.key(1)))(state, done)
    np.testing.assert_array_equal(again.info[VARIANT_KEY][FRICTION], env.variants[FRICTION])


@pytest.mark.slow  # compiles MJX resets for CartpoleBalance
def test_a_playground_env_resets_as_if_all_were_reset():
    assert_matches_the_reference(envs.load("CartpoleBalance"), 32)
