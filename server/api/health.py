"""``GET /api/health``: status and version for anyone; workers and devices with the token."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from server import __version__
from server.api.deps import ServicesDep
from server.schemas import DeviceUsePublic, HealthPublic, NodePublic, WorkerPublic

router = APIRouter(tags=["health"])


@router.get("/health", response_model=HealthPublic, response_model_exclude_none=True)
async def health(request: Request, services: ServicesDep) -> HealthPublic:
    if not request.scope.get("state", {}).get("authenticated"):
        return HealthPublic(status="ok", version=__version__)
    rows = await run_in_threadpool(services.store.workers)
    now = time.time()
    workers = [
        WorkerPublic(
            id=w.id,
            hostname=w.hostname,
            pid=w.pid,
            heartbeat_at=w.heartbeat_at,
            seconds_since_heartbeat=round(now - w.heartbeat_at, 3),
            slots=w.slots,
            device_use=[DeviceUsePublic(**use) for use in w.device_use or []],
        )
        for w in rows
    ]
    live = [w for w in rows if now - w.heartbeat_at <= services.settings.heartbeat_timeout]
    backend = live[0].backend if live else None
    devices = sorted({d for w in live for d in w.devices})
    executor = live[0].executor if live else services.settings.executor
    on_ray = [w for w in live if w.executor == "ray" and w.cluster is not None]
    nodes = [NodePublic(**node) for node in on_ray[0].cluster or []] if on_ray else None
    return HealthPublic(
        status="ok",
        version=__version__,
        jax_backend=backend,
        devices=devices,
        executor="ray" if executor == "ray" else "local",
        nodes=nodes,
        workers=workers,
    )
