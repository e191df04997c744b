"""Sweeps in the dashboard, in a real headless Chromium against a real server: "Sweep around
this run" from a finished run's page, a 422 shown under the space entry it names, then a
sweep of four PointReach trials (two at once) followed live; its trial table sorted, the
parallel-coordinates plot brushed to filter the table, the objective chart, "Compare best"
opening the compare view with the two best runs, the sweeps list, and delete. Screenshots go
to tests/e2e/artifacts/."""

from __future__ import annotations

import contextlib
import json
import re
import time
import urllib.request
from typing import Any

import pytest

from tests.e2e.conftest import DIST_INDEX, screenshot
from tests.service_harness import tiny_ppo_spec

pytestmark = [
    pytest.mark.skipif(not DIST_INDEX.is_file(), reason="the dashboard is not built"),
]
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
expect = playwright.expect
PlaywrightTimeoutError = playwright.TimeoutError

LR = "config.ppo.learning_rate"
SIZES = "network.actor_hidden_sizes"


def call(server, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        server.url + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=180) as response:
        text = response.read()
    return json.loads(text) if text else None


def finished_base_run(server) -> str:
    spec = tiny_ppo_spec(total_steps=2_000)
    spec["name"] = "sweep-base"
    spec["config"]["eval"]["every_steps"] = 1_000
    spec["config"]["checkpoint_every_steps"] = 1_000
    run = call(server, "POST", "/api/runs", spec)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        current = call(server, "GET", f"/api/runs/{run['id']}")
        if current["status"] == "succeeded":
            return run["id"]
        assert current["status"] in ("queued", "running"), current
        time.sleep(0.5)
    raise TimeoutError(f"the base run did not finish:\n{server.log_path.read_text()[-3000:]}")


def row_field(page, index: int, name: str):
    row = page.locator("[data-space-row]").nth(index)
    return row.locator(f".space-{name} input, .space-{name} select")


def column(page, index: int) -> list[str]:
    return page.locator(f".trials-table tbody tr td:nth-child({index})").all_inner_texts()


