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

from server.api.deps import get_services
from server.api.stream import SEND_TIMEOUT_S, YIELD_EVERY, drain_client

router = APIRouter(tags=["events"])

RESYNC_CODE = 4410


@router.websocket("/events")
async def events(websocket: WebSocket, after_seq: int = 0) -> None:
    services = get_services(websocket)
    await websocket.accept()
    if after_seq < 0:
        await websocket.close(code=1008, reason="after_seq must be >= 0")
        return
    hub = services.events
    if after_seq > await hub.newest_seq():
        await websocket.close(code=RESYNC_CODE, reason=f"no events up to seq {after_seq}")
        return
    hub.follow()
    reader = asyncio.create_task(drain_client(websocket))
    try:
        seq = after_seq
        while not reader.done():
            events = await hub.next_events(seq, timeout=1.0)
            if events and events[0][0]["seq"] != seq + 1:
                reason = f"events after seq {seq} were pruned"
                await websocket.close(code=RESYNC_CODE, reason=reason)
                return
            for i, (event, text) in enumerate(events, 1):
                async with asyncio.timeout(SEND_TIMEOUT_S):
                    await websocket.send_text(text)
                seq = event["seq"]
                if i % YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # a send does not yield: let requests through
    except (WebSocketDisconnect, TimeoutError, RuntimeError):
        pass  # the client left, or was too slow to follow
    finally:
        hub.unfollow()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader
