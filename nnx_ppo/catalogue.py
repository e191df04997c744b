"""Which envs exist, and whether each can load here, without importing JAX or Playground.

The service's API process lists envs from this module within a second of starting (it must
not import JAX); ``nnx_ppo.envs.load`` uses it to refuse, with the fix, an env whose MuJoCo
Menagerie assets are missing, before MuJoCo Playground would ``git clone`` them.

``PLAYGROUND_ENVS`` is MuJoCo Playground 0.2.0's ``registry.ALL_ENVS`` (in its order) with
the family of each env and the Menagerie folders its model reads; a test checks it against
the installed Playground.

Menagerie: Playground's locomotion and manipulation envs read robot models from a copy of
MuJoCo Menagerie at ``<site-packages>/mujoco_playground/external_deps/mujoco_menagerie``
(``mujoco_playground._src.mjx_env.MENAGERIE_PATH``) and clone it from GitHub when that
folder is missing. The environment variable ``NNX_PPO_MENAGERIE_DIR`` points at a local copy
instead; ``nnx_ppo.envs.load`` then points Playground at it.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
from pathlib import Path

MENAGERIE_ENV_VAR = "NNX_PPO_MENAGERIE_DIR"
"""Environment variable naming a local MuJoCo Menagerie checkout."""
MENAGERIE_URL = "https://github.com/google-deepmind/mujoco_menagerie"
MENAGERIE_COMMIT = "1b86ece576591213e2b666ebf59508454200ca97"
"""The Menagerie commit MuJoCo Playground 0.2.0 checks out (``MENAGERIE_COMMIT_SHA``)."""

BUILTIN_ENV_NAMES = ("PointReach", "PointReachDict", "PointReachEnergy", "MemoryCue")
"""``nnx_ppo.envs.BUILTIN_ENVS``, in its order (a test keeps the two equal)."""

_DM_CONTROL = [
    "AcrobotSwingup",
    "AcrobotSwingupSparse",
    "BallInCup",
    "CartpoleBalance",
    "CartpoleBalanceSparse",
    "CartpoleSwingup",
    "CartpoleSwingupSparse",
    "CheetahRun",
    "FingerSpin",
    "FingerTurnEasy",
    "FingerTurnHard",
    "FishSwim",
    "HopperHop",
    "HopperStand",
    "HumanoidStand",
    "HumanoidWalk",
    "HumanoidRun",
    "PendulumSwingup",
    "PointMass",
    "ReacherEasy",
    "ReacherHard",
    "SwimmerSwimmer6",
    "WalkerRun",
    "WalkerStand",
    "WalkerWalk",
]

# Env name -> the Menagerie folders its model reads (from each env's ``get_assets``).
_LOCOMOTION: dict[str, tuple[str, ...]] = {
    "ApolloJoystickFlatTerrain": ("apptronik_apollo",),
    "BarkourJoystick": ("google_barkour_vb",),
    "BerkeleyHumanoidJoystickFlatTerrain": ("berkeley_humanoid",),
    "BerkeleyHumanoidJoystickRoughTerrain": ("berkeley_humanoid",),
    "G1JoystickFlatTerrain": ("unitree_g1",),
    "G1JoystickRoughTerrain": ("unitree_g1",),
    "Go1JoystickFlatTerrain": ("unitree_go1",),
    "Go1JoystickRoughTerrain": ("unitree_go1",),
    "Go1Getup": ("unitree_go1",),
    "Go1Handstand": ("unitree_go1",),
    "Go1Footstand": ("unitree_go1",),
    "H1InplaceGaitTracking": ("unitree_h1",),
    "H1JoystickGaitTracking": ("unitree_h1",),
    "Op3Joystick": ("robotis_op3",),
    "SpotFlatTerrainJoystick": ("boston_dynamics_spot",),
    "SpotGetup": ("boston_dynamics_spot",),
    "SpotJoystickGaitTracking": ("boston_dynamics_spot",),
    "T1JoystickFlatTerrain": ("booster_t1",),
    "T1JoystickRoughTerrain": ("booster_t1",),
}
_MANIPULATION: dict[str, tuple[str, ...]] = {
    "AlohaHandOver": ("aloha",),
    "AlohaSinglePegInsertion": ("aloha",),
    "PandaPickCube": ("franka_emika_panda",),
    "PandaPickCubeOrientation": ("franka_emika_panda",),
    "PandaPickCubeCartesian": ("franka_emika_panda",),
    "PandaOpenCabinet": ("franka_emika_panda",),
    "PandaRobotiqPushCube": ("franka_emika_panda", "robotiq_2f85_v4"),
    "LeapCubeReorient": ("leap_hand",),
    "LeapCubeRotateZAxis": ("leap_hand",),
    "AeroCubeRotateZAxis": ("tetheria_aero_hand_open",),
}

PLAYGROUND_FAMILIES: dict[str, str] = {
    **{name: "dm_control_suite" for name in _DM_CONTROL},
    **{name: "locomotion" for name in _LOCOMOTION},
    **{name: "manipulation" for name in _MANIPULATION},
}
"""Every MuJoCo Playground env name -> its family (``dm_control_suite``, ``locomotion``,
``manipulation``), in ``registry.ALL_ENVS`` order."""

MENAGERIE_ASSETS: dict[str, tuple[str, ...]] = {**_LOCOMOTION, **_MANIPULATION}
"""Env name -> the Menagerie folders it needs; envs not listed need no Menagerie."""


def env_names() -> list[str]:
    """Every env name ``nnx_ppo.envs.load`` knows: built-in envs first, then Playground's."""
    return [*BUILTIN_ENV_NAMES, *PLAYGROUND_FAMILIES]


