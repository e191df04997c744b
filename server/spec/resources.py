"""A run spec's ``resources`` judged against the devices of the registered workers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from server.schemas import ResourcesSpec
from server.store.models import WorkerRow


def resource_errors(
    resources: ResourcesSpec | None, config: Mapping[str, Any], workers: Sequence[WorkerRow]
) -> list[dict[str, Any]]:
    """FastAPI-style field errors: ``resources.gpus`` above the device count of every
    registered worker (naming what they have), or a ``config.devices`` that disagrees
    with it. With no worker registered there is nothing to judge against: the run waits
    for one."""
    if resources is None or resources.gpus is None:
        return []
    errors = []
    if workers:
        largest = max(workers, key=lambda w: len(w.slots))
        if resources.gpus > len(largest.slots):
            have = ", ".join(f"{w.id}: {len(w.slots)} ({', '.join(w.slots)})" for w in workers)
            errors.append(
                _error(
                    ("resources", "gpus"),
                    f"asks for {resources.gpus} devices; the most any worker has is "
                    f"{len(largest.slots)} (workers: {have})",
                )
            )
    devices = config.get("devices")
    if devices is not None and devices != resources.gpus:
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
