"""The env catalogue: names without JAX, and MuJoCo Menagerie detection in both states."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest

from nnx_ppo import catalogue, envs, menagerie, plugins


def test_catalogue_matches_the_installed_registry_and_builtins():
    from mujoco_playground import dm_control_suite, locomotion, manipulation, registry

    assert list(catalogue.PLAYGROUND_FAMILIES) == list(registry.ALL_ENVS)
    assert [n for n, f in catalogue.PLAYGROUND_FAMILIES.items() if f == "locomotion"] == list(
        locomotion.ALL_ENVS
    )
    assert [n for n, f in catalogue.PLAYGROUND_FAMILIES.items() if f == "manipulation"] == list(
        manipulation.ALL_ENVS
    )
    dm = [n for n, f in catalogue.PLAYGROUND_FAMILIES.items() if f == "dm_control_suite"]
    assert dm == list(dm_control_suite.ALL_ENVS)
    # Every locomotion/manipulation env runs Playground's ensure_menagerie_exists.
    assert set(catalogue.MENAGERIE_ASSETS) == set(locomotion.ALL_ENVS) | set(manipulation.ALL_ENVS)
    assert tuple(envs.BUILTIN_ENVS) == catalogue.BUILTIN_ENV_NAMES
    with contextlib.redirect_stdout(io.StringIO()):  # it prints a line for each env without
        randomized = [n for n in registry.ALL_ENVS if registry.get_domain_randomizer(n)]
    assert list(catalogue.RANDOMIZED_ENVS) == randomized
    # Plugin envs (the example plugin another test of this process made visible) aside.
    plugin_envs = set(plugins.entry_points(plugins.ENV_GROUP))
    assert [n for n in envs.available_envs() if n not in plugin_envs] == catalogue.env_names()


def test_playground_menagerie_location_is_playgrounds_own():
    from mujoco_playground._src import mjx_env

    assert menagerie.playground_dir() == Path(str(mjx_env.EXTERNAL_DEPS_PATH / "mujoco_menagerie"))


def test_the_asset_wheels_make_every_env_available_without_configuration(monkeypatch):
    # make setup installs the nnx-ppo[menagerie] extra; no env var is needed.
    monkeypatch.delenv(catalogue.MENAGERIE_ENV_VAR, raising=False)
    assert [n for n in catalogue.env_names() if catalogue.missing_assets(n)] == []
    # Each robot is found inside its wheel, under mujoco/playground/assets/mujoco_menagerie.
    large, humanoid = menagerie.ASSET_PACKAGES
    go1, t1 = (
        catalogue.menagerie_root("Go1Getup"),
        catalogue.menagerie_root("T1JoystickFlatTerrain"),
    )
    assert go1 is not None and t1 is not None
    assert go1.parts[-5:] == (large, "mujoco", "playground", "assets", "mujoco_menagerie")
    assert t1.parts[-5] == humanoid
    # Panda with the Robotiq gripper needs two folders, both in the same wheel.
    assert catalogue.menagerie_root("PandaRobotiqPushCube") == go1
    assert catalogue.menagerie_root("CartpoleBalance") is None  # needs no Menagerie


def licence_of(text: str) -> str:
    """Tells the four licences of the robot folders apart by a phrase only each one has."""
    text = " ".join(text.split())
    if "Apache License" in text and "Version 2.0" in text:
        return "Apache-2.0"
    if "Permission is hereby granted, free of charge" in text:
        return "MIT"
    if "Redistributions in binary form must reproduce" in text:
        return "BSD-3-Clause" if "Neither the name" in text else "BSD-2-Clause"
    return "unknown"


def test_each_robot_folder_carries_the_licence_the_readme_names(monkeypatch):
    monkeypatch.delenv(catalogue.MENAGERIE_ENV_VAR, raising=False)
    folders = {f for needed in catalogue.MENAGERIE_ASSETS.values() for f in needed}
    assert set(menagerie.LICENCES) == folders
    readme = " ".join((Path(__file__).parents[1] / "README.md").read_text().split())
    section = readme.split("*Licences of what you install.*", 1)[1]
    # The README's groups: "**Apache-2.0**: `a`, `b`; **BSD-3-Clause**: ..."
    groups = {}
    for part in section.split("**")[1::2]:
        groups[part] = section.split(f"**{part}**", 1)[1].split("**", 1)[0]
    for folder, licence in menagerie.LICENCES.items():
        root = menagerie.root_for([folder])
        assert root is not None, folder
        assert licence_of((root / folder / "LICENSE").read_text()) == licence, folder
        assert f"`{folder}`" in groups[licence], (folder, licence)


def test_without_the_extra_the_refusal_names_it(monkeypatch, no_clone):
    monkeypatch.delenv(catalogue.MENAGERIE_ENV_VAR, raising=False)
    monkeypatch.setattr(menagerie, "ASSET_PACKAGES", ("nnx_ppo_no_such_asset_wheel",))
    if (playground_copy := menagerie.playground_dir()) is not None and playground_copy.is_dir():
        pytest.skip(f"Playground's own Menagerie copy is here: {playground_copy}")
    reason = envs.unavailable_reason("G1JoystickFlatTerrain")
    assert reason is not None and "G1JoystickFlatTerrain" in reason and "unitree_g1" in reason
    assert 'pip install "nnx-ppo[menagerie]"' in reason
    with pytest.raises(envs.AssetsMissing, match=r"nnx-ppo\[menagerie\]"):
        envs.load("G1JoystickFlatTerrain")


def test_catalogue_imports_neither_jax_nor_playground():
    code = (
        "import sys, nnx_ppo.catalogue as c; c.env_names(); c.missing_assets('Go1Getup'); "
        "assert 'jax' not in sys.modules and 'mujoco_playground' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.fixture
def no_clone(monkeypatch):
    """Fails the test if anything starts a subprocess (Playground's git clone)."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"a subprocess was started: {args}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(subprocess, "run", refuse)


def test_missing_menagerie_is_a_clear_error_and_never_clones(tmp_path, monkeypatch, no_clone):
    monkeypatch.setenv(catalogue.MENAGERIE_ENV_VAR, str(tmp_path / "menagerie"))
    reason = envs.unavailable_reason("Go1Getup")
    assert reason is not None
    assert "Go1Getup" in reason and str(tmp_path / "menagerie" / "unitree_go1") in reason
    assert catalogue.MENAGERIE_ENV_VAR in reason and "git clone" in reason
    assert 'pip install "nnx-ppo[menagerie]"' in reason  # the other fix: unset it, install
    with pytest.raises(envs.AssetsMissing) as info:
        envs.load("Go1Getup")
    assert isinstance(info.value, ValueError) and str(info.value) == reason
    # The dm_control suite needs no Menagerie.
    assert envs.unavailable_reason("CartpoleBalance") is None
    assert envs.unavailable_reason("PointReach") is None


def test_a_stand_in_menagerie_makes_its_envs_available(tmp_path, monkeypatch, no_clone):
    from mujoco_playground._src import mjx_env

    root = tmp_path / "menagerie"
    (root / "unitree_go1").mkdir(parents=True)
    (root / "franka_emika_panda").mkdir()
    monkeypatch.setenv(catalogue.MENAGERIE_ENV_VAR, str(root))
    monkeypatch.setattr(mjx_env, "MENAGERIE_PATH", mjx_env.MENAGERIE_PATH)
    monkeypatch.setattr(mjx_env, "ensure_menagerie_exists", mjx_env.ensure_menagerie_exists)
    assert envs.unavailable_reason("Go1Getup") is None
    assert envs.unavailable_reason("PandaPickCube") is None
    # Needs a second folder the stand-in lacks.
    assert "robotiq_2f85_v4" in (envs.unavailable_reason("PandaRobotiqPushCube") or "")
    # Loading goes on to Playground, which reads the stand-in (and finds no meshes in it).
    with pytest.raises(ValueError, match="unitree_go1") as info:
        envs.load("Go1Getup")
    assert not isinstance(info.value, envs.AssetsMissing)
    assert str(mjx_env.MENAGERIE_PATH) == str(root)


def test_a_run_spec_for_an_env_without_assets_is_refused_on_env_name(tmp_path, monkeypatch):
    from server.spec.spec_check import check_spec

    monkeypatch.setenv(catalogue.MENAGERIE_ENV_VAR, str(tmp_path / "absent"))
    errors, _ = check_spec({"kind": "ppo", "env": {"name": "Go1Getup"}, "config": {}}, None)
    assert len(errors) == 1
    assert errors[0]["loc"] == ["body", "env", "name"]
    assert errors[0]["msg"] == envs.unavailable_reason("Go1Getup")
