"""Domain randomization of a quadruped with MuJoCo Playground's own randomizer (Go1).

Go1's randomizer (``mujoco_playground/_src/locomotion/go1/randomize.py``) draws, per env:
the floor's friction ~ U(0.4, 1.0); the 12 joints' friction loss x U(0.9, 1.1) and armature
x U(1.0, 1.05); the torso's centre of mass + U(-0.05, 0.05) per axis; every link's mass
x U(0.9, 1.1), plus U(-1, 1) kg on the torso; the 12 joints' qpos0 + U(-0.05, 0.05).

Compiling Go1's reset and its PPO iteration is most of the time here (see the commit that
added this file for the CPU seconds), hence few envs, one-iteration runs and tiny networks.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nnx_ppo import envs
from nnx_ppo.algorithms.checkpointing import load_checkpoint, make_checkpoint_fn
from nnx_ppo.algorithms.rollout import reset_envs
from nnx_ppo.algorithms.training import train_ppo, training_state_for
from nnx_ppo.envs.randomization import VARIANT_KEY, nominal_model, randomize, randomizer
from tests.algorithms.test_checkpointing import step_dir
from tests.envs.test_menagerie_envs import N_ENVS, ROLLOUT, tiny

GO1 = "Go1JoystickFlatTerrain"
FLOOR, TORSO = 0, 1  # the randomizer's geom and body ids
N = 8
EPS = 1e-5


@pytest.fixture(scope="module")
def go1() -> Any:
    return envs.load(GO1)


def within(values: Any, low: Any, high: Any) -> bool:
    values = np.asarray(values)
    return bool(
        np.all(values >= np.asarray(low) - EPS) and np.all(values <= np.asarray(high) + EPS)
    )


@pytest.mark.slow
def test_go1_variants_are_playgrounds_and_each_env_resets_on_its_own(go1):
    nominal = jax.tree.map(np.asarray, nominal_model(go1))
    env = randomize(go1, randomizer(GO1), N, seed=0)
    v = {path.lstrip("."): np.asarray(value) for path, value in env.variants.items()}
    assert set(v) == {
        "geom_friction",
        "dof_frictionloss",
        "dof_armature",
        "body_ipos",
        "body_mass",
        "qpos0",
    }

    friction = v["geom_friction"][:, FLOOR, 0]
    assert within(friction, 0.4, 1.0) and len(set(friction.tolist())) == N
    others = np.delete(v["geom_friction"], FLOOR, axis=1)
    np.testing.assert_array_equal(
        others, np.broadcast_to(np.delete(nominal.geom_friction, FLOOR, 0), others.shape)
    )
    np.testing.assert_array_equal(
        v["geom_friction"][:, FLOOR, 1:], np.broadcast_to(nominal.geom_friction[FLOOR, 1:], (N, 2))
    )

    joints = slice(6, None)  # the free joint's 6 dofs are not randomized
    loss, armature = nominal.dof_frictionloss[joints], nominal.dof_armature[joints]
    assert within(v["dof_frictionloss"][:, joints], 0.9 * loss, 1.1 * loss)
    assert within(v["dof_armature"][:, joints], armature, 1.05 * armature)
    np.testing.assert_array_equal(
        v["dof_armature"][:, :6], np.broadcast_to(nominal.dof_armature[:6], (N, 6))
    )
    assert within(v["body_ipos"][:, TORSO] - nominal.body_ipos[TORSO], -0.05, 0.05)
    np.testing.assert_array_equal(
        v["body_ipos"][:, 2:],
        np.broadcast_to(nominal.body_ipos[2:], (N, *nominal.body_ipos[2:].shape)),
    )
    mass = nominal.body_mass
    links = np.arange(len(mass)) != TORSO
    assert within(v["body_mass"][:, links], 0.9 * mass[links], 1.1 * mass[links])
    assert within(v["body_mass"][:, TORSO], 0.9 * mass[TORSO] - 1.0, 1.1 * mass[TORSO] + 1.0)
    assert within(v["qpos0"][:, 7:] - nominal.qpos0[7:], -0.05, 0.05)

    # Reset with one key for all: the same pose, but each env's own masses and centre of
    # mass put the robot's centre of mass elsewhere; tiled nominal "variants" do not.
    # (One compile: the variants go in as ``previous``, as in the trainer's resets.)
    keys = jnp.stack([jax.random.key(0)] * N)

    def reset_on(keys: jax.Array, variants: dict[str, jax.Array]) -> Any:
        return reset_envs(env, keys, SimpleNamespace(info={VARIANT_KEY: variants}))

    reset = jax.jit(reset_on)
    states = reset(keys, env.variants)
    com = np.asarray(states.data.subtree_com[:, 0])
    assert np.all(np.asarray(states.data.qpos) == np.asarray(states.data.qpos)[0])
    assert len({tuple(c) for c in com.tolist()}) == N
    for path, value in env.variants.items():  # each state carries its own variant on
        np.testing.assert_array_equal(states.info[VARIANT_KEY][path], value)
    tiled = {
        p: np.broadcast_to(np.asarray(x), (N, *np.shape(x))) for p, x in _nominal(go1, env).items()
    }
    plain = reset(keys, tiled)
    nominal_com = np.asarray(plain.data.subtree_com[:, 0])
    np.testing.assert_allclose(nominal_com, np.broadcast_to(nominal_com[0], nominal_com.shape))
    single = jax.jit(go1.reset)(keys[0])
    np.testing.assert_allclose(nominal_com[0], np.asarray(single.data.subtree_com[0]), rtol=1e-6)


def _nominal(go1: Any, env: Any) -> dict[str, Any]:
    fields = {
        jax.tree_util.keystr(p): x
        for p, x in jax.tree_util.tree_flatten_with_path(nominal_model(go1))[0]
    }
    return {path: fields[path] for path in env.variants}


@pytest.mark.slow
def test_go1_trains_with_randomization_and_resumes_on_its_variants(tmp_path, request):
    """One tiny PPO iteration (4 envs x 4 steps) with Playground's randomizer and a
    checkpoint; then one more iteration from the checkpoint, with another seed in the config:
    the envs step the checkpoint's variants.

    ~400 s with a cold compilation cache on 2 cores: ``make test-envs`` runs it
    (``--every-env``); ``make test`` has the same story through the service
    (tests/server/api/test_go1_randomized_run.py)."""
    if not request.config.getoption("--every-env"):
        pytest.skip("long: make test-envs (--every-env) runs it")
    preset = tiny(GO1)
    env = envs.load(GO1, preset.env_overrides)
    fn = randomizer(GO1)
    assert fn is not None
    config = preset.config
    networks = preset.make_networks(env.observation_size, env.action_size, 0)
    first = train_ppo(
        env,
        networks,
        config,
        randomization_fn=fn,
        checkpoint_fn=make_checkpoint_fn(str(tmp_path), config),
    )
    variants = first.training_state.env_states.info[VARIANT_KEY]
    expected = randomize(env, fn, N_ENVS, config.seed).variants
    assert jax.tree.map(np.asarray, variants).keys() == expected.keys()
    for path, value in expected.items():
        np.testing.assert_array_equal(np.asarray(variants[path]), np.asarray(value))
    losses = {k: v for k, v in first.final_metrics.items() if k.startswith("losses/")}
    assert losses and all(np.isfinite(v) for v in losses.values()), first.final_metrics

    ppo = dataclasses.replace(config.ppo, total_steps=2 * N_ENVS * ROLLOUT)
    reseeded = dataclasses.replace(config, ppo=ppo, seed=config.seed + 1)
    template = training_state_for(
        env, preset.make_networks(env.observation_size, env.action_size, 1), reseeded
    )
    state = load_checkpoint(
        step_dir(tmp_path, N_ENVS * ROLLOUT), template.networks, template.optimizer
    )["training_state"]
    resumed = train_ppo(env, state.networks, reseeded, initial_state=state, randomization_fn=fn)
    assert int(resumed.training_state.steps_taken) == 2 * N_ENVS * ROLLOUT
    carried = resumed.training_state.env_states.info[VARIANT_KEY]
    for path, value in expected.items():
        np.testing.assert_array_equal(np.asarray(carried[path]), np.asarray(value))
    other = randomize(env, fn, N_ENVS, reseeded.seed).variants[".geom_friction"]
    assert not np.array_equal(np.asarray(other), np.asarray(expected[".geom_friction"]))
    obs = jax.tree.leaves(resumed.training_state.env_states.obs)
    assert all(np.all(np.isfinite(x)) for x in obs)
    assert np.any(np.asarray(resumed.training_state.env_states.info["steps"]) > 0)
