"""A run spec's ``resources`` judged against the devices of the registered workers, or,
for a worker on a Ray cluster, against the cluster's nodes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from server.schemas import ResourcesSpec
from server.store.models import WorkerRow


def resource_errors(
    resources: ResourcesSpec | None, config: Mapping[str, Any], workers: Sequence[WorkerRow]
) -> list[dict[str, Any]]:
    """FastAPI-style field errors: ``resources.gpus`` above the device count of every
    registered local worker (naming what they have), ``gpus``/``cpus`` above what the
    largest node of a Ray cluster has (a task runs on one node), or a ``config.devices``
    that disagrees with ``gpus``. With no worker registered there is nothing to judge
    against: the run waits for one."""
    if resources is None:
        return []
    errors = []
    local = [w for w in workers if w.executor != "ray"]
    nodes = [n for w in workers if w.executor == "ray" for n in w.cluster or [] if n.get("alive")]
    if resources.gpus is not None and local and not nodes:
        largest = max(local, key=lambda w: len(w.slots))
        if resources.gpus > len(largest.slots):
            have = ", ".join(f"{w.id}: {len(w.slots)} ({', '.join(w.slots)})" for w in local)
            errors.append(
                _error(
                    ("resources", "gpus"),
                    f"asks for {resources.gpus} devices; the most any worker has is "
                    f"{len(largest.slots)} (workers: {have})",
                )
            )
    for field, key in (("gpus", "GPU"), ("cpus", "CPU")):
        asked = getattr(resources, field)
        most = max((float(n.get("total", {}).get(key, 0)) for n in nodes), default=None)
        if asked is not None and most is not None and asked > most:
            errors.append(
                _error(
                    ("resources", field),
                    f"asks for {asked}; the largest node of the Ray cluster has {most:g}",
                )
            )
    devices = config.get("devices")
    if resources.gpus is not None and devices is not None and devices != resources.gpus:
        errors.append(
            _error(
                ("config", "devices"),
                f"is {devices} but resources.gpus is {resources.gpus}: set resources.gpus "
                "alone (the worker assigns the devices)",
            )
        )
    return errors


def _error(loc: tuple[str, ...], msg: str) -> dict[str, Any]:
    return {"loc": ["body", *loc], "msg": msg, "type": "value_error"}
