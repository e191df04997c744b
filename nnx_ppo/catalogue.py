"""Which envs exist, and whether each can load here, without importing JAX or Playground.

The service's API process lists envs from this module within a second of starting (it must
not import JAX); ``nnx_ppo.envs.load`` uses it to refuse, with the fix, an env whose MuJoCo
Menagerie assets are missing, before MuJoCo Playground would ``git clone`` them.

``PLAYGROUND_ENVS`` is MuJoCo Playground 0.2.0's ``registry.ALL_ENVS`` (in its order) with
the family of each env and the Menagerie folders its model reads, and ``RANDOMIZED_ENVS``
the envs it has a domain randomizer for; a test checks both against the installed
Playground.

Menagerie: Playground's locomotion and manipulation envs read robot models from MuJoCo
Menagerie; ``nnx_ppo.menagerie`` finds them (``$NNX_PPO_MENAGERIE_DIR``, Playground's own
copy, or the asset wheels of the ``nnx-ppo[menagerie]`` extra).
"""

from __future__ import annotations

import difflib
from pathlib import Path

from nnx_ppo import menagerie, plugins

MENAGERIE_ENV_VAR = menagerie.ENV_VAR
"""Environment variable naming a local MuJoCo Menagerie checkout (wins when set)."""

BUILTIN_ENV_NAMES = (
    "PointReach",
    "PointReachDict",
    "PointReachEnergy",
    "MemoryCue",
    "TwoArmReach",
)
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

RANDOMIZED_ENVS: tuple[str, ...] = (
    "BerkeleyHumanoidJoystickFlatTerrain",
    "BerkeleyHumanoidJoystickRoughTerrain",
    "G1JoystickFlatTerrain",
    "G1JoystickRoughTerrain",
    "Go1JoystickFlatTerrain",
    "Go1JoystickRoughTerrain",
    "Go1Getup",
    "Go1Handstand",
    "Go1Footstand",
    "T1JoystickFlatTerrain",
    "T1JoystickRoughTerrain",
    "LeapCubeReorient",
    "LeapCubeRotateZAxis",
    "AeroCubeRotateZAxis",
)
"""The envs that have a domain randomizer in MuJoCo Playground, in ``registry.ALL_ENVS``
order (``registry.get_domain_randomizer``; ``nnx_ppo.envs.randomization.randomizer`` loads
it)."""


def env_names() -> list[str]:
    """Every env name ``nnx_ppo.envs.load`` knows: built-in envs first, then Playground's."""
    return [*BUILTIN_ENV_NAMES, *PLAYGROUND_FAMILIES]


def plugin_env_names() -> list[str]:
    """The installed plugin envs (``nnx_ppo.plugins``, entry-point group ``nnx_ppo.envs``),
    sorted, none imported; a built-in or Playground env's name stays theirs."""
    installed = plugins.entry_points(plugins.ENV_GROUP)
    return sorted(
        n for n in installed if n not in BUILTIN_ENV_NAMES and n not in PLAYGROUND_FAMILIES
    )


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
    """``"builtin"``, ``"playground"`` or, for a plugin env, ``"plugin:<package>"``."""
    if name in BUILTIN_ENV_NAMES:
        return "builtin"
    if name in PLAYGROUND_FAMILIES:
        return "playground"
    entry = plugins.entry_points(plugins.ENV_GROUP).get(name)
    return "playground" if entry is None else f"plugin:{plugins.package_of(entry)}"


def menagerie_root(name: str) -> Path | None:
    """The Menagerie root env ``name`` loads from (``nnx_ppo.menagerie.root_for``), or None
    when it needs no Menagerie or its folders are missing."""
    needed = MENAGERIE_ASSETS.get(name)
    return menagerie.root_for(needed) if needed else None


def missing_folders(name: str) -> list[Path] | None:
    """The Menagerie folders ``name`` needs that no root holds (``[]``: none; under
    ``$NNX_PPO_MENAGERIE_DIR`` when it is set), or None when it needs Menagerie and MuJoCo
    Playground is not installed."""
    needed = MENAGERIE_ASSETS.get(name)
    if not needed or menagerie.root_for(needed) is not None:
        return []
    configured = menagerie.configured_dir()
    if configured is not None:
        return [configured / folder for folder in needed if not (configured / folder).is_dir()]
    if menagerie.playground_dir() is None:
        return None
    return [Path(folder) for folder in needed]


def menagerie_fix() -> str:
    """How to provide the Menagerie assets (one sentence, for every env that lacks them)."""
    return (
        f"{menagerie.EXTRA} (the robot models' asset wheels), or set {MENAGERIE_ENV_VAR} to a "
        f"Menagerie checkout (git clone {menagerie.URL} && git -C mujoco_menagerie checkout "
        f"{menagerie.COMMIT})"
    )


def missing_assets(name: str) -> str | None:
    """Why ``name`` cannot load on this machine (its Menagerie folders are missing, with
    the fix), or None when nothing is missing (or it needs no Menagerie)."""
    needed = MENAGERIE_ASSETS.get(name)
    if not needed:
        return None
    return menagerie.missing_reason(name, needed)
