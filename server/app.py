"""The app factory: FastAPI with a lifespan that migrates the database and starts the
service's helpers (spec checker, env catalogue, stream hub, optionally the local worker
supervisor), the API routers under ``/api`` and the dashboard at ``/``."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from server import __version__, values
from server.api import (
    artifacts,
    envs,
    events,
    exports,
    health,
    metrics,
    recordings,
    report,
    runs,
    stream,
    sweeps,
    tracked,
)
from server.api.crash_watch import CrashWatch
from server.api.deps import RecordingServices, Services, SweepServices
from server.api.events_hub import ServiceEventsHub
from server.api.stream_hub import StreamHub
from server.api.sweep_driver import SweepDriver
from server.api.sweep_hub import SweepHub
from server.api_docs import add_docs
from server.headers import ERROR_HEADERS, SecurityHeaders
from server.recording.runner import RecordingRunner
from server.security import COOKIE, AccessMiddleware, BodyTooLarge, token_matches
from server.settings import Settings
from server.spec.checker import EnvCatalogue, SpecChecker
from server.store.db import make_engine, make_sessionmaker, migrate
from server.store.recording_store import RecordingStore
from server.store.run_store import RunStore
from server.store.sweep_store import SweepStore
from server.user_text import MAX_JSON_DEPTH, json_depth, printable
from server.worker.supervisor_process import SupervisorProcess

log = logging.getLogger("nnx_ppo.server")

FRONTEND_DIST = Path(__file__).resolve().parent.parent / "frontend" / "dist"


def create_app(settings: Settings, *, with_worker: bool = True) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        settings.ensure_dirs()
        migrate(settings.db_url)
        engine = make_engine(settings.db_url)
        store = RunStore(make_sessionmaker(engine), settings.runs_dir)
        services = Services(
            settings,
            store,
            SpecChecker(),
            EnvCatalogue(settings.data_dir, settings.list_playground_envs),
            StreamHub(store),
            ServiceEventsHub(store),
        )
        app.state.services = services
        services.checker.start()
        services.catalogue.start()
        services.hub.start()
        services.events.start()
        sweep_store = SweepStore(store.sessions, store)
        app.state.sweeps = SweepServices(
            sweep_store, SweepDriver(sweep_store, store), SweepHub(sweep_store)
        )
        app.state.sweeps.driver.start()
        app.state.sweeps.hub.start()
        crash_watch = CrashWatch(store, settings.tracked_timeout_seconds)
        crash_watch.start()
        recording_store = RecordingStore(store.sessions)
        runner = RecordingRunner(settings, store, recording_store)
        app.state.recordings = RecordingServices(recording_store, runner)
        runner.start()
        worker = SupervisorProcess(settings) if with_worker else None
        if worker is not None:
            worker.start()
        previous_thresholds = tune_gc_for_serving()
        try:
            yield
        finally:
            restore_gc(previous_thresholds)
            if worker is not None:
                worker.stop()
            runner.stop()
            app.state.sweeps.driver.stop()
            crash_watch.stop()
            await app.state.sweeps.hub.stop()
            await services.hub.stop()
            await services.events.stop()
            services.checker.stop()
            services.catalogue.stop()
            engine.dispose()

    app = FastAPI(
        title="nnx-ppo",
        version=__version__,
        lifespan=lifespan,
        openapi_url="/api/openapi.json",
        docs_url=None,  # server.api_docs: the same pages with their assets served from here
        redoc_url=None,
    )
    api = APIRouter(prefix="/api")
    api.include_router(tracked.router)  # before runs: /runs/track is no run id
    routers = (health, envs, runs, metrics, artifacts, recordings, stream, events, exports)
    for module in (*routers, sweeps, report):
        api.include_router(module.router)
    api.include_router(tracked.finish_router)
    app.include_router(api)
    _add_error_handlers(app)
    add_docs(app, "/api/openapi.json")
    _add_dashboard(app, settings)
    app.add_middleware(
        AccessMiddleware,
        token=settings.token,
        allowed_hosts=settings.allowed_hosts,
        max_body_bytes=settings.max_body_bytes,
        max_upload_bytes=settings.max_upload_bytes,
    )
    app.add_middleware(SecurityHeaders)  # outermost: refusals carry the headers too
    return app


YOUNG_GC_THRESHOLD = 20_000
"""Allocations between collections of the youngest generation while serving (CPython's
default: 700); the older generations, counted in young collections, follow: ~28 times
fewer collections of each."""


def tune_gc_for_serving() -> tuple[int, ...]:
    """Readies the process's garbage collector to serve, once start-up is done: moves every
    object alive now (modules, routes, schemas, the store's caches) to the permanent
    generation, which no collection scans again, and collects less often.

    Under load (``bench/reliability_load.py``: two runs training on a 2-core machine,
    websocket followers and pollers on the API), each full collection walked the ~150k
    start-up objects: 74-214 ms with the event loop stopped, the API's slowest requests.
    Frozen, one walks what serving has kept (~30k objects) in ~20 ms, and with the higher
    threshold a 20 s run of that bench has one young collection and no full one.
    Collecting first leaves only live objects to freeze.
    Process-wide: called from the served app's lifespan only, never on import, and undone
    by :func:`restore_gc` when it ends (an app served in a test process leaves no frozen
    heap behind).

    Returns:
        The thresholds it replaced.
    """
    previous = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_GC_THRESHOLD, *previous[1:])
    return previous


def restore_gc(thresholds: tuple[int, ...]) -> None:
    """Undoes :func:`tune_gc_for_serving`: the frozen objects go back to the oldest
    generation (collectable again) and the thresholds are ``thresholds``."""
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(BodyTooLarge)
    async def too_large(_request: Request, _error: BodyTooLarge) -> JSONResponse:
        return JSONResponse({"detail": "request body too large"}, status_code=413)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, error: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes the input, which JSON cannot carry when it holds a
        # NaN or an infinity (Python's json reads them): that was a 500.
        # Nor can it echo an input nested past the bound (a RecursionError: a 500).
        errors = [
            {k: v for k, v in e.items() if k != "input" or json_depth(v) <= MAX_JSON_DEPTH}
            for e in error.errors()
        ]
        return JSONResponse({"detail": _json_safe(jsonable_encoder(errors))}, 422)

    @app.exception_handler(ClientDisconnect)
    async def disconnected(request: Request, _error: ClientDisconnect) -> Response:
        # The client left mid-body (an abandoned upload): nothing was kept, nobody reads
        # the answer, and it is not the service's error.
        log.info("client disconnected during %s %s", request.method, printable(request.url.path))
        return Response(status_code=400)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, printable(request.url.path))
        # Starlette answers this one outside every middleware: the headers come along here.
        return JSONResponse(
            {"detail": f"internal error: {type(error).__name__}"}, 500, headers=ERROR_HEADERS
        )


def _json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as the strings of ``server.values``."""
    if isinstance(value, float):
        return values.encode(value)
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    return value


_NOT_BUILT = """<!doctype html><title>nnx-ppo</title>
<p>The dashboard is not built. Run <code>make setup</code> (or <code>npm ci && npm run build</code>
in <code>frontend/</code>); the API is at <a href="/api/docs">/api/docs</a>.</p>"""


def _add_dashboard(app: FastAPI, settings: Settings) -> None:
    """``/?token=T`` stores the token in a cookie and redirects to ``/``; other paths outside
    ``/api`` serve the built dashboard (files by path, else ``index.html``)."""

    def page(path: str) -> Response:
        root = FRONTEND_DIST.resolve()
        index = root / "index.html"
        if path:
            try:
                candidate = (root / path).resolve()
            except (ValueError, OSError):  # e.g. a NUL byte (%00) in the path
                candidate = root
            if candidate.is_relative_to(root) and candidate.is_file():
                return FileResponse(candidate)
        if index.is_file():
            return FileResponse(index, headers={"Cache-Control": "no-cache"})
        return HTMLResponse(_NOT_BUILT)

    @app.get("/", include_in_schema=False)
    async def root(request: Request, token: str | None = None) -> Response:
        if token is not None:
            if not token_matches(token, settings.token):
                return HTMLResponse(_bad_token_page(), status_code=401)
            response = RedirectResponse("/", status_code=303)
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
            return response
        return page("")

    @app.get("/{path:path}", include_in_schema=False)
    async def dashboard(path: str) -> Response:
        if path == "api" or path.startswith("api/"):
            raise StarletteHTTPException(404, "Not Found")
        return page(path)


def _bad_token_page() -> str:
    return """<!doctype html><title>nnx-ppo: wrong token</title>
<h1>Wrong access token</h1><p>Open the URL that <code>nnx-ppo serve</code> printed (it
carries the token), or set <code>NNX_PPO_API_TOKEN</code> and use that.</p>"""
