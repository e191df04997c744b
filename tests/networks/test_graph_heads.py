"""A graph network with several action heads (``"actions"`` with one entry per env head):
its description checked against the env's heads, its dict actions, its ``Policy`` and the
StableHLO export of that policy."""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np

from nnx_ppo import envs
from nnx_ppo.algorithms.training import check_compatible
from nnx_ppo.networks import factories
from nnx_ppo.networks.graph_spec import graph_problems
from nnx_ppo.policy import exporting
from nnx_ppo.policy.policy import Policy
from nnx_ppo.presets import make_networks, two_arm_graph

HEADS = {"left": 2, "right": 2}
OBS = {"left": (6,), "right": (6,)}


def fields() -> dict:
    return {k: v for k, v in two_arm_graph().items() if k != "kind"}


def test_the_two_arm_description_fits_the_envs_heads() -> None:
    assert graph_problems(fields(), OBS, HEADS) == []
    assert graph_problems(fields(), envs.TwoArmReach().observation_size, HEADS) == []


def test_heads_the_env_lacks_or_misses_are_named_under_actions() -> None:
    missing = fields()
    missing["actions"] = {"left": "left"}
    problems = dict(graph_problems(missing, OBS, HEADS))
    assert "env's action head 'right' has no output" in problems[("actions", "right")]
    extra = fields()
    extra["actions"] = {"left": "left", "right": "right", "gripper": "right"}
    problems = dict(graph_problems(extra, OBS, HEADS))
    assert set(problems) == {("actions", "gripper")}
    assert (
        "no action head 'gripper'; its heads: ['left', 'right']" in problems[("actions", "gripper")]
    )
    wrong = fields()
    wrong["populations"][2]["size"] = 6  # left_arm: 3 actions' worth, the head has 2
    problems = dict(graph_problems(wrong, OBS, HEADS))
    assert "has 6 units; a head for 2 actions needs 4" in problems[("actions", "left")]


def test_several_heads_for_an_env_of_one_action_array_are_refused() -> None:
    problems = dict(graph_problems(fields(), OBS, 4))
    assert "one action array of 4" in problems[("actions",)]


def test_a_two_head_graph_acts_with_dict_actions_and_exports() -> None:
    env = envs.TwoArmReach()
    network = make_networks(two_arm_graph(), env.observation_size, env.action_size, seed=0)
    check_compatible(env, network)
    assert factories.recipe_of(network)["action_size"] == HEADS
    obs = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 3)).obs
    out = network(network.initialize_state(3), obs).output
    assert {h: a.shape for h, a in out.actions.items()} == {"left": (3, 2), "right": (3, 2)}

    policy = Policy(network)
    assert policy.action_size == HEADS
    state, action = policy.act(policy.initial_state(3), obs)
    # Deterministic: each head's action is tanh of its mean.
    loc = network(network.initialize_state(3), obs).output.distribution_params["loc"]
    for head in HEADS:
        np.testing.assert_allclose(action[head], jnp.tanh(loc[head]), rtol=1e-5, atol=1e-6)

    assert exporting.signature(policy)[1][:2] == ["action/left", "action/right"]
    exported = jax.export.deserialize(bytearray(exporting.to_stablehlo(policy)))
    state_leaves = jax.tree.leaves(policy.initial_state(3))
    outputs = exported.call(obs["left"], obs["right"], *state_leaves)
    np.testing.assert_allclose(outputs[0], action["left"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outputs[1], action["right"], rtol=1e-5, atol=1e-6)
    del state


def test_the_two_arm_preset_is_the_graph() -> None:
    from nnx_ppo.presets import preset

    found = preset("TwoArmReach", "cpu")
    assert found.network["kind"] == "graph"
    assert set(found.network["actions"]) == set(HEADS)
    assert copy.deepcopy(found.network) == two_arm_graph()
