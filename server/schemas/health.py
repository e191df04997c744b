"""The service's health: version, devices, workers, the Ray cluster's nodes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class DeviceUsePublic(BaseModel):
    """One device of a worker as of its last heartbeat; GPU figures where the driver
    answers (absent otherwise)."""

    device: str
    runs: list[str] = Field(description="The runs placed on this device now.")
    utilization: float | None = Field(default=None, description="GPU utilization, %.")
    memory_used: float | None = Field(default=None, description="GPU memory used, bytes.")
    memory_total: float | None = Field(default=None, description="GPU memory, bytes.")
    temperature: float | None = Field(default=None, description="GPU temperature, °C.")
    power_w: float | None = Field(default=None, description="GPU power draw, W.")


class WorkerPublic(BaseModel):
    id: str
    hostname: str
    pid: int
    heartbeat_at: float
    seconds_since_heartbeat: float
    slots: list[str]
    device_use: list[DeviceUsePublic] = Field(default_factory=list)


class NodePublic(BaseModel):
    """A node of the Ray cluster, as of the worker's last heartbeat."""

    node_id: str
    address: str | None = None
    alive: bool
    head: bool = Field(default=False, description="The cluster's head node.")
    total: dict[str, float] = Field(description="Its resources (CPU, GPU, memory, custom).")
    free: dict[str, float] = Field(description="What is not taken by tasks now.")


class HealthPublic(BaseModel):
    status: Literal["ok"]
    version: str
    jax_backend: str | None = None
    devices: list[str] | None = None
    executor: Literal["local", "ray"] | None = Field(
        default=None, description="Where run processes execute: this host, or a Ray cluster."
    )
    nodes: list[NodePublic] | None = Field(
        default=None, description="Ray executor: the cluster's nodes."
    )
    workers: list[WorkerPublic] | None = None
