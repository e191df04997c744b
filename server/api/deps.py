"""Dependencies shared by the routers: the service objects, and a run looked up once
(``RunDep``: 404 for an unknown or malformed id)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from starlette.requests import HTTPConnection

from server.api.events_hub import ServiceEventsHub
from server.api.stream_hub import StreamHub
from server.settings import Settings
from server.spec.checker import EnvCatalogue, SpecChecker
from server.store.models import RunRow
from server.store.run_store import RUN_ID as RUN_ID
from server.store.run_store import RunNotFound, RunStore


@dataclass
class Services:
    settings: Settings
    store: RunStore
    checker: SpecChecker
    catalogue: EnvCatalogue
    hub: StreamHub
    events: ServiceEventsHub


def get_services(connection: HTTPConnection) -> Services:
    services: Services = connection.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


def lookup_run(services: Services, run_id: str) -> RunRow:
    if not RUN_ID.fullmatch(run_id):
        raise HTTPException(404, f"run {run_id!r} not found")
    try:
        return services.store.get(run_id)
    except RunNotFound:
        raise HTTPException(404, f"run {run_id!r} not found") from None


def get_run(request: Request, run_id: str) -> RunRow:
    return lookup_run(get_services(request), run_id)


RunDep = Annotated[RunRow, Depends(get_run)]


def run_dir(services: Services, run: RunRow) -> Path:
    return services.settings.run_dir(run.id)
