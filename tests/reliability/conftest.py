"""The reliability suite's summary: per category (faults, bad_input, access, attack, load), how many
cases were tried and how many held, printed at the end of the session and written to
``tests/reliability/artifacts/summary.json``.

A test's category is its ``category`` marker (modules set it with ``pytestmark``). Each test
item is one case (a parametrized case counts once); a test that generates many cases itself
(the schemathesis fuzzing) reports them through the ``generated_cases`` fixture, and then
counts as those cases instead of as one.

Under pytest-xdist the tests run in worker processes: each report carries its test's
category, generated cases and the figures so far in ``user_properties``, and the summary is
assembled from the reports where they arrive (in the controller, or in the one process).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CATEGORIES = ("faults", "bad_input", "access", "attack", "load")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


@dataclass
class Tally:
    tried: int = 0
    held: int = 0
    failed: list[str] = field(default_factory=list)
    xfailed: list[str] = field(default_factory=list)
    skipped: int = 0
    generated: int = 0
    """Of ``tried``: cases generated inside tests (schemathesis)."""


@dataclass
class Generated:
    """What a test that generates its own cases reports."""

    tried: int = 0
    held: int = 0

    def record(self, held: bool) -> None:
        self.tried += 1
        self.held += int(held)


_tallies: dict[str, Tally] = {c: Tally() for c in CATEGORIES}
_categories: dict[str, str] = {}
_outcomes: dict[str, str] = {}
_generated: dict[str, Generated] = {}
_figures: dict[str, object] = {}
_started = time.monotonic()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "category(name): reliability category (faults, bad_input, access, attack, load)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        marker = item.get_closest_marker("category")
        if marker is not None:
            name = marker.args[0]
            if name not in CATEGORIES:
                raise pytest.UsageError(f"{item.nodeid}: unknown category {name!r}")
            _categories[item.nodeid] = name


@pytest.fixture
def generated_cases(request: pytest.FixtureRequest) -> Generated:
    """Counts the cases a test generates itself (see the module doc)."""
    return _generated.setdefault(request.node.nodeid, Generated())


@pytest.fixture(scope="session")
def figures() -> dict[str, object]:
    """Measured figures (latencies, counts) for the summary."""
    return _figures


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    name = _categories.get(item.nodeid)
    if name is None:
        return
    told: list[tuple[str, object]] = [("reliability_category", name)]
    generated = _generated.get(item.nodeid)
    if generated is not None:
        told.append(("reliability_generated", [generated.tried, generated.held]))
    if _figures:
        told.append(("reliability_figures", dict(_figures)))
    report.user_properties = [*report.user_properties, *told]  # a copy: not the item's list


def _take_properties(report: pytest.TestReport) -> bool:
    """Reads what ``pytest_runtest_makereport`` told; False for a test of no category."""
    told = {p[0]: p[1] for p in report.user_properties if len(p) == 2}
    name = told.get("reliability_category")
    if not isinstance(name, str):
        return False
    _categories[report.nodeid] = name
    counts = told.get("reliability_generated")
    if isinstance(counts, (list, tuple)):
        generated = _generated.setdefault(report.nodeid, Generated())
        generated.tried, generated.held = int(counts[0]), int(counts[1])
    figures = told.get("reliability_figures")
    if isinstance(figures, dict):
        _figures.update(figures)
    return True


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not _take_properties(report):
        return
    previous = _outcomes.get(report.nodeid)
    if hasattr(report, "wasxfail"):
        outcome = "xfailed" if report.skipped else "failed"  # strict xpass is a failure
    elif report.failed:
        outcome = "failed"
    elif report.skipped:
        outcome = "skipped"
    else:
        outcome = "passed" if report.when == "call" else previous or "passed"
    if previous in ("failed", "xfailed", "skipped") and outcome == "passed":
        return  # a teardown after a failure does not make it hold
    _outcomes[report.nodeid] = outcome


def _tally() -> dict[str, Tally]:
    tallies = {c: Tally() for c in CATEGORIES}
    for nodeid, outcome in _outcomes.items():
        t = tallies[_categories[nodeid]]
        if outcome == "skipped":
            t.skipped += 1
            continue
        generated = _generated.get(nodeid)
        if generated is not None and generated.tried:
            t.tried += generated.tried
            t.generated += generated.tried
            t.held += (
                generated.held if outcome == "passed" else min(generated.held, generated.tried - 1)
            )
        else:
            t.tried += 1
            t.held += int(outcome == "passed")
        if outcome == "failed":
            t.failed.append(nodeid)
        elif outcome == "xfailed":
            t.xfailed.append(nodeid)
    return tallies


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _outcomes:
        return
    tallies = _tally()
    seconds = time.monotonic() - _started
    write = terminalreporter.write_line
    terminalreporter.section("reliability summary")
    write(f"{'category':<10} {'tried':>6} {'held':>6} {'failed':>7} {'xfail':>6} {'skipped':>8}")
    for name, t in tallies.items():
        extra = f"   ({t.generated} generated by schemathesis)" if t.generated else ""
        write(
            f"{name:<10} {t.tried:>6} {t.held:>6} {len(t.failed):>7} {len(t.xfailed):>6}"
            f" {t.skipped:>8}{extra}"
        )
    total_tried = sum(t.tried for t in tallies.values())
    total_held = sum(t.held for t in tallies.values())
    write(f"{'all':<10} {total_tried:>6} {total_held:>6}   in {seconds:.0f} s")
    for key, value in _figures.items():
        write(f"  {key}: {value}")
    ARTIFACTS.mkdir(exist_ok=True)
    summary = {
        "wall_seconds": round(seconds, 1),
        "categories": {
            name: {
                "tried": t.tried,
                "held": t.held,
                "failed": t.failed,
                "xfailed": t.xfailed,
                "skipped": t.skipped,
                "generated": t.generated,
            }
            for name, t in tallies.items()
        },
        "figures": _figures,
    }
    (ARTIFACTS / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


@pytest.fixture(scope="session")
def api(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """One service without a worker for the access, bad-input and fuzzing tests: submitted
    runs stay queued, and nothing trains."""
    from tests.reliability.helpers import ReliableService

    service = ReliableService(tmp_path_factory.mktemp("api") / "data", worker=False).start()
    yield service
    service.close()
