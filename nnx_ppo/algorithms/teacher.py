"""Rebuilding a trained policy from a checkpoint, to serve as a distillation teacher.

Runs in the host loop's world (outside jit): it reads files.
"""

from __future__ import annotations

import os
import re
from typing import Any

from flax import nnx

from nnx_ppo.algorithms.checkpointing import load_networks
from nnx_ppo.networks.from_spec import make_networks

_STEP_DIR = re.compile(r"step_(\d{10})")


def latest_checkpoint(directory: str) -> str | None:
    """The ``step_XXXXXXXXXX`` subdirectory of ``directory`` with the highest step, if any."""
    if not os.path.isdir(directory):
        return None
    steps = [name for name in os.listdir(directory) if _STEP_DIR.fullmatch(name)]
    return os.path.join(directory, max(steps)) if steps else None


def load_teacher(
    checkpoint_path: str, network_spec: dict[str, Any], obs_size: Any, action_size: int
) -> nnx.Module:
    """Rebuilds the policy saved by ``make_checkpoint_fn``, in eval mode.

    Args:
        checkpoint_path: A checkpoint directory (``.../step_0000500000``), or a run's
            checkpoint directory holding ``step_*`` subdirectories (the newest is loaded).
        network_spec: The network the checkpoint was trained with, as ``make_networks``
            (``nnx_ppo.networks.from_spec``) takes it: ``{"kind": "mlp" | "lstm", **factory
            fields}``.
        obs_size: The env's ``observation_size``.
        action_size: The env's ``action_size``.

    Returns:
        The network with the checkpoint's parameters, normalizer statistics and random
        state, in eval mode (``.eval()``: a deterministic sampler).

    Raises:
        ValueError: If there is no checkpoint at ``checkpoint_path``, if ``network_spec``
            cannot be built, or if the checkpoint does not hold this network (the message
            names the differing variables).
    """
    path = os.path.abspath(os.fspath(checkpoint_path))
    if not os.path.exists(os.path.join(path, "metadata.pkl")):
        newest = latest_checkpoint(path)
        if newest is None:
            raise ValueError(
                f"checkpoint_path {checkpoint_path!r} is neither a checkpoint directory nor "
                "a directory of step_* checkpoints"
            )
        path = newest
    try:
        network = make_networks(dict(network_spec), obs_size, action_size, seed=0)
    except TypeError as e:  # an unknown factory field
        raise ValueError(f"network_spec {network_spec!r} cannot be built: {e}") from e

    try:
        load_networks(path, network)
    except FileNotFoundError as e:
        raise ValueError(f"checkpoint_path {checkpoint_path!r}: {e}") from e
    except ValueError as e:
        raise ValueError(f"cannot load a network of spec {network_spec!r} from {path}: {e}") from e
    network.eval()
    return network
