"""Attacks on a fresh service, each one seen to succeed once (issue 21): bodies nested past
what the serializer survives, repeated metric keys that multiply the work, control
characters in search text, terminal escapes and bidirectional overrides in names and tags,
abandoned uploads, missing security headers (checked in Chromium too: the dashboard and the
API docs work under the policy, and nothing can frame the dashboard).

Runs are made through the store where a test needs one that is running, or one named as an
older service would have stored it (the API no longer accepts such names)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from server.store import run_reports
from server.store.db import make_engine, make_sessionmaker
from server.store.run_store import RunStore
from tests.postgres import service_env
from tests.reliability.helpers import ReliableService, wait_until
from tests.service_harness import ROOT, TOKEN, refused_locs, tiny_ppo_spec

pytestmark = pytest.mark.category("attack")

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReliableService]:
    service = ReliableService(tmp_path_factory.mktemp("attack") / "data", worker=False).start()
    yield service
    service.close()


@contextmanager
def store_of(service: ReliableService) -> Iterator[RunStore]:
    engine = make_engine(service.db_url)
    try:
        yield RunStore(make_sessionmaker(engine), service.data_dir / "runs")
    finally:
        engine.dispose()


def stored_run(service: ReliableService, name: str = "r", tags: list[str] | None = None) -> str:
    """A queued run, stored without the API's checks."""
    with store_of(service) as store:
        run = store.create(
            tiny_ppo_spec(), kind="ppo", name=name, tags=tags or [], notes="", total_steps=20_000
        )
    return run.id


def running_run(service: ReliableService) -> tuple[str, str]:
    """A run claimed by a worker of this test, and its run token (the report routes')."""
    with store_of(service) as store:
        run = store.create(
            tiny_ppo_spec(), kind="ppo", name="r", tags=[], notes="", total_steps=20_000
        )
        worker = store.register_worker(["ray:0"], "ray")
        while (claimed := store.claim_next(worker)) is not None and claimed.id != run.id:
            store.transition(claimed.id, "fail", "not this test's")
        return run.id, run_reports.issue_token(store, run.id)


def nested(depth: int) -> object:
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


# -- nesting --------------------------------------------------------------------------------


def _sweep(spec: dict, space: dict | None = None) -> dict:
    return {"spec": spec, "space": space or {"config.seed": {"choice": [1, 2]}}}


DEEP = {
    "config": ("/api/runs", {**tiny_ppo_spec(), "config": {"x": nested(300)}}, ["config"]),
    "env.overrides": (
        "/api/runs",
        {**tiny_ppo_spec(), "env": {"name": "PointReach", "overrides": {"x": nested(300)}}},
        ["env", "overrides"],
    ),
    "sweep spec.config": (
        "/api/sweeps",
        _sweep({**tiny_ppo_spec(), "config": {"x": nested(300)}}),
        ["spec", "config"],
    ),
    "sweep space choice": (
        "/api/sweeps",
        _sweep(tiny_ppo_spec(), {"config.seed": {"choice": [1, nested(600)]}}),
        ["space", "config.seed", "choice", 1],
    ),
}


@pytest.mark.parametrize("where", list(DEEP))
def test_deeply_nested_json_is_a_422_on_its_field(svc: ReliableService, where: str) -> None:
    path, body, loc = DEEP[where]
    response = svc.client.post(path, json=body)
    assert refused_locs(response) == [["body", *loc]]
    assert "nested deeper than" in response.text


def test_json_past_the_parsers_depth_is_a_4xx(svc: ReliableService) -> None:
    body = '{"env": {"name": "PointReach"}, "config": {"x": ' + "[" * 5000 + "]" * 5000 + "}}"
    response = svc.client.post(
        "/api/runs", content=body, headers={"Content-Type": "application/json"}
    )
    assert 400 <= response.status_code < 500 and "detail" in response.json(), response.text


# -- metric keys ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_with_metrics(svc: ReliableService) -> str:
    """A run with 2,000 steps of three metrics, reported through its run token."""
    run_id, token = running_run(svc)

    def vals(i: int) -> dict[str, float]:
        return {"losses/actor": float(i), "a": 1.0, "b": 2.0}

    items = [
        {"type": "metrics", "step": 16 * (i + 1), "wall_time": 1.0 + i, "values": vals(i)}
        for i in range(2000)
    ]
    with httpx.Client(base_url=svc.url, headers={"Authorization": f"Bearer {token}"}) as client:
        answer = client.post(f"/api/runs/{run_id}/report/batch", json={"seq": 1, "items": items})
        assert answer.json() == {"stored": True}, answer.text
    return run_id


