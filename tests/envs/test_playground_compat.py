"""Playground env code written for an older JAX (``jp.clip(x, a_max=...)``) runs here:
LeapCubeReorient and PandaRobotiqPushCube failed at their first step with
``TypeError: clip() got an unexpected keyword argument 'a_max'`` (bench/results/envs.md)."""

from __future__ import annotations

import sys

import jax.numpy as jnp
import numpy as np
import pytest

from nnx_ppo import catalogue, envs
from nnx_ppo.envs import playground_compat


def test_clip_takes_both_spellings_of_its_bounds() -> None:
    x = jnp.array([-2.0, 0.5, 3.0])
    np.testing.assert_array_equal(playground_compat.clip(x, a_max=1.0), [-2.0, 0.5, 1.0])
    np.testing.assert_array_equal(playground_compat.clip(x, a_min=0.0), [0.0, 0.5, 3.0])
    np.testing.assert_array_equal(playground_compat.clip(x, min=-1.0, max=1.0), [-1.0, 0.5, 1.0])
    with pytest.raises(TypeError, match="both max and a_max"):
        playground_compat.clip(x, max=1.0, a_max=2.0)
    with pytest.raises(TypeError, match="a_top"):
        playground_compat.clip(x, a_top=1.0)


@pytest.mark.parametrize(
    ("env", "module"),
    [
        ("LeapCubeReorient", "mujoco_playground._src.manipulation.leap_hand.reorient"),
        (
            "PandaRobotiqPushCube",
            "mujoco_playground._src.manipulation.franka_emika_panda_robotiq.push_cube",
        ),
    ],
)
def test_playground_modules_that_use_the_old_keywords_get_a_clip_that_takes_them(
    env: str, module: str
) -> None:
    if catalogue.missing_assets(env) is not None:
        pytest.skip(catalogue.missing_assets(env))
    envs.load(env)
    jp = sys.modules[module].jp  # type: ignore[attr-defined]
    np.testing.assert_allclose(jp.clip(jnp.array([0.25, 1.75]), a_max=1.0), [0.25, 1.0])
    assert jp.sqrt is jnp.sqrt  # Everything but clip is JAX's own.
    if not playground_compat.clip_takes_old_keywords():
        assert jp is not jnp
