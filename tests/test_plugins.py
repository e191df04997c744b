"""``nnx_ppo.plugins``: entry points listed without importing them, factories' arguments
checked against their signatures and type hints, plugin envs and networks built (and
rebuilt from a checkpoint's recipe) through the library's own entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from nnx_ppo import envs, plugins
from nnx_ppo.networks import factories
from nnx_ppo.presets import make_networks

LIST_ONLY = """
import json, sys
from nnx_ppo import catalogue, plugins
names = catalogue.plugin_env_names()
source = catalogue.source_of("TwoLinkArm")
networks = sorted(plugins.entry_points(plugins.NETWORK_GROUP))
imported = sorted(m for m in sys.modules if m.startswith("nnx_ppo_example_plugin") or m == "jax")
print(json.dumps([names, source, networks, imported]))
"""


def test_listing_reads_names_and_imports_no_plugin(example_plugin: dict[str, str]):
    env = {**os.environ, **example_plugin}
    out = subprocess.run(
        [sys.executable, "-c", LIST_ONLY], env=env, capture_output=True, text=True, check=True
    )
    names, source, networks, imported = json.loads(out.stdout)
    assert names == ["BrokenArm", "TwoLinkArm"] and networks == ["tiny"]
    assert source == "plugin:nnx-ppo-example-plugin"
    assert imported == []  # neither the plugin's modules nor JAX


def factory(
    obs_size: Any,
    action_size: int,
    *,
    rngs: Any,
    width: int = 1,
    scale: float = 1.0,
    sizes: Sequence[int] = (),
    pair: tuple[int, str] = (0, ""),
    mode: Literal["a", "b"] = "a",
    name: str | None = None,
    table: dict[str, float] | None = None,
    anything=None,
) -> None: ...


@pytest.mark.parametrize(
    ("kwargs", "refused"),
    [
        ({"width": 2, "scale": 3, "sizes": [1, 2], "pair": [1, "x"], "mode": "b"}, None),
        ({"name": None, "table": {"k": 1.5}, "anything": {"x": [1]}}, None),
        ({"width": 2.0}, "width"),  # an int is not a float, nor a float an int
        ({"width": True}, "width"),  # nor a bool an int
        ({"scale": "1"}, "scale"),
        ({"sizes": [1, "2"]}, "sizes"),
        ({"pair": [1, 2]}, "pair"),
        ({"pair": [1]}, "pair"),
        ({"mode": "c"}, "mode"),
        ({"table": {"k": "v"}}, "table"),
        ({"name": 3}, "name"),
        ({"widht": 2}, "widht"),
        ({"rngs": 0}, "rngs"),  # the caller's
    ],
)
def test_arguments_are_checked_against_the_signature_and_hints(kwargs, refused):
    if refused is None:
        plugins.check_arguments("f", factory, kwargs, positional=2, reserved=("rngs",))
        return
    with pytest.raises(plugins.PluginArgumentError) as error:
        plugins.check_arguments("f", factory, kwargs, positional=2, reserved=("rngs",))
    assert error.value.argument == refused and repr(refused) in str(error.value)


def test_plugin_envs_load_by_name_and_refuse_what_their_factory_does_not_take(
    example_plugin: dict[str, str],
):
    env = envs.load("TwoLinkArm", {"dt": 0.1, "episode_length": 20})
    assert (env.episode_length, env.observation_size, env.action_size) == (20, 8, 2)
    state = env.step(env.reset(jax.random.key(0)), jnp.ones(2))
    assert state.obs.shape == (8,) and float(state.info["steps"]) == 1.0
    assert envs.describe("TwoLinkArm")["source"] == "plugin:nnx-ppo-example-plugin"
    assert "TwoLinkArm" in envs.available_envs()
    with pytest.raises(plugins.PluginArgumentError, match=r"'speed'.*takes: dt, break_in_step"):
        envs.load("TwoLinkArm", {"speed": 1})
    with pytest.raises(ValueError, match="dt must be in"):  # the factory's own refusal
        envs.load("TwoLinkArm", {"dt": 2.0})
    with pytest.raises(plugins.PluginUnavailable, match="fails to import on purpose"):
        envs.load("BrokenArm")


def test_a_plugin_network_carries_a_recipe_that_rebuilds_it(example_plugin: dict[str, str]):
    spec = {"kind": "plugin:tiny", "kwargs": {"hidden": 8, "normalize": "none"}}
    network = make_networks(spec, 8, 2, seed=0)
    recipe = factories.recipe_of(network)
    assert recipe == {
        "kind": "plugin:tiny",
        "obs_size": 8,
        "action_size": 2,
        "fields": {"hidden": 8, "normalize": "none"},
    }
    rebuilt = factories.rebuild(recipe)
    shapes = [jax.tree.map(jnp.shape, nnx.state(n, nnx.Param)) for n in (rebuilt, network)]
    assert shapes[0] == shapes[1]
    assert rebuilt.actor.a.kernel.shape == (8, 8) and rebuilt.normalizer is None
    with pytest.raises(plugins.UnknownPlugin, match="installed: tiny"):
        make_networks({"kind": "plugin:os.path"}, 8, 2, seed=0)
    with pytest.raises(ValueError, match="takes its factory's arguments in kwargs"):
        make_networks({"kind": "plugin:tiny", "hidden": 8}, 8, 2, seed=0)
