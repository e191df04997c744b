"""``WS /api/runs/{id}/stream?after_seq=N``: every event after N, in order, then live ones;
closed normally (1000) after the run's terminal status event."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from server.api.deps import RUN_ID, get_services
from server.store.run_status import TERMINAL, RunStatus
from server.store.run_store import RunNotFound

router = APIRouter(prefix="/runs", tags=["stream"])

SEND_TIMEOUT_S = 10.0
"""A client that does not take an event within this long is dropped."""
MAX_CLIENT_MESSAGES_PER_S = 20
YIELD_EVERY = 50
"""A client catching up yields the event loop after this many events sent."""


def _terminal(event: dict[str, Any]) -> bool:
    return event["type"] == "status" and RunStatus(event["status"]) in TERMINAL


@router.websocket("/{run_id}/stream")
async def stream(websocket: WebSocket, run_id: str, after_seq: int = 0) -> None:
    services = get_services(websocket)
    try:
        if not RUN_ID.fullmatch(run_id):
            raise RunNotFound(run_id)
        run = await services.hub.run(run_id)
    except RunNotFound:
        await websocket.close(code=4404, reason="run not found")
        return
    if after_seq < 0:
        await websocket.close(code=1008, reason="after_seq must be >= 0")
        return
    await websocket.accept()
    if RunStatus(run.status) in TERMINAL and after_seq >= run.last_seq:
        await websocket.close(code=1000)  # finished, and the client has seen everything
        return
    hub = services.hub
    hub.follow(run_id)
    reader = asyncio.create_task(drain_client(websocket))
    try:
        seq = after_seq
        while not reader.done():
            events = await hub.next_events(run_id, seq, timeout=1.0)
            for i, (event, text) in enumerate(events, 1):
                async with asyncio.timeout(SEND_TIMEOUT_S):
                    await websocket.send_text(text)
                seq = event["seq"]
                if _terminal(event):
                    await websocket.close(code=1000)
                    return
                if i % YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # a send does not yield: let requests through
    except (WebSocketDisconnect, TimeoutError, RuntimeError):
        pass  # the client left, or was too slow to follow
    finally:
        hub.unfollow(run_id)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader


async def drain_client(websocket: WebSocket) -> None:
    """Reads and discards what the client sends; returns (ending the stream) when it
    disconnects or floods (more than ``MAX_CLIENT_MESSAGES_PER_S`` messages a second)."""
    window_start, count = time.monotonic(), 0
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            count += 1
            now = time.monotonic()
            if now - window_start > 1.0:
                window_start, count = now, 1
            if count > MAX_CLIENT_MESSAGES_PER_S:
                await websocket.close(code=1008, reason="too many messages")
                return
    except (WebSocketDisconnect, RuntimeError):
        return
