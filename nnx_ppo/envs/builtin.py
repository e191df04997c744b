"""Pure-JAX built-in environments: tiny, fast to jit, for tests and demos.

Every env here is a single unbatched environment with the MuJoCo Playground ``MjxEnv``
interface (``reset(rng) -> State``, ``step(state, action) -> State``, ``observation_size``,
``action_size``). Actions are float32 ``[action_size]`` in [-1, 1] (larger values are
clipped); ``two_arm.TwoArmReach`` takes a dict of them, one per action head. No env
resets itself and none has a time limit of its own: wrap it in ``EpisodeWrapper``
(``nnx_ppo.envs.load`` does) for that.

The envs are defined in ``builtin_env`` (the base class), ``point_reach``, ``memory_cue`` and
``two_arm``; ``registry`` lists them by name. This module keeps the names they had here.
"""

from __future__ import annotations

from nnx_ppo.envs.builtin_env import BuiltinEnv as BuiltinEnv
from nnx_ppo.envs.builtin_env import _require_float as _require_float
from nnx_ppo.envs.builtin_env import _require_int as _require_int
from nnx_ppo.envs.memory_cue import MemoryCue as MemoryCue
from nnx_ppo.envs.memory_cue import MemoryCueData as MemoryCueData
from nnx_ppo.envs.point_reach import PointReach as PointReach
from nnx_ppo.envs.point_reach import PointReachData as PointReachData
from nnx_ppo.envs.point_reach import PointReachDict as PointReachDict
from nnx_ppo.envs.point_reach import PointReachEnergy as PointReachEnergy
from nnx_ppo.envs.registry import BUILTIN_ENVS as BUILTIN_ENVS
