"""Data parallelism over several devices of one process, with ``jax.sharding``.

A run on ``N`` devices puts them on a one-axis ``Mesh`` (axis ``"envs"``). Everything that
has one entry per env (env states, recurrent network states, the teacher's states) is split
along its leading ``[B]`` axis over the mesh; parameters, optimizer state, keys and the
step counter are replicated. The jitted step is the same program as on one device: XLA
partitions it (GSPMD), so each device steps its own envs, the minibatch losses' means (and
so the gradients) and the normalizer's statistics become cross-device reductions, and the
replicated parameters stay identical on every device. One device and ``N`` devices
therefore compute the same numbers up to the order of floating-point sums.
"""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from nnx_ppo.algorithms.carry import LoopCarry

AXIS = "envs"
"""The mesh axis the env batch is split over."""


def check_devices(devices: int | None, n_envs: int, n_minibatches: int, owner: str) -> int:
    """The number of devices to train on (1 for None); raises ValueError naming the field
    when the count is not a positive int, exceeds the devices JAX sees, or does not divide
    ``n_envs`` and the minibatch size."""
    if devices is None:
        return 1
    if isinstance(devices, bool) or not isinstance(devices, int) or devices <= 0:
        raise ValueError(f"config.devices must be None or a positive integer, got {devices!r}")
    available = len(jax.devices())
    if devices > available:
        raise ValueError(
            f"config.devices is {devices} but JAX sees {available} device(s) "
            f"({jax.default_backend()})"
        )
    if n_envs % devices:
        raise ValueError(
            f"{owner}.n_envs ({n_envs}) must be divisible by config.devices ({devices}): "
            "each device steps an equal share of the envs"
        )
    minibatch = n_envs // n_minibatches
    if minibatch % devices:
        raise ValueError(
            f"the minibatch size {owner}.n_envs / {owner}.n_minibatches ({minibatch}) must be "
            f"divisible by config.devices ({devices}): each device takes an equal share"
        )
    return devices


def make_mesh(devices: int) -> Mesh:
    """A one-axis mesh over the first ``devices`` devices."""
    return Mesh(jax.devices()[:devices], (AXIS,))


def carry_shardings(mesh: Mesh, carry: LoopCarry) -> LoopCarry:
    """Shardings of a carry: per-env leaves split over ``envs``, the rest replicated."""
    split = NamedSharding(mesh, PartitionSpec(AXIS))
    replicated = NamedSharding(mesh, PartitionSpec())
    per_env = lambda tree: jax.tree.map(lambda _: split, tree)  # noqa: E731
    whole = lambda tree: jax.tree.map(lambda _: replicated, tree)  # noqa: E731
    return carry.replace(
        modules=whole(carry.modules),
        network_states=per_env(carry.network_states),
        env_states=per_env(carry.env_states),
        rng_key=replicated,
        steps_taken=replicated,
        teacher_states=per_env(carry.teacher_states),
    )


def replicated(mesh: Mesh, tree: Any) -> Any:
    """``tree`` placed whole on every device of ``mesh``."""
    return jax.device_put(tree, NamedSharding(mesh, PartitionSpec()))
