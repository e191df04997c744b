"""``WS /api/runs/{id}/stream?after_seq=N``: every event after N, in order, then live ones;
closed normally (1000) after the run's terminal status event."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, WebSocket

from server.api.deps import RUN_ID, get_services
from server.api.seq_hub import follow
from server.store.run_status import TERMINAL, RunStatus
from server.store.run_store import RunNotFound

router = APIRouter(prefix="/runs", tags=["stream"])


def _terminal(event: dict[str, Any]) -> bool:
    return event["type"] == "status" and RunStatus(event["status"]) in TERMINAL


@router.websocket("/{run_id}/stream")
async def stream(websocket: WebSocket, run_id: str, after_seq: int = 0) -> None:
    hub = get_services(websocket).hub
    try:
        if not RUN_ID.fullmatch(run_id):
            raise RunNotFound(run_id)
        run = await hub.run(run_id)
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
    await follow(websocket, hub, run_id, after_seq, final=_terminal)
