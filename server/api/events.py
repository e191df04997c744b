"""``WS /api/events?after_seq=N``: every service-wide run change after N, in order, then
live ones (``created``, ``status``, ``progress``, ``updated``, ``deleted``; see DESIGN).

The same contract as a run's stream, except that it never ends by itself. A client asking
for events that were pruned (or for a seq the service never reached: another database) is
closed with ``RESYNC_CODE``: it should list the runs again and follow from that list's
``events_seq``.
"""

from __future__ import annotations

import asyncio
import contextlib

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from starlette.concurrency import run_in_threadpool

from server.api.deps import get_services
from server.api.stream import SEND_TIMEOUT_S, drain_client
from server.api.stream_hub import encode_events

router = APIRouter(tags=["events"])

RESYNC_CODE = 4410


@router.websocket("/events")
async def events(websocket: WebSocket, after_seq: int = 0) -> None:
    services = get_services(websocket)
    await websocket.accept()
    if after_seq < 0:
        await websocket.close(code=1008, reason="after_seq must be >= 0")
        return
    store, hub = services.store, services.events
    if after_seq > await run_in_threadpool(store.service_events_seq):
        await websocket.close(code=RESYNC_CODE, reason=f"no events up to seq {after_seq}")
        return
    hub.follow()
    reader = asyncio.create_task(drain_client(websocket))
    try:
        seq = after_seq
        while not reader.done():
            events = hub.buffered_after(seq)
            if events is None:
                stored = await run_in_threadpool(store.service_events_after, seq, 500)
                if stored and stored[0]["seq"] != seq + 1:
                    await websocket.close(
                        code=RESYNC_CODE, reason=f"events after seq {seq} were pruned"
                    )
                    return
                events = encode_events(stored)
            for event, text in events:
                async with asyncio.timeout(SEND_TIMEOUT_S):
                    await websocket.send_text(text)
                seq = event["seq"]
            if not events:
                await hub.wait(seq, timeout=1.0)
    except (WebSocketDisconnect, TimeoutError, RuntimeError):
        pass  # the client left, or was too slow to follow
    finally:
        hub.unfollow()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader
