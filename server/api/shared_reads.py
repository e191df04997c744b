"""Concurrent identical reads share one database query.

When many websocket clients connect to one run at once, each used to look the run up and
read its events itself: 100 clients were 200 queries in the thread pool at the same moment,
and the event loop waited its turn for the GIL behind them (API requests queued for up to
half a second). With ``SharedReads`` the first caller of a key starts the read in the thread
pool and every caller of the same key meanwhile awaits that same result (or error). A
finished read is not kept: the next call reads afresh, so nothing is served stale.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

from starlette.concurrency import run_in_threadpool

T = TypeVar("T")


class SharedReads:
    def __init__(self) -> None:
        self._pending: dict[Hashable, asyncio.Future[Any]] = {}

    async def read(self, key: Hashable, read: Callable[[], T]) -> T:
        """``read()`` in the thread pool, or the result of the one in flight for ``key``.
        A caller that is cancelled leaves the read running for the others."""
        future = self._pending.get(key)
        if future is None:
            future = asyncio.ensure_future(run_in_threadpool(read))
            self._pending[key] = future
            future.add_done_callback(functools.partial(self._done, key))
        return cast(T, await asyncio.shield(future))

    def _done(self, key: Hashable, future: asyncio.Future[Any]) -> None:
        if self._pending.get(key) is future:
            del self._pending[key]
        if not future.cancelled():
            future.exception()  # retrieved, even when every caller has left