def _timed_get(svc: ReliableService, url: str) -> tuple[float, httpx.Response]:
    best, response = float("inf"), None
    for _ in range(3):
        start = time.perf_counter()
        response = svc.client.get(url)
        best = min(best, time.perf_counter() - start)
    assert response is not None and response.status_code == 200, response
    return best, response


def test_repeated_metric_keys_are_read_once(
    svc: ReliableService, run_with_metrics: str, figures: dict
) -> None:
    url = f"/api/runs/{run_with_metrics}/metrics?keys="
    copies = ",".join(["losses/actor"] * 761)  # 9,892 characters, under the 10,000 cap
    one_s, one = _timed_get(svc, url + "losses/actor")
    many_s, many = _timed_get(svc, url + copies)
    figures["attack: metric keys x761 vs x1 (s)"] = f"{many_s:.3f} vs {one_s:.3f}"
    assert many.json() == one.json()
    assert list(one.json()["series"]) == ["losses/actor"]
    # Read 761 times, the request took ~570x as long (5.7 s against 0.01 s).
    assert many_s < 5 * one_s + 0.1, (many_s, one_s)


def test_too_many_distinct_metric_keys_are_a_422(
    svc: ReliableService, run_with_metrics: str
) -> None:
    keys = ",".join(f"k{i}" for i in range(257))
    response = svc.client.get(f"/api/runs/{run_with_metrics}/metrics", params={"keys": keys})
    assert refused_locs(response) == [["query", "keys"]]
    keys = ",".join(f"k{i}" for i in range(256))
    response = svc.client.get(f"/api/runs/{run_with_metrics}/metrics", params={"keys": keys})
    last_seq = svc.client.get(f"/api/runs/{run_with_metrics}").json()["last_seq"]
    assert response.status_code == 200 and response.json() == {
        "series": {},
        "last_seq": last_seq,
        "phase": None,  # the run never reported a phase
    }


# -- search text ----------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def svc_on_each(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ReliableService]:
    if request.param == "sqlite":
        yield request.getfixturevalue("svc")
        return
    service = ReliableService(
        tmp_path_factory.mktemp("attack-postgresql") / "data",
        worker=False,
        env=service_env(request, "postgresql"),
    ).start()
    yield service
    service.close()


@pytest.mark.parametrize("char", ["\x00", "\x1b", "\x7f", "\x85", "\u202e"])
def test_control_characters_in_search_text_are_a_422(
    svc_on_each: ReliableService, char: str
) -> None:
    svc = svc_on_each
    alpha = f"alpha-{ord(char):x}-searchable"
    stored_run(svc, name=alpha)
    stored_run(svc, name=f"beta-{ord(char):x}-searchable")
    found = svc.client.get("/api/runs", params={"q": alpha[:-3]}).json()
    assert [r["name"] for r in found["items"]] == [alpha]
    for field in ("q", "tag", "kind", "sweep_id"):
        # q=%00 matched every run on SQLite (lower() and LIKE stop at the NUL); on
        # PostgreSQL a NUL cannot be sent in text at all.
        response = svc.client.get("/api/runs", params={field: f"alpha{char}"})
        assert refused_locs(response) == [["query", field]], field
    assert refused_locs(svc.client.get("/api/sweeps", params={"status": char})) == [
        ["query", "status"]
    ]


# -- names, tags and notes ------------------------------------------------------------------

HOSTILE = [
    "\x1b[2J\x1b[31mred",
    "nul\x00byte",
    "bell\x07",
    "two\r\nlines",
    "c1\x9bcontrol",
    "invoice\u202efdp.exe",
    "isolate\u2066x\u2069",
    "mark\u200f",
]


@pytest.mark.parametrize("text", HOSTILE, ids=[ascii(t) for t in HOSTILE])
def test_control_and_bidi_characters_are_refused_in_names_and_tags(
    svc: ReliableService, text: str
) -> None:
    run_id = stored_run(svc)
    spec = tiny_ppo_spec()
    assert refused_locs(svc.client.post("/api/runs", json={**spec, "name": text})) == [
        ["body", "name"]
    ]
    assert refused_locs(svc.client.post("/api/runs", json={**spec, "tags": ["ok", text]})) == [
        ["body", "tags", 1]
    ]
    assert refused_locs(svc.client.patch(f"/api/runs/{run_id}", json={"name": text})) == [
        ["body", "name"]
    ]
    assert refused_locs(svc.client.patch(f"/api/runs/{run_id}", json={"tags": [text]})) == [
        ["body", "tags", 0]
    ]
    sweep = {**_sweep(spec), "name": text}
    assert refused_locs(svc.client.post("/api/sweeps", json=sweep)) == [["body", "name"]]
    sweep = _sweep({**spec, "tags": [text]})
    assert refused_locs(svc.client.post("/api/sweeps", json=sweep)) == [["body", "spec", "tags", 0]]
    assert svc.run(run_id)["name"] == "r"


