"""The sweep driver against a real database (SQLite and PostgreSQL), with the worker played
by the test: trials are queued as runs, report their objective, are pruned by the pruner,
and a driver that starts again (a restarted service) carries on where the last one stopped,
also after a crash between Optuna's decision and the run it asked for. No JAX here."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from server.api.sweep_driver import SweepDriver
from server.spec.sweep_space import SweepCreate
from server.store.db import make_engine, make_sessionmaker
from server.store.models import RunRow, SweepJournalRow
from server.store.run_status import TERMINAL, RunStatus
from server.store.run_store import RunStore
from server.store.sweep_store import SweepStore
from tests.service_harness import tiny_ppo_spec

STEPS = (100, 200, 300, 400)
"""The steps at which a simulated trial reports its objective; it ends after the last."""


def quality(params: dict[str, Any]) -> float:
    """The simulated trial's final objective: best at learning rate 1e-3 (0), one lower
    per decade away from it, plus 0.1 per hidden unit of its first layer over 16."""
    lr = params.get("config.ppo.learning_rate", 1e-3)
    sizes = params.get("network.actor_hidden_sizes", [16])
    return -abs(math.log10(lr) + 3) + 0.1 * (sizes[0] - 16)


@pytest.fixture
def stores(database_url: str, tmp_path) -> Iterator[tuple[RunStore, SweepStore]]:  # type: ignore[no-untyped-def]
    engine: Engine = make_engine(database_url)
    runs = RunStore(make_sessionmaker(engine), tmp_path / "runs")
    yield runs, SweepStore(runs.sessions, runs)
    engine.dispose()


def submit(sweeps: SweepStore, **fields: Any) -> str:
    request = SweepCreate.model_validate({"spec": tiny_ppo_spec(total_steps=400), **fields})
    return sweeps.create(request.model_dump(mode="json"), name="t", base_total_steps=400).id


def play(runs: RunStore, sweep_id: str, worker: str) -> None:
    """One round of a worker with unlimited devices: queued trials start; each running one
    reports its next objective point (``quality`` times the share of steps done), stops
    when asked (pruned or cancelled) and succeeds after its last point."""
    while runs.claim_next(worker) is not None:
        pass
    for run in runs.list_runs_with_seq_all(sweep_id):
        if run.status != RunStatus.RUNNING.value:
            continue
        if runs.cancel_requested(run.id):
            runs.end_stopped(run.id)
            continue
        step = next(s for s in STEPS if s > run.steps)
        value = quality(run.trial_params or {}) * step / STEPS[-1]
        runs.record_metrics(run.id, step, 0.0, {"eval/episode_reward": value})
        if step == STEPS[-1]:
            runs.transition(run.id, "finish")


def drive(
    runs: RunStore,
    sweeps: SweepStore,
    sweep_id: str,
    *,
    until: Callable[[], bool] | None = None,
    driver: SweepDriver | None = None,
) -> SweepDriver:
    driver = driver or SweepDriver(sweeps, runs)
    worker = runs.register_worker(["cpu:0"])
    for _ in range(500):
        driver.tick()
        if sweeps.get(sweep_id).status not in ("running", "cancelling"):
            return driver
        if until is not None and until():
            return driver
        play(runs, sweep_id, worker)
    raise AssertionError(f"sweep {sweep_id} did not finish: {sweeps.get(sweep_id).status}")


def events(sweeps: SweepStore, sweep_id: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in sweeps.all_events(sweep_id) if e["type"] == kind]


def check_consistent(sweeps: SweepStore, sweep_id: str, trials: int) -> list[RunRow]:
    """Each trial number 0..trials-1 has exactly one run, each run ended, and each trial
    event was sent once per status."""
    done = sweeps.trials(sweep_id)
    assert sorted(r.trial for r in done) == list(range(trials))
    assert all(RunStatus(r.status) in TERMINAL for r in done)
    sent = [(e["trial"], e["status"]) for e in events(sweeps, sweep_id, "trial")]
    assert len(sent) == len(set(sent))
    assert {t for t, status in sent if status == "queued"} == set(range(trials))
    return done


@pytest.fixture(autouse=True)
def _all_runs_of_a_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    """``play`` lists a sweep's runs through the store's own filter."""
    from server.store.run_store import RunFilter

    def list_all(self: RunStore, sweep_id: str) -> list[RunRow]:
        return self.list_runs(RunFilter(sweep_id=sweep_id, limit=200))[0]

    monkeypatch.setattr(RunStore, "list_runs_with_seq_all", list_all, raising=False)


def test_a_pruned_sweep_keeps_parallel_trials_and_finds_the_best(stores) -> None:  # type: ignore[no-untyped-def]
    runs, sweeps = stores
    sweep_id = submit(
        sweeps,
        space={"config.ppo.learning_rate": {"log_uniform": [1e-6, 1e-1]}},
        method="tpe",
        max_trials=8,
        parallel=2,
        pruner={"kind": "median", "startup_trials": 2},
        seed=3,
    )
    drive(runs, sweeps, sweep_id)
    assert sweeps.get(sweep_id).status == "finished"
    done = check_consistent(sweeps, sweep_id, 8)
    statuses = {r.status for r in done}
    assert statuses <= {"succeeded", "pruned"}
    pruned = [r for r in done if r.status == "pruned"]
    assert pruned, [(r.trial_params, r.status) for r in done]
    for run in pruned:  # stopped before the budget, saying why
        assert run.steps < run.total_steps == 400
        assert run.error is not None and run.error.startswith("pruned by the sweep's median")
    succeeded = [r for r in done if r.status == "succeeded"]
    best = max(succeeded, key=lambda r: r.latest_metrics["eval/episode_reward"])
    last_best = events(sweeps, sweep_id, "best")[-1]
    assert last_best["run_id"] == best.id
    assert last_best["objective"] == pytest.approx(quality(best.trial_params or {}))
    # at most `parallel` trials were active at once: each trial was queued after an earlier
    # one (but the first two) had ended
    order = [(e["trial"], e["status"]) for e in events(sweeps, sweep_id, "trial")]
    for number in range(2, 8):
        queued_at = order.index((number, "queued"))
        ended = [t for t, s in order[:queued_at] if s in ("succeeded", "pruned")]
        assert len(ended) >= number - 1


def test_grid_gives_every_point_once(stores) -> None:  # type: ignore[no-untyped-def]
    runs, sweeps = stores
    sweep_id = submit(
        sweeps,
        space={
            "config.ppo.learning_rate": {"grid": [1e-4, 1e-3, 1e-2]},
            "network.actor_hidden_sizes": {"grid": [[16], [32, 32]]},
        },
        method="grid",
        parallel=3,
    )
    drive(runs, sweeps, sweep_id)
    done = check_consistent(sweeps, sweep_id, 6)  # max_trials defaults to the grid's size
    params = [r.trial_params or {} for r in done]
    points = {
        (p["config.ppo.learning_rate"], tuple(p["network.actor_hidden_sizes"])) for p in params
    }
    assert points == {(lr, h) for lr in (1e-4, 1e-3, 1e-2) for h in ((16,), (32, 32))}
    for run, p in zip(done, params, strict=True):  # each trial's spec carries its values
        assert run.spec["config"]["ppo"]["learning_rate"] == p["config.ppo.learning_rate"]
        assert run.spec["network"]["actor_hidden_sizes"] == p["network.actor_hidden_sizes"]
    assert all(r.status == "succeeded" for r in done)  # no pruner


def test_a_restarted_driver_loses_no_trial_and_runs_none_twice(stores) -> None:  # type: ignore[no-untyped-def]
    runs, sweeps = stores
    sweep_id = submit(
        sweeps,
        space={"config.ppo.learning_rate": {"log_uniform": [1e-5, 1e-1]}},
        method="random",
        max_trials=6,
        parallel=2,
        pruner="median",
        seed=11,
    )

    def ended(n: int) -> Callable[[], bool]:
        return lambda: sum(RunStatus(r.status) in TERMINAL for r in sweeps.trials(sweep_id)) >= n

    drive(runs, sweeps, sweep_id, until=ended(2))
    # The next driver crashes after Optuna chose a trial's values but before its run exists.
    crashing = SweepDriver(sweeps, runs)
    add_trial = sweeps.add_trial

    def crash(*args: Any, **kwargs: Any) -> RunRow:
        raise RuntimeError("the service died here")

    sweeps.add_trial = crash  # type: ignore[method-assign]
    worker = runs.register_worker(["cpu:0"])
    orphans: list[Any] = []
    for _ in range(20):  # until a trial ends and the next one cannot be queued
        crashing.tick()
        study = crashing._states[sweep_id].study
        orphans = [t for t in study.get_trials() if t.state.name == "RUNNING" and not t.user_attrs]
        if orphans:
            break
        play(runs, sweep_id, worker)
    assert orphans, "the crash left no chosen-but-unqueued trial"
    assert sweeps.get(sweep_id).status == "running"
    sweeps.add_trial = add_trial  # type: ignore[method-assign]
    chosen = {t.number: t.params for t in orphans}
    # A new driver (a restarted service): the orphaned trials get their runs, with the values
    # Optuna chose, and the sweep completes with exactly max_trials trials.
    drive(runs, sweeps, sweep_id)
    assert sweeps.get(sweep_id).status == "finished"
    done = check_consistent(sweeps, sweep_id, 6)
    by_trial = {r.trial: r for r in done}
    for number, params in chosen.items():
        assert by_trial[number].trial_params == params
    restarted = SweepDriver(sweeps, runs)._state(sweeps.get(sweep_id)).study
    told = {t.number: t for t in restarted.get_trials()}
    assert sorted(told) == list(range(6))
    for number, run in by_trial.items():
        assert told[number].user_attrs["run_id"] == run.id
        assert told[number].state.name == {"succeeded": "COMPLETE", "pruned": "PRUNED"}[run.status]


def test_cancel_stops_the_trials_and_delete_takes_the_study(stores) -> None:  # type: ignore[no-untyped-def]
    runs, sweeps = stores
    sweep_id = submit(
        sweeps,
        space={"config.ppo.learning_rate": {"uniform": [1e-4, 1e-2]}},
        method="random",
        max_trials=10,
        parallel=3,
    )
    driver = drive(runs, sweeps, sweep_id, until=lambda: len(sweeps.trials(sweep_id)) >= 4)
    sweeps.cancel(sweep_id)
    drive(runs, sweeps, sweep_id, driver=driver)
    assert sweeps.get(sweep_id).status == "cancelled"
    done = sweeps.trials(sweep_id)
    assert len(done) < 10
    assert all(RunStatus(r.status) in TERMINAL for r in done)
    assert "cancelled" in {r.status for r in done}
    sweeps.delete(sweep_id)
    with runs.sessions() as session:
        left = session.scalar(select(func.count()).where(SweepJournalRow.sweep_id == sweep_id))
        trials = session.scalar(select(func.count()).where(RunRow.sweep_id == sweep_id))
    assert left == 0 and trials == 0
