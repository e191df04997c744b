"""The supervisor's side of a run's end, without processes: each ``RunOutcome`` maps to one
transition (``supervisor.ending``), and the supervisor makes that transition's store calls,
with a fake executor and a fake store that record what they were asked."""

from __future__ import annotations

from typing import Any, cast

import pytest

from server.settings import Settings
from server.store.models import RunRow
from server.store.run_store import RunNotFound, RunStore
from server.worker.executor import (
    Ended,
    Exited,
    Failed,
    Lost,
    NoRoom,
    RunOutcome,
    Stopped,
    StopReason,
    Succeeded,
)
from server.worker.supervisor import Ending, Supervisor, ending

TAIL = "\n--- last lines of its log ---\nTraceback ..."
KILLED = "killed by signal 9 (SIGKILL)"


@pytest.mark.parametrize(
    ("outcome", "stopping", "expected"),
    [
        (Succeeded(), False, Ending("finish")),
        (Failed("diverged: step 3"), False, Ending("fail", "diverged: step 3")),
        (Failed(""), False, Ending("fail", "failed")),  # an error without words still says so
        (Stopped(StopReason.CANCEL), False, Ending("stop")),
        (Stopped(StopReason.CANCEL), True, Ending("stop")),  # cancelled before the worker stopped
        (Stopped(StopReason.SHUTDOWN), True, Ending("requeue", "the worker stopped")),
        # a crash fails the run, with the end of its log; while stopping, it was stopped with it
        (Exited(KILLED, TAIL), False, Ending("fail", KILLED + TAIL)),
        (Exited(KILLED, TAIL), True, Ending("requeue", f"stopped with the worker ({KILLED})")),
        (Lost("its Ray task was lost (NodeDiedError)"), False,
         Ending("requeue", "its Ray task was lost (NodeDiedError)")),
        (Lost("stopped with the worker"), True, Ending("requeue", "stopped with the worker")),
    ],
)  # fmt: skip
def test_each_outcome_maps_to_one_transition(
    outcome: RunOutcome, stopping: bool, expected: Ending
) -> None:
    assert ending(outcome, stopping=stopping) == expected


class FakeStore:
    """The ``RunStore`` methods the supervisor's ending and claiming call, recorded."""

    def __init__(self, queued: list[str] | None = None, gone: set[str] | None = None):
        self.calls: list[tuple[Any, ...]] = []
        self.queued = list(queued or [])
        self.gone = gone or set()

    def transition(self, run_id: str, name: str, error: str | None = None, **fields: Any) -> None:
        if run_id in self.gone:
            raise RunNotFound(run_id)
        self.calls.append((run_id, name, error, fields))

    def end_stopped(self, run_id: str) -> None:
        self.calls.append((run_id, "end_stopped"))

    def claim_next(
        self, worker_id: str, *, free: int | None = None, total: int | None = None
    ) -> RunRow | None:
        self.calls.append(("claim", free, total))
        return RunRow(id=self.queued.pop(0), spec={}) if self.queued else None


class FakeExecutor:
    """Reports ``ended`` on its first poll and ``cold`` on ``stop_cold``; its ``start``
    refuses the runs in ``no_room``."""

    def __init__(self, ended: list[Ended], cold: list[Ended], no_room: set[str]):
        self.ended, self.cold, self.no_room = ended, cold, no_room
        self.started: list[str] = []
        self.warm_stops = 0
        self.slots = 2

    def poll(self) -> list[Ended]:
        ended, self.ended = self.ended, []
        return ended

    def running(self) -> int:
        return len(self.ended)

    def stop_warm(self) -> None:
        self.warm_stops += 1

    def stop_cold(self) -> list[Ended]:
        return self.cold

    def free_slots(self) -> int:
        return self.slots

    def total_slots(self) -> int | None:
        return 2

    def start(self, run: RunRow) -> None:
        if run.id in self.no_room:
            raise NoRoom("2 devices are not free")
        self.started.append(run.id)
        self.slots -= 1


def supervisor(
    store: FakeStore,
    ended: list[Ended] | None = None,
    cold: list[Ended] | None = None,
    no_room: frozenset[str] = frozenset(),
) -> tuple[Supervisor, FakeExecutor]:
    executor = FakeExecutor(ended or [], cold or [], set(no_room))
    settings = Settings(data_dir="unused")
    return Supervisor(settings, cast(RunStore, store), cast(Any, executor)), executor


def requeued(run_id: str, reason: str) -> list[tuple[Any, ...]]:
    return [
        (run_id, "interrupt", reason, {}),
        (run_id, "requeue", None, {"worker_id": None}),  # keeps its place in the queue
    ]


def test_each_ending_makes_its_store_calls() -> None:
    store = FakeStore(gone={"deleted"})
    sup, _ = supervisor(store)
    sup._end_run("a", Succeeded())
    sup._end_run("b", Failed("boom"))
    sup._end_run("c", Stopped(StopReason.CANCEL))
    sup._end_run("d", Lost("its run process on a Ray node stopped reporting"))
    sup._end_run("deleted", Succeeded())  # a run deleted meanwhile: logged, not raised
    assert store.calls == [
        ("a", "finish", None, {}),
        ("b", "fail", "boom", {}),
        ("c", "end_stopped"),
        *requeued("d", "its run process on a Ray node stopped reporting"),
    ]


def test_a_crash_while_the_worker_stops_requeues_the_run() -> None:
    store = FakeStore()
    sup, _ = supervisor(store)
    sup._end_run("a", Exited(KILLED, TAIL))
    sup.stopping = 1
    sup._end_run("b", Exited(KILLED, TAIL))
    assert store.calls == [
        ("a", "fail", KILLED + TAIL, {}),
        *requeued("b", f"stopped with the worker ({KILLED})"),
    ]


def test_claims_while_there_are_free_slots_and_requeues_a_run_without_room() -> None:
    store = FakeStore(queued=["a", "big", "c"])
    sup, executor = supervisor(store, no_room=frozenset({"big"}))
    sup._start_claimed()
    assert executor.started == ["a"]  # then "big" did not fit: no more claims this tick
    assert store.calls == [
        ("claim", 2, 2),
        ("claim", 1, 2),
        *requeued("big", "2 devices are not free"),
    ]


def test_a_warm_stop_waits_for_the_runs_then_ends_the_rest_cold() -> None:
    store = FakeStore()
    ended: list[Ended] = [("a", Stopped(StopReason.SHUTDOWN))]
    sup, executor = supervisor(store, ended=ended, cold=[("b", Exited(KILLED))])
    sup.stopping = 1
    sup._shut_down()
    assert executor.warm_stops == 1
    assert store.calls == [
        *requeued("a", "the worker stopped"),
        *requeued("b", f"stopped with the worker ({KILLED})"),
    ]


def test_a_cold_stop_skips_the_warm_one() -> None:
    store = FakeStore()
    sup, executor = supervisor(store, cold=[("b", Lost("stopped with the worker"))])
    sup.stopping = 2
    sup._shut_down()
    assert executor.warm_stops == 0
    assert store.calls == requeued("b", "stopped with the worker")
