"""``GET /api/envs`` lists every env name at once, before the catalogue process has learned
any size, and marks the envs that cannot load here."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

from nnx_ppo import catalogue
from server.api.envs import list_envs
from server.spec.checker import EnvCatalogue


def shipped(items):
    """The listed envs but plugins' (the example plugin, made visible by another test of
    the same process, stays on ``sys.path``)."""
    return [e for e in items if not (e.source or "").startswith("plugin:")]


def test_every_name_is_listed_before_any_size_is_known(tmp_path, monkeypatch):
    monkeypatch.setenv(catalogue.MENAGERIE_ENV_VAR, str(tmp_path / "no-menagerie"))
    services = SimpleNamespace(catalogue=EnvCatalogue(tmp_path, include_playground=True))
    started = time.perf_counter()
    listed = list_envs(services)  # the catalogue process never ran: no sizes at all
    assert time.perf_counter() - started < 1.0
    assert [e.name for e in shipped(listed.items)] == catalogue.env_names()
    assert listed.complete is False
    assert all(not e.details_known and e.observation_size is None for e in listed.items)
    go1 = next(e for e in listed.items if e.name == "Go1JoystickFlatTerrain")
    assert go1.available is False and "NNX_PPO_MENAGERIE_DIR" in go1.reason
    cartpole = next(e for e in listed.items if e.name == "CartpoleBalance")
    assert cartpole.available is True and cartpole.reason is None
    # Which envs a run may randomize (env.randomize), known without loading any.
    randomizable = [e.name for e in listed.items if e.domain_randomizer]
    assert randomizable == list(catalogue.RANDOMIZED_ENVS) and go1.domain_randomizer


def test_every_env_is_available_with_the_menagerie_extra(tmp_path, monkeypatch):
    monkeypatch.delenv(catalogue.MENAGERIE_ENV_VAR, raising=False)  # a fresh clone's setup
    services = SimpleNamespace(catalogue=EnvCatalogue(tmp_path, include_playground=True))
    listed = list_envs(services)
    playground = [e for e in listed.items if e.source == "playground"]
    assert len(playground) == 54
    assert [(e.name, e.reason) for e in shipped(listed.items) if not e.available] == []


def test_sizes_fill_in_as_the_catalogue_learns_them(tmp_path):
    cat = EnvCatalogue(tmp_path, include_playground=False)
    learned = {"name": "PointReach", "observation_size": 6, "action_size": 2, "source": "builtin"}
    cat.path.write_text(json.dumps({"version": "x", "complete": False, "items": [learned]}))
    listed = list_envs(SimpleNamespace(catalogue=cat))
    items = shipped(listed.items)
    assert [e.name for e in items] == list(catalogue.BUILTIN_ENV_NAMES)
    first, rest = items[0], items[1:]
    assert first.details_known and (first.observation_size, first.action_size) == (6, 2)
    assert all(not e.details_known for e in rest)
