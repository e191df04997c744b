"""Every dependency of the routers: the service objects (``ServicesDep``,
``SweepServicesDep``, ``RecordingServicesDep``), a run, a sweep or a recording looked up
once (``RunDep``, ``SweepDep``, ``RecordingDep``: 404 for an unknown or malformed id), and
the run token of the report routes (``ReportingRun``: 401 for a missing token or another
run's)."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from starlette.requests import HTTPConnection

from server.api.events_hub import ServiceEventsHub
from server.api.stream_hub import StreamHub
from server.api.sweep_driver import SweepDriver
from server.api.sweep_hub import SweepHub
from server.recording.runner import RecordingRunner
from server.security import request_token
from server.settings import Settings
from server.spec.checker import EnvCatalogue, SpecChecker
from server.store import run_reports
from server.store.models import RecordingRow, RunRow, SweepRow
from server.store.recording_store import RecordingNotFound, RecordingStore
from server.store.run_store import RUN_ID as RUN_ID
from server.store.run_store import RunNotFound, RunStore
from server.store.sweep_store import SweepNotFound, SweepStore


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


# -- the report routes: a run process's own run token --------------------------------------


def run_token(request: Request) -> str:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.headers.raw}
    token = request_token(request.scope, headers)
    if token is None:
        raise HTTPException(401, "missing run token", headers={"WWW-Authenticate": "Bearer"})
    return token


def authorized_run(request: Request, run_id: str) -> RunRow:
    run = lookup_run(get_services(request), run_id)
    if not run_reports.token_valid(run, run_token(request)):
        raise HTTPException(401, "not this run's current run token")
    return run


ReportingRun = Annotated[RunRow, Depends(authorized_run)]
Token = Annotated[str, Depends(run_token)]


# -- sweeps ------------------------------------------------------------------------------

SWEEP_ID = re.compile(r"s[0-9a-f]{11}")


@dataclass
class SweepServices:
    store: SweepStore
    driver: SweepDriver
    hub: SweepHub


def get_sweep_services(connection: HTTPConnection) -> SweepServices:
    services: SweepServices = connection.app.state.sweeps
    return services


SweepServicesDep = Annotated[SweepServices, Depends(get_sweep_services)]


def lookup_sweep(services: SweepServices, sweep_id: str) -> SweepRow:
    try:
        if not SWEEP_ID.fullmatch(sweep_id):
            raise SweepNotFound(sweep_id)
        return services.store.get(sweep_id)
    except SweepNotFound:
        raise HTTPException(404, f"sweep {sweep_id!r} not found") from None


def get_sweep(request: Request, sweep_id: str) -> SweepRow:
    return lookup_sweep(get_sweep_services(request), sweep_id)


SweepDep = Annotated[SweepRow, Depends(get_sweep)]


# -- recordings --------------------------------------------------------------------------


@dataclass
class RecordingServices:
    store: RecordingStore
    runner: RecordingRunner
    shapes: dict[tuple[str, int, float], dict[str, Any]] = field(default_factory=dict)
    """The checker's answer per checkpoint (run, step, modification time)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


def get_recording_services(connection: HTTPConnection) -> RecordingServices:
    services: RecordingServices = connection.app.state.recordings
    return services


RecordingServicesDep = Annotated[RecordingServices, Depends(get_recording_services)]


def get_recording(request: Request, run: RunDep, recording_id: int) -> RecordingRow:
    recordings = get_recording_services(request)
    try:
        if not 0 <= recording_id < 2**62:
            raise RecordingNotFound(run.id, recording_id)
        return recordings.store.get(run.id, recording_id)
    except RecordingNotFound as error:
        raise HTTPException(404, str(error)) from None


RecordingDep = Annotated[RecordingRow, Depends(get_recording)]