def test_notes_keep_newlines_and_tabs_and_refuse_the_rest(svc: ReliableService) -> None:
    run_id = stored_run(svc)
    answer = svc.client.patch(f"/api/runs/{run_id}", json={"notes": "a\n\tb\r\nc"})
    assert answer.status_code == 200 and answer.json()["notes"] == "a\n\tb\nc"
    for bad in ("\x1b[2J", "x\ry", "x\u202ey", "x\x00"):
        response = svc.client.patch(f"/api/runs/{run_id}", json={"notes": bad})
        assert refused_locs(response) == [["body", "notes"]], ascii(bad)
    assert svc.run(run_id)["notes"] == "a\n\tb\nc"


def test_cli_ls_neutralises_what_an_older_service_stored(svc: ReliableService) -> None:
    stored_run(svc, name="\x1b[2J\x1b[31mred [bold]x[/bold]", tags=["t\u202eag", "cli-ls"])
    out = subprocess.run(
        [sys.executable, "-m", "server.cli", "ls", "--tag", "cli-ls", "--url", svc.url],
        cwd=ROOT,
        env={"NNX_PPO_API_TOKEN": TOKEN, "PATH": "/usr/bin:/bin", "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\u202e" not in out.stdout
    assert "\\x1b[2J\\x1b[31mred [bold]x[/bold]" in out.stdout  # escaped, and not markup
    assert "t\\u202eag" in out.stdout


# -- abandoned uploads ----------------------------------------------------------------------


def test_an_abandoned_upload_is_not_logged_as_a_server_error(svc: ReliableService) -> None:
    run_id, token = running_run(svc)
    checkpoints = svc.checkpoints_dir(run_id)
    logged = svc.output.stat().st_size
    with socket.create_connection(("127.0.0.1", svc.port), timeout=10) as sock:
        sock.sendall(
            (
                f"PUT /api/runs/{run_id}/report/checkpoints/4000 HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{svc.port}\r\nAuthorization: Bearer {token}\r\n"
                f"X-Content-SHA256: {'0' * 64}\r\nContent-Length: 1000000\r\n\r\n"
            ).encode()
            + b"x" * 10_000
        )
        # The route is streaming the body to a hidden file when the client goes.
        wait_until("the upload's file", lambda: list(checkpoints.glob(".upload-*")), 15)
    wait_until("the upload's file removed", lambda: not list(checkpoints.glob(".upload-*")), 15)
    time.sleep(0.5)  # what the service logs about it
    log = _log_since(svc, logged)
    # It was "unhandled error on PUT ..." with a ClientDisconnect traceback.
    assert "unhandled error" not in log and "Traceback" not in log, log
    assert "ClientDisconnect" not in log, log
    assert list(checkpoints.iterdir()) == []
    assert svc.client.get("/api/health").status_code == 200


def _log_since(svc: ReliableService, offset: int) -> str:
    with open(svc.output, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


# -- security headers -----------------------------------------------------------------------


def _asset(svc: ReliableService) -> str:
    index = svc.client.get("/").text
    found = [p for p in index.split('"') if p.startswith("/assets/") and p.endswith(".js")]
    assert found, index
    return found[0]


def test_security_headers_on_every_kind_of_answer(
    svc: ReliableService, run_with_metrics: str
) -> None:
    with httpx.Client(base_url=svc.url) as anonymous:
        refused = anonymous.get("/api/runs")
    answers = {
        "page": svc.client.get("/"),
        "deep link": svc.client.get("/runs/abc"),
        "asset": svc.client.get(_asset(svc)),
        "json": svc.client.get("/api/runs"),
        "download": svc.client.get(f"/api/runs/{run_with_metrics}/metrics.csv"),
        "401": refused,
        "404": svc.client.get("/api/runs/0123456789ab"),
        "422": svc.client.get("/api/runs", params={"limit": 0}),
        "docs": svc.client.get("/api/docs"),
        "openapi": svc.client.get("/api/openapi.json"),
    }
    for what, response in answers.items():
        headers = response.headers
        assert headers.get("x-content-type-options") == "nosniff", what
        assert headers.get("x-frame-options") == "DENY", what
        csp = dict(d.strip().split(" ", 1) for d in headers["content-security-policy"].split(";"))
        assert csp["frame-ancestors"] == "'none'", what
        assert csp["object-src"] == "'none'" and csp["base-uri"] == "'none'", what
        assert "'unsafe-inline'" not in csp["script-src"] and "*" not in csp["script-src"], what
        assert csp["script-src"] == "'self'", what
        if what != "docs":  # ReDoc inserts <style> elements of its own
            assert csp["style-src"] == "'self'", what
    assert "<script>" not in answers["docs"].text  # every script of the docs is a file here


@pytest.fixture(scope="module")
def chromium():  # type: ignore[no-untyped-def]
    if not CHROMIUM.exists():
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        yield browser
        browser.close()


WATCH_CSP = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
  `${e.violatedDirective} ${e.blockedURI}`));
"""


def test_the_dashboard_and_the_docs_work_under_the_policy(
    svc: ReliableService, run_with_metrics: str, chromium, figures: dict
) -> None:  # type: ignore[no-untyped-def]
    context = chromium.new_context()
    page = context.new_page()
    page.add_init_script(WATCH_CSP)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: console.append(str(error)))
    page.goto(f"{svc.url}/?token={TOKEN}")
    page.wait_for_selector("table, .empty, main *")
    with store_of(svc) as store:  # a second run whose spec differs: the compare diff table
        spec = tiny_ppo_spec(total_steps=40_000)
        other = store.create(
            spec, kind="ppo", name="other", tags=[], notes="", total_steps=40_000
        ).id
    routes = [
        "/",
        "/runs/new",
        f"/runs/{run_with_metrics}",
        f"/compare?ids={run_with_metrics},{other}&metric=losses/actor",  # swatches
        "/sweeps",
    ]
    violations: list[str] = []
    for route in routes:
        page.goto(svc.url + route)
        page.wait_for_load_state("networkidle")
        assert page.locator("main").inner_text().strip(), route  # the app rendered
        if route.startswith("/compare"):
            page.wait_for_selector(".diff-table .swatch")
        violations += page.evaluate("window.__csp")
    csp_console = [m for m in console if "Content Security Policy" in m]
    assert violations == [] and csp_console == [], (violations, csp_console)

    # The docs render from this server's assets, nothing refused.
    page.goto(f"{svc.url}/api/docs")
    page.wait_for_load_state("load")
    page.wait_for_timeout(1000)
    docs_violations = page.evaluate("window.__csp")
    assert docs_violations == [], docs_violations
    page.wait_for_selector("#swagger-ui .info", timeout=30_000)

    # Nothing can frame the dashboard.
    framer = context.new_page()
    framer.set_content(f'<iframe id="f" src="{svc.url}/"></iframe>')
    time.sleep(1.0)
    frame = framer.frame(url=lambda u: u.startswith(svc.url))
    framed = frame is not None and frame.evaluate("!!document.querySelector('main')")
    figures["attack: CSP violations on 5 dashboard pages"] = len(violations)
    assert not framed
    context.close()


# -- sweep objectives -----------------------------------------------------------------------


def test_a_sweep_whose_objective_no_run_reports_is_refused(
    svc: ReliableService, figures: dict
) -> None:
    # The checker process imports JAX and traces the runs' step: slow on a busy CPU.
    # "eval/episode_reward/mean" was accepted: every trial ran, every objective was null.
    body = {**_sweep(tiny_ppo_spec()), "objective": {"metric": "eval/episode_reward/mean"}}
    response = svc.client.post("/api/sweeps", json=body, timeout=240)
    assert refused_locs(response) == [["body", "objective", "metric"]]
    message = response.json()["detail"][0]["msg"]
    assert "'eval/episode_reward/mean'" in message
    for reported in ("eval/episode_reward", "eval/episode_reward_p50", "losses/actor"):
        assert reported in message, message
    no_eval = tiny_ppo_spec(eval={"enabled": False})
    body = {**_sweep(no_eval), "objective": {"metric": "eval/episode_reward"}}
    assert refused_locs(svc.client.post("/api/sweeps", json=body, timeout=240)) == [
        ["body", "objective", "metric"]
    ]
    body = {**_sweep(no_eval), "objective": {"metric": "losses/total", "mode": "min"}}
    start = time.perf_counter()
    created = svc.client.post("/api/sweeps", json=body, timeout=240)
    figures["attack: sweep submit with its objective traced (s)"] = round(
        time.perf_counter() - start, 2
    )
    assert created.status_code == 201, created.text
    svc.client.post(f"/api/sweeps/{created.json()['id']}/cancel")