def did_you_mean(name: object) -> str:
    """``" (did you mean 'PointReach'?)"`` for a misspelt env name: the known names closest
    to it (``difflib``, case-insensitive); ``""`` when none is close."""
    if not isinstance(name, str):
        return ""
    by_lower = {known.lower(): known for known in env_names()}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.7)
    if not close:
        return ""
    return f" (did you mean {' or '.join(repr(by_lower[c]) for c in close)}?)"


def source_of(name: str) -> str:
    """``"builtin"`` or ``"playground"``."""
    return "builtin" if name in BUILTIN_ENV_NAMES else "playground"


def playground_menagerie_dir() -> Path | None:
    """Where MuJoCo Playground itself looks for Menagerie (found without importing it), or
    None when Playground is not installed."""
    spec = importlib.util.find_spec("mujoco_playground")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    return package / "external_deps" / "mujoco_menagerie"


def menagerie_dir() -> Path | None:
    """The Menagerie copy envs load from: ``$NNX_PPO_MENAGERIE_DIR`` when set, otherwise
    Playground's own location."""
    configured = os.environ.get(MENAGERIE_ENV_VAR, "").strip()
    if configured:
        return Path(configured).expanduser()
    return playground_menagerie_dir()


def missing_folders(name: str) -> list[Path] | None:
    """The Menagerie folders ``name`` needs that are missing here (``[]``: none), or None
    when it needs Menagerie and MuJoCo Playground is not installed."""
    needed = MENAGERIE_ASSETS.get(name)
    if not needed:
        return []
    root = menagerie_dir()
    if root is None:
        return None
    return [root / folder for folder in needed if not (root / folder).is_dir()]


def menagerie_fix() -> str:
    """How to provide the Menagerie assets (one sentence, for every env that lacks them)."""
    return (
        f"get a copy (git clone {MENAGERIE_URL} && git -C mujoco_menagerie checkout "
        f"{MENAGERIE_COMMIT}) and set {MENAGERIE_ENV_VAR} to its directory"
    )


def missing_assets(name: str) -> str | None:
    """Why ``name`` cannot load on this machine (its Menagerie folders are missing, with
    the fix), or None when nothing is missing (or it needs no Menagerie)."""
    missing = missing_folders(name)
    if missing is None:
        return f"env {name!r} needs MuJoCo Playground, which is not installed"
    if not missing:
        return None
    where = ", ".join(str(folder) for folder in missing)
    return (
        f"env {name!r} needs MuJoCo Menagerie assets that are missing: {where}. "
        f"Fix: {menagerie_fix()}"
    )