def test_sweep_around_a_run_follow_it_filter_and_compare(server, desktop):
    page, console = desktop
    console.allow_status(422)
    run_id = finished_base_run(server)
    page.goto(server.login_url())
    page.goto(f"{server.url}/runs/{run_id}")
    page.get_by_role("link", name="Sweep around this run").click()
    expect(page.get_by_role("heading", name="New sweep")).to_be_visible()
    expect(page.get_by_label("Base run")).to_have_value(run_id)
    expect(page.get_by_label("Name", exact=True)).to_have_value("sweep-base-sweep")

    # A path the run spec does not have: the server's 422 shows under that entry.
    row_field(page, 0, "path").fill("config.ppo.no_such_field")
    page.get_by_role("button", name="Start sweep", exact=True).click()
    error = page.locator("[data-space-row]").nth(0).locator(".field-error")
    expect(error).to_be_visible(timeout=120_000)  # the spec checker may still be starting
    expect(error).to_contain_text("no_such_field")
    expect(
        page.get_by_role("alert").filter(has_text="space.config.ppo.no_such_field")
    ).to_be_visible()
    assert page.url.endswith(f"/sweeps/new?from={run_id}")
    screenshot(page, "sweep-form-422")

    # The space: learning rate (log uniform) and the actor's hidden sizes (a choice).
    row_field(page, 0, "path").fill(LR)
    expect(row_field(page, 0, "kind")).to_have_value("log_uniform")
    row_field(page, 0, "low").fill("1e-4")
    row_field(page, 0, "high").fill("3e-3")
    page.get_by_role("button", name="Add parameter").click()
    row_field(page, 1, "path").fill(SIZES)
    row_field(page, 1, "kind").select_option("choice")
    expect(row_field(page, 1, "low")).to_be_hidden()
    row_field(page, 1, "values").fill("[16], [32]")
    page.get_by_label("Name", exact=True).fill("e2e-sweep")
    page.get_by_label("Method").select_option("random")
    page.get_by_label("Max trials").fill("4")
    page.get_by_label("Parallel").fill("2")
    # The JSON tab shows the same body, and the form takes it back.
    page.get_by_role("tab", name="JSON").click()
    body = json.loads(page.get_by_label("Sweep (JSON)").input_value())
    assert body["space"] == {LR: {"log_uniform": [1e-4, 3e-3]}, SIZES: {"choice": [[16], [32]]}}
    assert (body["max_trials"], body["parallel"], body["method"]) == (4, 2, "random")
    assert body["spec"]["env"]["name"] == "PointReach" and "name" not in body["spec"]
    page.get_by_role("tab", name="Form").click()
    screenshot(page, "sweep-form")
    page.get_by_role("button", name="Start sweep", exact=True).click()

    # The sweep's page: trials appear while it runs.
    expect(page).to_have_url(re.compile(r"/sweeps/s[0-9a-f]{11}$"), timeout=60_000)
    sweep_id = page.url.rsplit("/", 1)[1]
    expect(page.get_by_role("heading", name="e2e-sweep")).to_be_visible()
    rows = page.locator(".trials-table tbody tr[data-trial]")
    expect(rows.first).to_be_visible(timeout=60_000)
    assert page.locator(".run-header .badge").inner_text() == "running"
    expect(page.locator(".live-state")).to_have_text("● live")
    expect(page.locator(".run-header .badge")).to_have_text("finished", timeout=300_000)
    expect(rows).to_have_count(4)
    expect(page.locator(".live-state")).to_have_text("finished")
    sweep = call(server, "GET", f"/api/sweeps/{sweep_id}")
    trials = sweep["trials"]
    assert [t["status"] for t in trials] == ["succeeded"] * 4, trials
    screenshot(page, "sweep-page")

    # Sorting: the objective (last column), best first, then the other way; by trial number.
    objective_col = 2 + 2 + 1  # trial, two params, status, objective
    page.locator(".trials-table thead button", has_text="eval/episode_reward").click()
    values = [float(v.replace(",", "")) for v in column(page, objective_col)]
    assert values == sorted(values, reverse=True), values
    page.locator(".trials-table thead button", has_text="eval/episode_reward").click()
    values = [float(v.replace(",", "")) for v in column(page, objective_col)]
    assert values == sorted(values), values
    page.locator(".trials-table thead button", has_text="Trial").click()
    assert column(page, 1) == ["#0", "#1", "#2", "#3"]
    # Each row links to its run.
    link = rows.first.get_by_role("link", name="#0")
    assert link.get_attribute("href") == f"/runs/{trials[0]['run_id']}"

    # Parallel coordinates: a line per trial; brushing the top of the sizes axis ([32]).
    lines = page.locator("svg.parallel-plot polyline")
    expect(lines).to_have_count(4)
    hit = page.locator(f'svg.parallel-plot g.axis[data-key="{SIZES}"] rect.axis-hit')
    hit.scroll_into_view_if_needed()  # the sorting clicks scrolled down to the table
    box = hit.bounding_box()
    assert box is not None
    x = box["x"] + box["width"] / 2
    page.mouse.move(x, box["y"] + 2)
    page.mouse.down()
    page.mouse.move(x, box["y"] + box["height"] * 0.3, steps=5)
    page.mouse.up()
    wide = sorted(t["trial"] for t in trials if t["params"][SIZES] == [32])
    expect(rows).to_have_count(len(wide) or 0)
    assert sorted(int(t[1:]) for t in column(page, 1) if t.startswith("#")) == wide
    expect(page.get_by_text(f"{len(wide)} of 4 trials")).to_be_visible()
    screenshot(page, "sweep-page-brushed")
    page.get_by_role("button", name="Clear brushes").click()
    expect(rows).to_have_count(4)

    # The objective chart: uPlot drew the four trials.
    expect(page.locator('.chart-box[data-points="4"] canvas').first).to_be_visible()

    # At a phone's width the page does not scroll sideways (the table scrolls in its box).
    page.set_viewport_size({"width": 375, "height": 800})
    expect(lines).to_have_count(4)
    with contextlib.suppress(PlaywrightTimeoutError):  # the charts resize on their observer
        page.wait_for_function(
            "document.documentElement.scrollWidth <= window.innerWidth", timeout=5_000
        )
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the sweep page is {overflow}px wider than a 375px screen"
    screenshot(page, "phone-sweep-page")
    page.set_viewport_size({"width": 1280, "height": 800})

    # Compare the best two: the compare view with their runs.
    best = sorted(trials, key=lambda t: -t["objective"])[:2]
    page.get_by_label("Best N").fill("2")
    page.get_by_role("button", name="Compare best").click()
    expect(page.get_by_role("heading", name="Compare runs")).to_be_visible()
    ids = page.url.split("ids=", 1)[1].split("&")[0].split(",")
    assert ids == [t["run_id"] for t in best]
    expect(page.locator(".run-picker input:checked")).to_have_count(2)
    screenshot(page, "sweep-compare-best")

    # The sweeps list shows it; from its page it can be deleted (with the confirm dialog).
    page.get_by_role("link", name="Sweeps", exact=True).click()
    row = page.locator(f'tr[data-sweep-id="{sweep_id}"]')
    expect(row).to_contain_text("PointReach")
    expect(row).to_contain_text("4 / 4")
    expect(row.locator(".badge")).to_have_text("finished")
    screenshot(page, "sweeps-list")
    row.get_by_role("link", name="e2e-sweep").click()
    page.get_by_role("button", name="Delete sweep").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(page.get_by_role("heading", name="Sweeps")).to_be_visible()
    expect(page.locator(f'tr[data-sweep-id="{sweep_id}"]')).to_have_count(0)
    assert call(server, "GET", "/api/sweeps")["total"] == 0


def test_sweep_pages_fit_a_phone(server, phone):
    page, _console = phone
    page.goto(server.login_url())
    page.goto(f"{server.url}/sweeps/new")
    expect(page.get_by_role("heading", name="New sweep")).to_be_visible()
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the sweep form is {overflow}px wider than a 375px screen"
    screenshot(page, "phone-sweep-form")
    page.goto(f"{server.url}/sweeps")
    expect(page.get_by_role("heading", name="Sweeps")).to_be_visible()
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the sweeps list is {overflow}px wider than a 375px screen"
