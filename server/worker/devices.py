"""A worker's devices, which runs hold them, and the environment that pins a run process
to its share.

A worker has one device per GPU (``nvidia-smi -L``); a CPU-only worker has ``workers``
host "devices" (default 1), so that runs asking for several devices (``resources.gpus``)
can exercise the library's data parallelism on a CPU. Each device takes up to
``runs_per_device`` runs at once. A run asking for N devices gets N distinct devices, the
least used first; it waits queued while fewer are free.

The environment of a run process (``placement_env``):

- on GPUs, ``CUDA_VISIBLE_DEVICES=i,j`` (JAX then sees exactly its devices);
- on a CPU, for N > 1, ``XLA_FLAGS=--xla_force_host_platform_device_count=N``;
- with ``runs_per_device > 1``, ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` (XLA would take
  75% of a GPU per process), or ``XLA_PYTHON_CLIENT_MEM_FRACTION`` when the setting
  ``device_memory_fraction`` is given.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from server.settings import Settings

HOST_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


@dataclass(frozen=True)
class Device:
    """One device of a worker: ``name`` is ``gpu:<CUDA index>`` or ``cpu:<i>``."""

    kind: str
    index: str

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.index}"


@dataclass(frozen=True)
class Placement:
    """Where one run process executes: its devices and the environment that pins it."""

    devices: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.devices)


def requested_devices(spec: Mapping[str, Any]) -> int:
    """How many devices a stored run spec asks for (``resources.gpus``; default 1)."""
    resources = spec.get("resources") or {}
    return int(resources.get("gpus") or 1)


def gpu_indices() -> list[str]:
    """The CUDA indices of this machine's GPUs (``nvidia-smi -L``); none without a driver,
    or when ``CUDA_VISIBLE_DEVICES`` is set empty."""
    if not shutil.which("nvidia-smi") or os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return []
    try:
        listing = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(listing.splitlines()) if line.startswith("GPU")]


def detect_devices(workers: int | None) -> list[Device]:
    """One device per GPU, or ``workers`` (default 1) host devices without one."""
    gpus = gpu_indices()
    if gpus:
        return [Device("gpu", i) for i in gpus]
    return [Device("cpu", str(i)) for i in range(workers or 1)]


def placement_env(
    devices: Sequence[Device], settings: Settings, inherited: Mapping[str, str]
) -> dict[str, str]:
    """The variables a run process on ``devices`` sets before JAX starts (see the module
    doc); ``inherited`` is the worker's own environment (its ``XLA_FLAGS`` are kept)."""
    env: dict[str, str] = {}
    gpus = [d.index for d in devices if d.kind == "gpu"]
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    elif len(devices) > 1:
        kept = re.sub(rf"{HOST_DEVICE_COUNT_FLAG}=\S*", "", inherited.get("XLA_FLAGS", ""))
        env["XLA_FLAGS"] = " ".join([*kept.split(), f"{HOST_DEVICE_COUNT_FLAG}={len(devices)}"])
    if settings.device_memory_fraction is not None:
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{settings.device_memory_fraction:g}"
    elif settings.runs_per_device > 1:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    return env


class DevicePool:
    """Which runs hold which devices; at most ``runs_per_device`` runs per device and, when
    ``max_runs`` is set, at most that many runs in all."""

    def __init__(self, devices: Sequence[Device], runs_per_device: int, max_runs: int | None):
        self.devices = list(devices)
        self.runs_per_device = runs_per_device
        self.max_runs = max_runs
        self._holders: dict[str, list[str]] = {d.name: [] for d in self.devices}
        self._runs: dict[str, list[Device]] = {}

    def free_count(self) -> int:
        """How many distinct devices a new run could get now."""
        if self.max_runs is not None and len(self._runs) >= self.max_runs:
            return 0
        return sum(1 for d in self.devices if len(self._holders[d.name]) < self.runs_per_device)

    def assign(self, run_id: str, count: int) -> list[Device] | None:
        """``count`` distinct devices for ``run_id``, the least used first (then in order);
        None when fewer are free."""
        if count > self.free_count():
            return None
        free = [d for d in self.devices if len(self._holders[d.name]) < self.runs_per_device]
        chosen = sorted(free, key=lambda d: len(self._holders[d.name]))[:count]
        chosen.sort(key=self.devices.index)
        for device in chosen:
            self._holders[device.name].append(run_id)
        self._runs[run_id] = chosen
        return chosen

    def release(self, run_id: str) -> None:
        for device in self._runs.pop(run_id, []):
            self._holders[device.name].remove(run_id)

    def holders(self) -> dict[str, list[str]]:
        """Device name -> the runs on it (a copy)."""
        return {name: list(runs) for name, runs in self._holders.items()}
