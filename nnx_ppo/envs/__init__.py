"""Environments: built-in pure-JAX envs, MuJoCo Playground loading by name, wrappers.

Every env is a single, unbatched environment with the MuJoCo Playground ``MjxEnv``
interface: ``reset(rng) -> State``, ``step(state, action) -> State``, ``observation_size``
and ``action_size``. The trainer vmaps over envs and resets finished envs itself.
"""

from nnx_ppo.envs.builtin import (
    BuiltinEnv,
    MemoryCue,
    MemoryCueData,
    PointReach,
    PointReachData,
    PointReachDict,
    PointReachEnergy,
)
from nnx_ppo.envs.loading import (
    AssetsMissing,
    available_envs,
    describe,
    load,
    unavailable_reason,
)
from nnx_ppo.envs.registry import BUILTIN_ENVS
from nnx_ppo.envs.state import State
from nnx_ppo.envs.two_arm import TwoArmReach, TwoArmReachData
from nnx_ppo.envs.wrappers import EpisodeWrapper

__all__ = [
    "BUILTIN_ENVS",
    "AssetsMissing",
    "BuiltinEnv",
    "EpisodeWrapper",
    "MemoryCue",
    "MemoryCueData",
    "PointReach",
    "PointReachData",
    "PointReachDict",
    "PointReachEnergy",
    "State",
    "TwoArmReach",
    "TwoArmReachData",
    "available_envs",
    "describe",
    "load",
    "unavailable_reason",
]
