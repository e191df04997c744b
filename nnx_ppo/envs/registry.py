"""``BUILTIN_ENVS``: the built-in envs by the name ``nnx_ppo.envs.load`` knows them under."""

from __future__ import annotations

from nnx_ppo.envs.builtin_env import BuiltinEnv
from nnx_ppo.envs.memory_cue import MemoryCue
from nnx_ppo.envs.point_reach import PointReach, PointReachDict, PointReachEnergy
from nnx_ppo.envs.two_arm import TwoArmReach

BUILTIN_ENVS: dict[str, type[BuiltinEnv]] = {
    "PointReach": PointReach,
    "PointReachDict": PointReachDict,
    "PointReachEnergy": PointReachEnergy,
    "MemoryCue": MemoryCue,
    "TwoArmReach": TwoArmReach,
}
"""Built-in envs by the name ``nnx_ppo.envs.load`` knows them under."""
