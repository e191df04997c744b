"""The hub of the service-wide events (``WS /api/events``): a ``SeqHub`` with one key,
``SERVICE``, whose events are the ``service_events`` (pruned: the oldest go)."""

from __future__ import annotations

from server.api.seq_hub import Event, SeqHub
from server.store.run_store import RunStore

POLL_S = 0.1
SERVICE = "service"
"""The hub's one key."""


class ServiceEventsHub(SeqHub):
    def __init__(self, store: RunStore):
        self.store = store
        super().__init__(
            "events-hub", latest=self._newest, events_after=self._events_after, poll_s=POLL_S
        )

    def _newest(self, _keys: list[str]) -> dict[str, int]:
        return {SERVICE: self.store.service_events_seq()}

    def _events_after(self, _key: str, after_seq: int, limit: int) -> list[Event]:
        return self.store.service_events_after(after_seq, limit)
