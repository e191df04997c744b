"""The run page in a real Chromium against a real `nnx-ppo serve`: at a phone's 390x844 no
request fails and nothing is logged as an error; the phase and how long it has lasted
while a run compiles; the percentile metrics as one chart with quantile bands; y-axis
labels that fit; the wall-time axis from the run's start in one format."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.conftest import DIST_INDEX, ConsoleWatch, screenshot
from tests.service_harness import tiny_ppo_spec

pytestmark = [
    pytest.mark.skipif(not DIST_INDEX.is_file(), reason="the dashboard is not built"),
]
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
expect = playwright.expect


@pytest.fixture(scope="module")
def api(server):  # type: ignore[no-untyped-def]
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=120
    ) as client:
        yield client


@pytest.fixture(scope="module")
def finished(api: httpx.Client) -> dict:
    """A finished PointReach run whose evaluations report percentiles."""
    spec = tiny_ppo_spec(total_steps=8000)
    spec["config"]["eval"]["logging_percentiles"] = [0, 25, 50, 75, 100]
    response = api.post("/api/runs", json={**spec, "name": "run-page"})
    assert response.status_code == 201, response.text
    run = response.json()
    import time

    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        run = api.get(f"/api/runs/{run['id']}").json()
        if run["status"] == "succeeded":
            return run
        time.sleep(0.25)
    raise TimeoutError(f"run {run['id']} is {run['status']}")


IPHONE_UA = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 14_7_1 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/14.1.2 Mobile/15E148 Safari/604.1"
)


@pytest.fixture
def phone390(browser: object) -> Iterator[tuple[object, ConsoleWatch, list[str]]]:
    """A fresh 390x844 page; fails the test on any console error and any 4xx/5xx answer."""
    context = browser.new_context(  # Playwright's "iPhone 12", in Chromium
        viewport={"width": 390, "height": 844},
        device_scale_factor=3,
        is_mobile=True,
        has_touch=True,
        user_agent=IPHONE_UA,
    )
    page = context.new_page()
    page.set_default_timeout(20_000)
    watch = ConsoleWatch()
    page.on("console", lambda msg: msg.type == "error" and watch.errors.append(msg.text))
    page.on("pageerror", lambda error: watch.errors.append(f"uncaught: {error}"))
    failed: list[str] = []
    page.on(
        "response",
        lambda r: r.status >= 400 and failed.append(f"{r.status} {r.request.method} {r.url}"),
    )
    yield page, watch, failed
    context.close()
    assert failed == [], f"failed requests: {failed}"
    assert watch.errors == [], f"browser console errors: {watch.errors}"


def test_every_page_at_390_makes_no_failing_request(server, finished, phone390):  # type: ignore[no-untyped-def]
    page, _watch, failed = phone390
    page.goto(server.login_url())
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    for path, ready in [
        (f"/runs/{finished['id']}", ".chart-card"),
        (f"/runs/{finished['id']}?tab=videos", ".run-header .badge"),
        (f"/runs/{finished['id']}?tab=checkpoints", ".run-header .badge"),
        (f"/runs/{finished['id']}?tab=config", ".run-header .badge"),
        (f"/runs/{finished['id']}?tab=logs", ".run-header .badge"),
        ("/runs/new", "h1"),
        (f"/runs/new?teacher={finished['id']}&step=8000", "h1"),
        (f"/runs/new?resume={finished['id']}", "h1"),
        (f"/sweeps/new?from={finished['id']}", "h1"),
        (f"/compare?ids={finished['id']}&x=wall&log=1&smoothing=0.5", ".chart-card"),
        ("/?status=succeeded&kind=ppo&q=run", "h1"),
        (f"/compare?ids={finished['id']}", ".chart-card"),
        ("/sweeps", "h1"),
        ("/sweeps/new", "h1"),
        ("/", "h1"),
    ]:
        page.goto(server.url + path)
        expect(page.locator(ready).first).to_be_visible()
        page.wait_for_load_state("networkidle")
        screenshot(
            page, "phone390-" + re.sub(r"\W+", "-", path.replace(finished["id"], "run")).strip("-")
        )
    assert failed == []


def test_a_live_run_at_390_makes_no_failing_request(server, api, phone390):  # type: ignore[no-untyped-def]
    page, _watch, failed = phone390
    page.goto(server.login_url())
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    run = api.post("/api/runs", json={**tiny_ppo_spec(total_steps=8000), "name": "live390"}).json()
    expect(page.locator(f'[data-run-id="{run["id"]}"]').first).to_be_visible(timeout=10_000)
    page.goto(f"{server.url}/runs/{run['id']}")
    expect(page.locator(".run-header .badge")).to_have_text("succeeded", timeout=240_000)
    for tab in ["Videos", "Checkpoints", "Config", "Logs", "Charts"]:
        page.get_by_role("tab", name=tab).click()
        page.wait_for_load_state("networkidle")
    page.goto(server.url + "/")
    page.wait_for_load_state("networkidle")
    assert failed == []


def test_the_phase_shows_while_a_run_compiles(server, api, desktop):  # type: ignore[no-untyped-def]
    page, _console = desktop
    spec = tiny_ppo_spec(total_steps=3840, ppo={"rollout_length": 12})  # a program of its own
    run = api.post("/api/runs", json={**spec, "name": "phase"}).json()
    page.goto(server.login_url())
    page.goto(f"{server.url}/runs/{run['id']}")
    # The page opens while the run is queued or starting; then its process compiles.
    phase = page.locator(".page-head .run-phase")
    expect(phase).to_have_text(re.compile(r"^Compiling… \d+ s$"), timeout=120_000)
    assert page.locator(".run-charts-empty .run-phase").inner_text().startswith("Compiling… ")
    expect(page.locator(".run-header .badge")).to_have_text("succeeded", timeout=240_000)
    expect(phase).to_be_hidden()  # a finished run does nothing


def test_charts_percentile_bands_axis_widths_and_wall_time(server, finished, desktop):  # type: ignore[no-untyped-def]
    page, _console = desktop
    page.goto(server.login_url())
    page.goto(f"{server.url}/runs/{finished['id']}")
    # The five percentiles are one chart: the median and two bands (p0-p100, p25-p75).
    family = page.locator('.chart-card[data-metric="eval/episode_reward_p*"]')
    expect(family).to_have_attribute("data-bands", "2")
    assert page.locator('.chart-card[data-metric^="eval/episode_reward_p"]').count() == 1
    # Large y labels (bytes, hundreds of millions) fit left of the plot.
    rss = page.locator('.chart-card[data-metric="system/rss_bytes"]')
    expect(rss.locator(".uplot")).to_have_attribute("data-y-widest", re.compile(r"\d+"))
    widest = int(rss.locator(".uplot").get_attribute("data-y-widest"))
    left = rss.locator(".u-over").evaluate("e => e.offsetLeft")
    assert widest > 45 and left >= widest + 15, (widest, left)  # 15 px: the tick and gap
    # The wall-time axis starts at the run's start: its first metric comes after the
    # compile, not at 0:00.
    page.get_by_label("X axis").select_option("wall")
    box = page.locator('.chart-card[data-metric="losses/total"] .chart-box')
    expect(box).to_have_attribute("data-x-min", "0")
    first = float(box.get_attribute("data-x-first"))
    first_metric = finished["started_at"]  # the run's start, for the arithmetic below
    assert first > 0.5, first
    assert first < finished["finished_at"] - first_metric
    screenshot(page, "run-page-wall-time")
