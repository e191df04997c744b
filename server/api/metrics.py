"""A run's metrics: downsampled columnar series, and everything as CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response, StreamingResponse

from server import values
from server.api.deps import RunDep, ServicesDep
from server.api.runs import NOT_FOUND
from server.schemas import MetricsPublic, PhasePublic, SeriesPublic
from server.store.metrics_query import (
    all_points,
    last_seq,
    metric_counts,
    phase_at,
    read_many,
    snapshot,
)

router = APIRouter(prefix="/runs", tags=["metrics"])
MAX_KEYS = 256
"""Distinct keys one request may name (a run logs ~20-100; each is one series read)."""


@router.get("/{run_id}/metrics", response_model=MetricsPublic, responses=NOT_FOUND)
def get_metrics(
    run: RunDep,
    services: ServicesDep,
    keys: Annotated[
        str | None, Query(max_length=10_000, description="Comma-separated, at most 256 distinct")
    ] = None,
    after_step: Annotated[int, Query(ge=-1, le=2**62)] = -1,
    max_points: Annotated[int, Query(ge=1, le=100_000)] = 1000,
) -> Response:
    # The answer is serialized here, once, from models built from the store's own values:
    # handed back as a model, FastAPI would validate it again and encode it through
    # jsonable_encoder, 5-6 ms per 1,000-point series (most of a request's time).
    engine = services.store.engine
    asked = None if keys is None else list(dict.fromkeys(keys.split(",")))  # once each
    if asked is not None and len(asked) > MAX_KEYS:
        raise RequestValidationError(
            [
                {
                    "loc": ["query", "keys"],
                    "msg": f"at most {MAX_KEYS} distinct keys, got {len(asked)}",
                    "type": "value_error",
                }
            ]
        )
    with snapshot(engine) as conn:
        seq = last_seq(conn, run.id)
        known = metric_counts(conn, run.id)
        wanted = known if asked is None else {k: known[k] for k in asked if k in known}
        read = read_many(conn, run.id, wanted, after_step, max_points)
        series = {key: SeriesPublic(**found.as_dict()) for key, found in read.items()}
        phase = phase_at(conn, run.id, seq)
    answer = MetricsPublic(
        series=series, last_seq=seq, phase=None if phase is None else PhasePublic(**phase)
    )
    return Response(answer.model_dump_json(), media_type="application/json")


@router.get("/{run_id}/metrics.csv", response_class=StreamingResponse, responses=NOT_FOUND)
def metrics_csv(run: RunDep, services: ServicesDep) -> StreamingResponse:
    engine = services.store.engine

    def rows() -> Iterator[str]:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["step", "wall_time", "key", "value"])
        for step, wall_time, key, value in all_points(engine, run.id):
            writer.writerow([step, repr(wall_time), key, values.encode(value)])
            if buffer.tell() > 65536:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
        yield buffer.getvalue()

    return StreamingResponse(
        rows(),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{run.id}-metrics.csv"'},
    )
