"""The hub of the sweeps' event streams (``WS /api/sweeps/{id}/stream``): a ``SeqHub`` keyed by
sweep id, whose poller reads the ``last_seq`` of every followed sweep in one query."""

from __future__ import annotations

from server.api.seq_hub import SeqHub
from server.store.last_seqs import column_seqs
from server.store.models import SweepRow
from server.store.sweep_store import SweepStore

POLL_S = 0.25


class SweepHub(SeqHub):
    def __init__(self, store: SweepStore):
        latest = column_seqs(store.sessions, SweepRow.id, SweepRow.last_seq)
        super().__init__("sweep-hub", latest=latest, events_after=store.events_after, poll_s=POLL_S)
