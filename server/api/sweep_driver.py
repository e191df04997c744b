"""The sweep driver: one thread of the API process that keeps every active sweep going.

Each tick (``TICK_S``, or at once when woken) it reconciles each active sweep's Optuna
study with the database, where the runs are the source of truth:

- a trial Optuna asked for whose run does not exist (the service stopped in between) gets
  its run now, from the values Optuna stored; one whose run was deleted is told failed;
- a running trial's new objective points go to Optuna as intermediate values, and the
  pruner may ask its run to stop (``RunStore.request_prune``: it ends ``pruned``);
- a trial whose run ended is told to Optuna (complete with the objective, pruned, or
  failed), with its event on the sweep's stream (and a ``best`` event for a new best);
- while the sweep is running, new trials are asked for and queued until ``parallel`` are
  queued or running and ``max_trials`` exist; then the sweep finishes.

Every step can be repeated after a crash without doing anything twice: a trial's run is
unique per (sweep, trial number), and what was told to Optuna is not told again. The study
lives in the service's database (``server.store.sweep_journal``). Optuna is imported in
this thread only, never on a request path.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from server.spec.sweep_space import (
    CHOICE_KINDS,
    SweepCreate,
    decode_choice,
    encode_choice,
    trial_total_steps,
    with_values,
)
from server.store.models import RunRow, SweepRow
from server.store.run_status import TERMINAL, RunStatus
from server.store.run_store import RunStore
from server.store.sweep_store import SweepNotFound, SweepStore

if TYPE_CHECKING:
    import optuna

    from server.store.sweep_journal import SweepJournal

log = logging.getLogger("nnx_ppo.sweeps")

TICK_S = 0.25
FAILURES_BEFORE_GIVING_UP = 5


@dataclass
class _Sweep:
    """What the driver keeps of one sweep between ticks."""

    request: SweepCreate
    study: optuna.Study
    journal: SweepJournal
    distributions: dict[str, Any]
    emitted: set[tuple[int, str]] = field(default_factory=set)
    """``(trial, status)`` of the trial events sent."""
    best: tuple[float, int] | None = None
    """``(objective, trial)`` of the newest ``best`` event."""
    judged: set[int] = field(default_factory=set)
    """Trials the pruner has judged since the driver loaded the sweep."""
    failures: int = 0


def _grid_sampler_class() -> Any:
    from optuna.samplers import GridSampler

    class Grid(GridSampler):
        """Optuna's grid sampler, which ends ``study.optimize`` once the grid is used up
        by calling ``study.stop()`` as a trial is told; outside ``optimize`` (ask and
        tell, as here) that call raises after the trial was judged but before it was
        stored. The driver stops at ``max_trials`` (at most the grid's size) itself."""

        def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
            with contextlib.suppress(RuntimeError):  # study.stop() outside optimize
                super().after_trial(study, trial, state, values)

    return Grid


def objective_of(run: RunRow, metric: str) -> float | None:
    """The run's last value of ``metric``, when finite."""
    value = run.latest_metrics.get(metric)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


class SweepDriver:
    def __init__(self, sweeps: SweepStore, runs: RunStore):
        self.sweeps = sweeps
        self.runs = runs
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._states: dict[str, _Sweep] = {}

    # -- the thread ---------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True, name="sweep-driver")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(30)

    def wake(self) -> None:
        """Drive at once (a new or cancelled sweep) instead of at the next tick."""
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.tick()
            except Exception:
                log.exception("sweep driver tick failed")
            self._wake.wait(TICK_S)

    def tick(self) -> None:
        with self._lock:
            for sweep in self.sweeps.active():
                if self._stop.is_set():
                    return
                try:
                    self._drive(sweep)
                    if sweep.id in self._states:
                        self._states[sweep.id].failures = 0
                except SweepNotFound:
                    self._states.pop(sweep.id, None)
                except Exception as error:
                    self._failed_tick(sweep, error)

    def forget(self, sweep_id: str) -> None:
        """Drops what the driver keeps of a deleted sweep (its journal went with it)."""
        with self._lock:
            self._states.pop(sweep_id, None)

    def _failed_tick(self, sweep: SweepRow, error: Exception) -> None:
        log.exception("sweep %s: driving it failed", sweep.id)
        state = self._states.get(sweep.id)
        failures = (state.failures if state else 0) + 1
        if state is not None:
            state.failures = failures
        if failures >= FAILURES_BEFORE_GIVING_UP or state is None:
            message = f"the sweep driver failed: {type(error).__name__}: {error}"
            for run in self.sweeps.trials(sweep.id):
                if RunStatus(run.status) not in TERMINAL:
                    self.runs.request_cancel(run.id)
            self.sweeps.set_status(sweep.id, "failed", message[:2000])
            self._states.pop(sweep.id, None)

    # -- Optuna -------------------------------------------------------------------------

    def _state(self, sweep: SweepRow) -> _Sweep:
        state = self._states.get(sweep.id)
        if state is not None:
            return state
        import optuna

        from server.store.sweep_journal import SweepJournal

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        request = SweepCreate.model_validate(sweep.request)
        journal = SweepJournal(self.sweeps.sessions, sweep.id)
        storage = optuna.storages.JournalStorage(journal)
        try:
            existing = len(storage.get_all_trials(storage.get_study_id_from_name(sweep.id)))
        except KeyError:  # not created yet
            existing = 0
        seed = request.seed + existing  # a restarted sampler does not repeat its draws
        study = optuna.create_study(
            storage=storage,
            study_name=sweep.id,
            sampler=_sampler(request, seed),
            pruner=_pruner(request),
            direction="maximize" if request.objective.mode == "max" else "minimize",
            load_if_exists=True,
        )
        state = _Sweep(request, study, journal, _distributions(request))
        for event in self.sweeps.all_events(sweep.id):  # what was sent before a restart
            if event["type"] == "trial":
                state.emitted.add((event["trial"], event["status"]))
            elif event["type"] == "best":
                state.best = (float(event["objective"]), int(event["trial"]))
        self._states[sweep.id] = state
        return state

    def _values(self, state: _Sweep, params: dict[str, Any]) -> dict[str, Any]:
        """A trial's values by spec path, from what Optuna stored."""
        out: dict[str, Any] = {}
        for path, entry in state.request.space.items():
            value = params[path]
            out[path] = decode_choice(value) if entry.kind in CHOICE_KINDS else value
        return out

    # -- one sweep, one tick ------------------------------------------------------------

    def _drive(self, sweep: SweepRow) -> None:
        """Optuna's journal is written before the runs are: a trial is asked for (its values
        stored) before its run is queued, and a run's end is stored before it is told. So
        each step below finds, after a crash anywhere, what is left to do."""
        from optuna.trial import TrialState

        state = self._state(sweep)
        study = state.study
        trials = {t.number: t for t in study.get_trials(deepcopy=False)}
        runs: dict[int, RunRow] = {
            r.trial: r for r in self.sweeps.trials(sweep.id) if r.trial is not None
        }
        for number, trial in trials.items():  # asked for, but its run was never created
            if trial.state != TrialState.RUNNING or number in runs:
                continue
            complete = set(trial.params) == set(state.distributions)
            if "run_id" in trial.user_attrs or sweep.status != "running" or not complete:
                study.tell(number, state=TrialState.FAIL)  # its run was deleted, or never was
                continue
            runs[number] = self._queue(sweep, state, trial)
        for number, run in sorted(runs.items()):
            told = trials.get(number)
            if told is not None and told.state == TrialState.RUNNING:
                if "run_id" not in told.user_attrs:
                    self._trial(study, told).set_user_attr("run_id", run.id)
                status = RunStatus(run.status)
                if status is RunStatus.RUNNING:
                    self._report(state, told, run)
                elif status in TERMINAL:
                    self._tell(state, told, run)
            self._emit(sweep, state, run)
        self._emit_best(sweep, state, runs)
        active = sum(1 for r in runs.values() if RunStatus(r.status) not in TERMINAL)
        if sweep.status == "running":
            target = state.request.trials()
            while active < state.request.parallel and len(runs) < target:
                try:
                    with state.journal.batch():  # the trial and all its values, or nothing
                        asked = study.ask(state.distributions)
                except Exception:
                    self._states.pop(sweep.id, None)  # its storage saw logs never stored
                    raise
                runs[asked.number] = self._queue(sweep, state, asked)
                self._emit(sweep, state, runs[asked.number])
                active += 1
            if active == 0 and len(runs) >= target:
                self.sweeps.set_status(sweep.id, "finished")
                self._states.pop(sweep.id, None)
        elif active == 0:  # cancelling, and every trial has ended
            self.sweeps.set_status(sweep.id, "cancelled")
            self._states.pop(sweep.id, None)

    @staticmethod
    def _trial(study: optuna.Study, trial: Any) -> optuna.Trial:
        import optuna

        return optuna.Trial(study, trial._trial_id)

    def _queue(self, sweep: SweepRow, state: _Sweep, trial: Any) -> RunRow:
        """The run of an asked-for trial (created once), tagged with the trial's number."""
        values = self._values(state, trial.params)
        spec = with_values(state.request.spec.stored(), values)
        total = trial_total_steps(state.request, values, sweep.base_total_steps)
        run = self.sweeps.add_trial(sweep, trial.number, spec, values, total)
        self._trial(state.study, trial).set_user_attr("run_id", run.id)
        return run

    def _report(self, state: _Sweep, trial: optuna.trial.FrozenTrial, run: RunRow) -> None:
        """New objective points as intermediate values; the pruner's decision (judged
        again after a restart even without new points, in case it was lost)."""
        metric = state.request.objective.metric
        last = max(trial.intermediate_values, default=-1)
        points = [
            (step, value)
            for step, value in self.sweeps.metric_after(run.id, metric, last)
            if value is not None and math.isfinite(value)
        ]
        judged = trial.number in state.judged
        if not points and (judged or not trial.intermediate_values):
            return
        state.judged.add(trial.number)
        live = self._trial(state.study, trial)
        for step, value in points:
            live.report(value, step)
        pruner = state.request.pruner
        if pruner is None or pruner.kind == "none" or run.cancel_requested:
            return
        if RunStatus(run.status) is RunStatus.RUNNING and live.should_prune():
            step, value = points[-1] if points else max(trial.intermediate_values.items())
            reason = (
                f"pruned by the sweep's {pruner.kind} pruner at step {step}: {metric} = {value:.6g}"
            )
            if self.runs.request_prune(run.id, reason):
                log.info(
                    "sweep %s: trial %s (run %s) %s", run.sweep_id, trial.number, run.id, reason
                )

    def _tell(self, state: _Sweep, trial: optuna.trial.FrozenTrial, run: RunRow) -> None:
        """Tells Optuna how the trial's run ended: complete with its objective, pruned,
        or failed (cancelled, failed, or no objective value)."""
        from optuna.trial import TrialState

        self._report(state, trial, run)  # the last points, stored just before it ended
        objective = objective_of(run, state.request.objective.metric)
        status = RunStatus(run.status)
        if status is RunStatus.SUCCEEDED and objective is not None:
            state.study.tell(trial.number, objective)
        elif status is RunStatus.PRUNED:
            state.study.tell(trial.number, state=TrialState.PRUNED)
        else:
            state.study.tell(trial.number, state=TrialState.FAIL)

    def _emit(self, sweep: SweepRow, state: _Sweep, run: RunRow) -> None:
        """A ``trial`` event, once per trial and status (derived from the run, so that one
        lost in a crash is sent after it)."""
        status = RunStatus(run.status)
        if run.trial is None or (run.trial, status.value) in state.emitted:
            return
        state.emitted.add((run.trial, status.value))
        self.sweeps.append(
            sweep.id,
            "trial",
            {
                "trial": run.trial,
                "run_id": run.id,
                "status": status.value,
                "params": run.trial_params,
                "objective": objective_of(run, state.request.objective.metric),
                "steps": run.steps,
                "total_steps": run.total_steps,
                "error": run.error if status in (RunStatus.FAILED, RunStatus.PRUNED) else None,
            },
        )

    def _emit_best(self, sweep: SweepRow, state: _Sweep, runs: dict[int, RunRow]) -> None:
        """A ``best`` event when the best succeeded trial changes."""
        metric, mode = state.request.objective.metric, state.request.objective.mode
        best: tuple[float, int, RunRow] | None = None
        for number, run in sorted(runs.items()):
            objective = objective_of(run, metric)
            if RunStatus(run.status) is not RunStatus.SUCCEEDED or objective is None:
                continue
            if best is None or (objective > best[0] if mode == "max" else objective < best[0]):
                best = (objective, number, run)
        if best is None or state.best == best[:2]:
            return
        objective, number, run = best
        state.best = (objective, number)
        self.sweeps.append(
            sweep.id,
            "best",
            {"trial": number, "run_id": run.id, "objective": objective, "params": run.trial_params},
        )


def _distributions(request: SweepCreate) -> dict[str, Any]:
    import optuna

    distributions: dict[str, Any] = {}
    for path, entry in request.space.items():
        if entry.kind in CHOICE_KINDS:
            choices = [encode_choice(v) for v in entry.extremes()]
            distributions[path] = optuna.distributions.CategoricalDistribution(choices)
        elif entry.int_uniform is not None:
            distributions[path] = optuna.distributions.IntDistribution(*entry.int_uniform)
        elif entry.log_uniform is not None:
            low, high = entry.log_uniform
            distributions[path] = optuna.distributions.FloatDistribution(low, high, log=True)
        elif entry.uniform is not None:
            distributions[path] = optuna.distributions.FloatDistribution(*entry.uniform)
    return distributions


def _sampler(request: SweepCreate, seed: int) -> Any:
    import optuna

    if request.method == "grid":
        grid = {p: list(d.choices) for p, d in _distributions(request).items()}
        return _grid_sampler_class()(grid, seed=seed)
    if request.method == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed)


def _pruner(request: SweepCreate) -> Any:
    import optuna

    spec = request.pruner
    if spec is not None and spec.kind == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=spec.startup_trials, n_warmup_steps=spec.warmup_steps
        )
    if spec is not None and spec.kind == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=spec.min_resource or "auto", reduction_factor=spec.reduction_factor
        )
    return optuna.pruners.NopPruner()
