"""The newest seq of several event streams in one query, for the streams whose newest seq is
a column of their row (a run's or a sweep's ``last_seq``): the ``latest`` of a
``server.api.seq_hub.SeqHub``."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import InstrumentedAttribute, Session, sessionmaker


def column_seqs(
    sessions: sessionmaker[Session],
    key: InstrumentedAttribute[str],
    seq: InstrumentedAttribute[int],
) -> Callable[[list[str]], dict[str, int]]:
    """``latest`` for streams whose newest seq is a column of their row (a run's or a
    sweep's ``last_seq``): one query for every key."""

    def latest(keys: list[str]) -> dict[str, int]:
        with sessions() as session:
            return dict(session.execute(select(key, seq).where(key.in_(keys))).tuples().all())

    return latest
