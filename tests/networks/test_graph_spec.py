"""A population graph from its JSON description (``network.kind: "graph"``): every mistake
found at once with its place in the description, the network it builds, its recipe, and a
checkpoint of it that resumes."""

from __future__ import annotations

import copy
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import config as C
from nnx_ppo.algorithms.checkpointing import load_checkpoint, make_checkpoint_fn
from nnx_ppo.algorithms.training import train_ppo, training_state_for
from nnx_ppo.networks import factories
from nnx_ppo.networks.graph_spec import GraphSpecError, graph_problems
from nnx_ppo.presets import make_networks

# PointReachDict: obs {"state": (4,), "target": (2,)}, 2 actions. The example.
DESCRIPTION: dict[str, Any] = {
    "kind": "graph",
    "normalize_obs": True,
    "populations": [
        {"name": "in_state", "size": 4, "input_from": "state"},
        {"name": "in_target", "size": 2, "input_from": "target"},
        {"name": "hidden", "size": 16, "activation": "swish"},
        {"name": "arm", "size": 4, "output_to": "arm"},
        {"name": "critic", "size": 1, "output_to": "value"},
    ],
    "connections": [
        {"src": "in_state", "dst": "hidden"},
        {"src": "in_target", "dst": "hidden"},
        {"src": "hidden", "dst": "hidden", "delay": 1},
        {"src": "hidden", "dst": "arm"},
        {"src": "hidden", "dst": "critic"},
    ],
    "actions": {"arm": "arm"},
    "value": "value",
}
DICT_OBS = {"state": (4,), "target": (2,)}


def fields(description: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in description.items() if k != "kind"}


def test_a_valid_description_has_no_problems() -> None:
    assert graph_problems(fields(DESCRIPTION), DICT_OBS, 2) == []


def test_every_mistake_is_named_with_its_place() -> None:
    bad = copy.deepcopy(fields(DESCRIPTION))
    bad["populations"][0]["size"] = 5  # obs["state"] has 4 features
    bad["populations"][2]["activation"] = "sigmoidish"
    bad["connections"][2]["delay"] = 0  # hidden -> hidden without a delay: a cycle
    bad["connections"].append({"src": "hidden", "dst": "nope"})
    bad["actions"] = {"arm": "value"}  # 1 unit, 2 x 2 needed
    problems = dict(graph_problems(bad, DICT_OBS, 2))
    assert set(problems) == {
        ("populations", 0, "size"),
        ("populations", 2, "activation"),
        ("connections", 2, "delay"),
        ("connections", 5, "dst"),
        ("actions", "arm"),
    }
    assert "4 features" in problems[("populations", 0, "size")]
    assert "'hidden' -> 'hidden'" in problems[("connections", 2, "delay")]
    assert "'nope'" in problems[("connections", 5, "dst")]
    assert "needs 4" in problems[("actions", "arm")]


def test_obs_keys_outputs_and_value_are_checked() -> None:
    bad = copy.deepcopy(fields(DESCRIPTION))
    bad["populations"][1]["input_from"] = "goal"
    bad["populations"].append({"name": "idle", "size": 3})  # nothing drives it
    bad["value"] = "arm"  # 4 units
    problems = dict(graph_problems(bad, DICT_OBS, 2))
    assert "no key 'goal'" in problems[("populations", 1, "input_from")]
    assert "no incoming connection" in problems[("populations", 5)]
    assert "not 1" in problems[("value",)]
    streams = dict(graph_problems(fields(DESCRIPTION), DICT_OBS, 2, ["task", "effort"]))
    assert "streams" in streams[("value",)]


def test_the_factory_raises_every_problem_at_once() -> None:
    bad = copy.deepcopy(DESCRIPTION)
    bad["populations"][0]["size"] = 5
    bad["connections"][2]["delay"] = 0
    with pytest.raises(GraphSpecError) as raised:
        make_networks(bad, DICT_OBS, 2, seed=0)
    assert len(raised.value.problems) == 2
    assert "populations.0.size" in str(raised.value)


def test_an_array_observation_is_the_obs_key() -> None:
    description = copy.deepcopy(DESCRIPTION)
    description["populations"][:2] = [{"name": "in", "size": 6, "input_from": "obs"}]
    description["connections"][:2] = [{"src": "in", "dst": "hidden"}]
    network = make_networks(description, 6, 2, seed=0)
    state = network.initialize_state(3)
    out = network(state, jnp.ones((3, 6)))
    assert out.output.actions.shape == (3, 2)
    assert out.output.value_estimates.shape == (3,)


def test_the_recipe_rebuilds_the_same_network_shape() -> None:
    network = make_networks(DESCRIPTION, DICT_OBS, 2, seed=0)
    recipe = factories.recipe_of(network)
    assert recipe is not None and recipe["kind"] == "graph"
    again = factories.rebuild(recipe)
    shapes = jax.tree.map(jnp.shape, nnx.state(network, nnx.Param))
    assert jax.tree.map(jnp.shape, nnx.state(again, nnx.Param)) == shapes


def test_a_graph_network_resumes_exactly_from_its_checkpoint(tmp_path) -> None:
    env = envs.load("PointReachDict")
    config = C.TrainConfig(
        ppo=C.PPOConfig(n_envs=8, rollout_length=8, total_steps=256, n_minibatches=2, n_epochs=1),
        eval=C.EvalConfig(every_steps=64, n_envs=4, max_episode_length=10),
        checkpoint_every_steps=128,
        seed=0,
    )

    def network(seed: int) -> Any:
        return make_networks(DESCRIPTION, env.observation_size, env.action_size, seed=seed)

    def train(logs: list, **kwargs: Any) -> Any:
        return train_ppo(
            env, kwargs.pop("networks"), config, log_fn=lambda m, s: logs.append((s, m)), **kwargs
        )

    straight: list = []
    train(straight, networks=network(0))
    first: list = []
    train(
        first, networks=network(0), total_steps=128, checkpoint_fn=make_checkpoint_fn(str(tmp_path))
    )
    assert first == straight[: len(first)]
    template = training_state_for(env, network(1), config)  # other initial parameters
    path = str(tmp_path / f"step_{128:010d}")
    checkpoint = load_checkpoint(path, template.networks, template.optimizer)
    assert checkpoint["step"] == 128
    resumed: list = []
    train(resumed, networks=template.networks, initial_state=checkpoint["training_state"])
    # The delayed edge's buffers, the normalizer and the sampler's key came back: every
    # metric of the resumed half equals the straight run's.
    assert resumed == straight[len(first) :]
    assert any("eval/episode_reward" in m for _, m in resumed)
