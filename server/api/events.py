"""``WS /api/events?after_seq=N``: every service-wide run change after N, in order, then
live ones (``created``, ``status``, ``progress``, ``updated``, ``deleted``; see DESIGN).

The same contract as a run's stream, except that it never ends by itself. A client asking
for events that were pruned (or for a seq the service never reached: another database) is
closed with ``RESYNC_CODE``: it should list the runs again and follow from that list's
``events_seq``.
"""

from __future__ import annotations

from fastapi import APIRouter, WebSocket

from server.api.deps import get_services
from server.api.events_hub import SERVICE
from server.api.seq_hub import RESYNC_CODE, follow

router = APIRouter(tags=["events"])


@router.websocket("/events")
async def events(websocket: WebSocket, after_seq: int = 0) -> None:
    hub = get_services(websocket).events
    await websocket.accept()
    if after_seq < 0:
        await websocket.close(code=1008, reason="after_seq must be >= 0")
        return
    if after_seq > (await hub.latest_seq(SERVICE) or 0):
        await websocket.close(code=RESYNC_CODE, reason=f"no events up to seq {after_seq}")
        return
    await follow(websocket, hub, SERVICE, after_seq)
