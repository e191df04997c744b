"""The follow loop and its hub (``server.api.seq_hub``) on an in-memory event log and a
fake websocket: replay then live, in order and once each; the catch-up read shared by the
followers; a follower behind the buffer reading the log; a pruned log closing with
``RESYNC_CODE``; a final event closing normally."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, cast

from fastapi import WebSocket

from server.api.seq_hub import RESYNC_CODE, SeqHub, follow

POLL_S = 0.01


class Log:
    """Numbered events per key, as the database holds them; counts the reads."""

    def __init__(self) -> None:
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.reads: list[tuple[str, int]] = []

    def append(
        self, key: str, n: int = 1, kind: str = "log", *, prune_to: int = 0, **fields: Any
    ) -> None:
        """``n`` more events, and those up to ``prune_to`` gone, at once (the poller reads
        in another thread)."""
        events = self.events.get(key, [])
        last = events[-1]["seq"] if events else 0
        new = [{"seq": last + i, "type": kind, "time": 0.0, **fields} for i in range(1, n + 1)]
        self.events[key] = [e for e in events + new if e["seq"] > prune_to]

    def latest(self, keys: list[str]) -> dict[str, int]:
        return {k: self.events[k][-1]["seq"] for k in keys if self.events.get(k)}

    def after(self, key: str, after_seq: int, limit: int) -> list[dict[str, Any]]:
        self.reads.append((key, after_seq))
        return [e for e in self.events.get(key, []) if e["seq"] > after_seq][:limit]


class Socket:
    """What ``follow`` uses of an accepted websocket."""

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.close_code: int | None = None
        self._incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def send_text(self, text: str) -> None:
        self.seqs.append(json.loads(text)["seq"])

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.close_code = code
        self._incoming.put_nowait({"type": "websocket.disconnect"})

    async def receive(self) -> dict[str, Any]:
        return await self._incoming.get()

    def leave(self) -> None:
        self._incoming.put_nowait({"type": "websocket.disconnect"})


def _final(event: dict[str, Any]) -> bool:
    return event["type"] == "status" and event.get("status") == "done"


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(POLL_S)


def _with_hub(log: Log, test: Callable[[SeqHub], Awaitable[None]], buffer: int = 100) -> None:
    async def main() -> None:
        hub = SeqHub(
            "test-hub", latest=log.latest, events_after=log.after, poll_s=POLL_S, buffer=buffer
        )
        hub.start()
        try:
            await test(hub)
        finally:
            await hub.stop()

    asyncio.run(main())


def _follow(hub: SeqHub, socket: Socket, key: str, after_seq: int) -> asyncio.Task[None]:
    return asyncio.create_task(follow(cast(WebSocket, socket), hub, key, after_seq, final=_final))


def test_replay_then_live_once_each_in_order_until_the_final_event() -> None:
    log = Log()
    log.append("a", 5)
    log.append("b")  # another key's events are not sent

    async def test(hub: SeqHub) -> None:
        sockets = [Socket() for _ in range(3)]
        tasks = [_follow(hub, s, "a", after) for s, after in zip(sockets, (0, 2, 5), strict=True)]
        await _until(lambda: all(s.seqs[-1:] == [5] for s in sockets[:2]))
        await asyncio.sleep(2 * POLL_S)  # the poller has seen that nothing is new
        log.reads.clear()
        log.append("a", 3)
        log.append("a", kind="status", status="done")
        await asyncio.wait_for(asyncio.gather(*tasks), 5)
        assert sockets[0].seqs == list(range(1, 10))
        assert sockets[1].seqs == list(range(3, 10))
        assert sockets[2].seqs == list(range(6, 10))
        assert all(s.close_code == 1000 for s in sockets)
        # The poller read the live events for the three followers, each once.
        assert [after for _, after in log.reads] in ([5], [5, 8])

    _with_hub(log, test)


def test_a_follower_behind_the_buffer_reads_the_log_and_followers_leave() -> None:
    log = Log()
    log.append("a", 10)

    async def test(hub: SeqHub) -> None:
        ahead = Socket()
        task = _follow(hub, ahead, "a", 9)
        await _until(lambda: ahead.seqs == [10])
        # The buffer holds 8..10 (the last 3): a follower from seq 2 reads 3..7 itself.
        log.reads.clear()
        behind = Socket()
        late = _follow(hub, behind, "a", 2)
        await _until(lambda: behind.seqs[-1:] == [10])
        assert behind.seqs == list(range(3, 11))
        assert log.reads == [("a", 2)]
        for socket in (ahead, behind):
            socket.leave()
        await asyncio.wait_for(asyncio.gather(task, late), 5)
        assert ahead.close_code is None and behind.close_code is None
        log.reads.clear()
        log.append("a")
        await asyncio.sleep(10 * POLL_S)
        assert log.reads == []  # nobody follows: nothing is read

    _with_hub(log, test, buffer=3)


def test_a_follower_whose_events_were_pruned_is_told_to_resync() -> None:
    log = Log()
    log.append("svc", 10, prune_to=6)

    async def test(hub: SeqHub) -> None:
        current, stale = Socket(), Socket()
        tasks = [_follow(hub, current, "svc", 7), _follow(hub, stale, "svc", 3)]
        await asyncio.wait_for(tasks[1], 5)
        assert stale.seqs == [] and stale.close_code == RESYNC_CODE
        await _until(lambda: current.seqs == [8, 9, 10])
        # 11..20 come and 11..15 go before the poller sees them: past its buffer.
        log.append("svc", 10, prune_to=15)
        await asyncio.wait_for(tasks[0], 5)
        assert current.seqs == [8, 9, 10] and current.close_code == RESYNC_CODE

    _with_hub(log, test, buffer=3)
