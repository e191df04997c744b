"""``server.app``'s start-up: the served app moves the heap it starts with out of the
collector's generations (no full collection walks it again while it serves) and collects
the young generation less often, until it stops serving."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.app import YOUNG_GC_THRESHOLD, create_app, restore_gc, tune_gc_for_serving
from server.settings import Settings


@pytest.fixture
def default_gc() -> Iterator[None]:
    """Starts and leaves the test process with nothing frozen and its own thresholds (a
    frozen object is never collected: the rest of the suite keeps its usual collector)."""
    thresholds = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def _in_a_generation(obj: object) -> bool:
    return any(o is obj for generation in range(3) for o in gc.get_objects(generation))


@pytest.mark.usefixtures("default_gc")
def test_tune_gc_for_serving_takes_live_objects_out_of_every_generation() -> None:
    alive = [object()]  # a container: tracked by the collector
    assert _in_a_generation(alive) and gc.get_freeze_count() == 0
    before = gc.get_threshold()
    previous = tune_gc_for_serving()
    assert previous == before
    assert not _in_a_generation(alive)
    assert gc.get_freeze_count() > 0
    later = [object()]  # what the service allocates while serving is collected as usual
    assert _in_a_generation(later)
    assert gc.get_threshold()[0] == YOUNG_GC_THRESHOLD
    restore_gc(previous)
    assert _in_a_generation(alive) and gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


@pytest.mark.usefixtures("default_gc")
def test_the_served_app_freezes_its_startup_heap(tmp_path: Path) -> None:
    settings = Settings(
        api_token="freeze-test-token", data_dir=tmp_path / "data", list_playground_envs=False
    )
    app = create_app(settings, with_worker=False)
    assert gc.get_freeze_count() == 0  # creating the app alone freezes nothing

    before = gc.get_threshold()

    async def serve() -> tuple[int, int]:
        async with app.router.lifespan_context(app):  # what uvicorn runs before serving
            return gc.get_freeze_count(), gc.get_threshold()[0]

    frozen, threshold = asyncio.run(serve())
    assert frozen > 0 and threshold == YOUNG_GC_THRESHOLD
    # Once it stops serving, its heap is collectable again, with the process's thresholds.
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before
