"""Playground's robot envs load from the ``nnx-ppo[menagerie]`` asset wheels with no
configuration, and train: a quadruped (Spot), a humanoid (H1) and a manipulator (Aloha).

The CI subset of ``make test-envs`` (which runs every env): each env is loaded, then
trained for one PPO iteration from its preset (reset, 4 steps of 4 envs, the update) with
the network cut to one hidden layer of 8 units (the preset's observation keys kept).
Compiling the iteration is nearly all of the time: these three are the cheapest of their
kinds in ``bench/results/envs.md`` (Go1, T1 and Panda took 320, 400 and 140 s here in CI;
Go1 trains in ``tests/server/api/test_go1_randomized_run.py`` anyway).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nnx_ppo import catalogue, envs, menagerie, presets
from nnx_ppo.algorithms.training import train_ppo

SUBSET = {
    "SpotFlatTerrainJoystick": menagerie.ASSET_PACKAGES[0],  # quadruped
    "H1JoystickGaitTracking": menagerie.ASSET_PACKAGES[1],  # humanoid
    "AlohaHandOver": menagerie.ASSET_PACKAGES[0],  # manipulator
}
N_ENVS, ROLLOUT = 4, 4


def tiny(name: str) -> presets.Preset:
    """``name``'s CPU preset for one iteration of ``N_ENVS`` x ``ROLLOUT`` steps, with one
    hidden layer of 8 units for the actor and the critic, no evaluation."""
    preset = presets.preset(name, "cpu").with_overrides(
        n_envs=N_ENVS, rollout_length=ROLLOUT, total_steps=N_ENVS * ROLLOUT
    )
    network = {**preset.network, "actor_hidden_sizes": (8,), "critic_hidden_sizes": (8,)}
    config = dataclasses.replace(
        preset.config, eval=dataclasses.replace(preset.config.eval, enabled=False)
    )
    return dataclasses.replace(preset, network=network, config=config)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SUBSET))
def test_a_robot_env_loads_from_its_wheel_and_trains_one_iteration(name: str, monkeypatch):
    from mujoco_playground._src import mjx_env

    monkeypatch.delenv(catalogue.MENAGERIE_ENV_VAR, raising=False)  # nothing configured
    monkeypatch.setattr(mjx_env, "MENAGERIE_PATH", mjx_env.MENAGERIE_PATH)
    preset = tiny(name)
    env = envs.load(name, preset.env_overrides)
    # Built from the robot folder inside its asset wheel.
    used = Path(str(mjx_env.MENAGERIE_PATH))
    assert used == catalogue.menagerie_root(name) and SUBSET[name] in used.parts

    # The iteration resets the envs and steps them ROLLOUT times (one compile for all of it:
    # a separate jitted reset and step would double the minute it takes).
    networks = preset.make_networks(env.observation_size, env.action_size, 0)
    result = train_ppo(env, networks, preset.config, seed=0)
    assert result.total_steps == N_ENVS * ROLLOUT and result.total_iterations == 1
    assert int(result.training_state.steps_taken) == N_ENVS * ROLLOUT
    stepped = result.training_state.env_states
    shapes = jax.tree.map(jnp.shape, jax.eval_shape(env.reset, jax.random.key(0)).obs)
    assert jax.tree.map(lambda x: x.shape[1:], stepped.obs) == shapes
    assert all(np.all(np.isfinite(obs)) for obs in jax.tree.leaves(stepped.obs))
    assert np.any(np.asarray(stepped.info["steps"]) > 0)  # stepped, not only reset
    losses = {k: v for k, v in result.final_metrics.items() if k.startswith("losses/")}
    assert losses and all(np.isfinite(v) for v in losses.values()), result.final_metrics
