"""``system/*`` metrics of a run process, sampled by a background thread.

Every ``interval`` seconds the thread samples the process's CPU use and resident memory,
the host's available memory (``psutil``) and, where NVIDIA's driver answers (``nvidia-ml-py``),
each of the run's GPUs: ``system/gpu{i}/utilization`` (%), ``memory_used`` and
``memory_total`` (bytes), ``temperature`` (°C) and ``power_w``, ``i`` being the GPU's CUDA
index. Without a GPU or a driver the GPU metrics are absent, never an error. The sample is
handed to the reporter, which stores it with the run's next metrics (at that step), so
training never waits for a sample.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

import psutil  # type: ignore[import-untyped]


def nvml() -> Any | None:
    """The initialised ``pynvml`` module, or None without the package or a driver."""
    try:
        import pynvml  # type: ignore[import-untyped]

        pynvml.nvmlInit()
    except Exception:  # no package, no driver, no GPU: no GPU metrics
        return None
    return pynvml


def visible_gpus(nvml: Any, env: Mapping[str, str]) -> list[int]:
    """The CUDA indices this process may use: ``CUDA_VISIBLE_DEVICES`` (indices), else all."""
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        items = [item.strip() for item in listed.split(",") if item.strip()]
        if all(item.isdigit() for item in items):
            return [int(item) for item in items]
    return list(range(nvml.nvmlDeviceGetCount()))


def gpu_metrics(nvml: Any, index: int) -> dict[str, float]:
    """One GPU's metrics; a value the device does not report is left out."""
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    prefix = f"system/gpu{index}/"
    out: dict[str, float] = {}
    readers: dict[str, Callable[[], float]] = {
        "utilization": lambda: float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
        "memory_used": lambda: float(nvml.nvmlDeviceGetMemoryInfo(handle).used),
        "memory_total": lambda: float(nvml.nvmlDeviceGetMemoryInfo(handle).total),
        "temperature": lambda: float(nvml.nvmlDeviceGetTemperature(handle, 0)),
        "power_w": lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
    }
    for name, read in readers.items():
        with contextlib.suppress(Exception):  # not supported on this device
            out[prefix + name] = read()
    return out


class SystemSampler:
    """Samples this process, the host and the visible GPUs."""

    def __init__(self, env: Mapping[str, str] | None = None):
        self.process = psutil.Process()
        self.process.cpu_percent(None)  # the first reading starts the measured interval
        self.nvml = nvml()
        self.gpus = visible_gpus(self.nvml, env or os.environ) if self.nvml else []

    def sample(self) -> dict[str, float]:
        values = {
            "system/cpu_percent": float(self.process.cpu_percent(None)),
            "system/rss_bytes": float(self.process.memory_info().rss),
            "system/host_memory_available_bytes": float(psutil.virtual_memory().available),
        }
        for index in self.gpus:
            with contextlib.suppress(Exception):  # a GPU that stops answering
                values.update(gpu_metrics(self.nvml, index))
        return values


class SystemMetricsThread:
    """Hands a sample to ``report`` every ``interval`` seconds until ``stop``."""

    def __init__(self, report: Callable[[dict[str, float]], None], interval: float):
        self.report = report
        self.interval = interval
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="system-metrics")

    def start(self) -> SystemMetricsThread:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()
        self._thread.join(5)

    def _loop(self) -> None:
        sampler = SystemSampler()
        while not self._done.wait(self.interval):
            try:
                self.report(sampler.sample())
            except Exception:  # a sample must never end the run
                continue
