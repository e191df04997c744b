"""The hub of the runs' event streams (``WS /api/runs/{id}/stream``): a ``SeqHub`` keyed by
run id, whose poller reads the ``last_seq`` of every followed run in one query."""

from __future__ import annotations

import functools

from server.api.seq_hub import SeqHub
from server.store.last_seqs import column_seqs
from server.store.models import RunRow
from server.store.run_store import RunStore

POLL_S = 0.05


class StreamHub(SeqHub):
    def __init__(self, store: RunStore):
        self.store = store
        latest = column_seqs(store.sessions, RunRow.id, RunRow.last_seq)
        super().__init__(
            "stream-hub", latest=latest, events_after=store.events_after, poll_s=POLL_S
        )

    async def run(self, run_id: str) -> RunRow:
        """The run's row (``RunNotFound``); concurrent lookups of a run share one query."""
        return await self.reads.read(("run", run_id), functools.partial(self.store.get, run_id))
