"""The dashboard's daily loop in a real Chromium against a real `nnx-ppo serve`: the runs
list is live from WS /api/events (no polling), a run's name, tags and notes are edited in
place, bulk tag and delete, filters in the URL, compare by wall time, keyboard zoom and a
chart's CSV. One finished PointReach run is shared by the module."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import pytest

from tests.e2e.conftest import DIST_INDEX, screenshot
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


def _submit(api: httpx.Client, name: str, total_steps: int = 8000) -> dict:
    response = api.post("/api/runs", json={**tiny_ppo_spec(total_steps=total_steps), "name": name})
    assert response.status_code == 201, response.text
    return response.json()


def _wait(api: httpx.Client, run_id: str, status: str = "succeeded", timeout: float = 240) -> dict:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = api.get(f"/api/runs/{run_id}").json()
        if run["status"] == status:
            return run
        time.sleep(0.25)
    raise TimeoutError(f"run {run_id} is {run['status']}")


@pytest.fixture(scope="module")
def finished(api: httpx.Client) -> dict:
    run = _submit(api, "live-finished")
    return _wait(api, run["id"])


def login(page, server) -> None:  # type: ignore[no-untyped-def]
    page.goto(server.login_url())
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()


def test_runs_list_is_live_without_polling(server, api, finished, desktop):  # type: ignore[no-untyped-def]
    page, _console = desktop
    lists: list[str] = []
    listing = re.compile(r"/api/runs\?")
    page.on("request", lambda r: listing.search(r.url) and lists.append(f"{r.method} {r.url}"))
    login(page, server)
    expect(page.locator(".live-state")).to_have_text("● live")
    expect(page.locator(f'tr[data-run-id="{finished["id"]}"]')).to_be_visible()
    run = _submit(api, "live-new")
    row = page.locator(f'tr[data-run-id="{run["id"]}"]')
    expect(row).to_be_visible(timeout=10_000)  # pushed, not reloaded
    expect(row).to_contain_text("live-new")
    expect(row.locator(".badge")).to_have_text(re.compile("queued|running"))
    expect(row.locator(".badge")).to_have_text("running", timeout=120_000)
    screenshot(page, "runs-list-live")
    expect(row.locator(".badge")).to_have_text("succeeded", timeout=240_000)
    expect(row.locator("progress")).to_have_attribute("value", "1")
    assert len(lists) == 1, f"the list was fetched again: {lists}"


def test_name_tags_and_notes_edited_in_place_persist(server, finished, desktop):  # type: ignore[no-untyped-def]
    page, _console = desktop
    login(page, server)
    page.goto(f"{server.url}/runs/{finished['id']}")
    expect(page.get_by_role("heading", name="live-finished")).to_be_visible()
    page.get_by_role("button", name="Rename the run").click()
    page.get_by_label("Run name").fill("live-renamed")
    page.get_by_label("Run name").press("Enter")
    expect(page.get_by_role("heading", name="live-renamed")).to_be_visible()
    page.get_by_label("Add a tag").fill("keeper")
    page.get_by_label("Add a tag").press("Enter")
    expect(page.locator('.run-meta .tag[data-tag="keeper"]')).to_be_visible()
    page.get_by_label("Notes").fill("lr looks too high")
    page.get_by_role("button", name="Save notes").click()
    expect(page.locator(".meta-status")).to_have_text("Notes saved")
    page.reload()
    expect(page.get_by_role("heading", name="live-renamed")).to_be_visible()
    expect(page.locator('.run-meta .tag[data-tag="keeper"]')).to_be_visible()
    expect(page.get_by_label("Notes")).to_have_value("lr looks too high")


def test_filter_in_the_url_survives_reload(server, finished, desktop):  # type: ignore[no-untyped-def]
    page, _console = desktop
    login(page, server)
    page.get_by_label("Search").fill("live-renamed")
    page.wait_for_url(re.compile(r"\?q=live-renamed$"))
    rows = page.locator("tr[data-run-id]")
    expect(rows).to_have_count(1)
    page.get_by_label("Status").select_option("succeeded")
    page.wait_for_url(re.compile(r"\?q=live-renamed&status=succeeded$"))
    page.reload()
    expect(page.get_by_label("Search")).to_have_value("live-renamed")
    expect(page.get_by_label("Status")).to_have_value("succeeded")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run-id", finished["id"])


def test_keyboard_zoom_and_csv_download(server, api, finished, desktop, tmp_path: Path):  # type: ignore[no-untyped-def]
    page, _console = desktop
    login(page, server)
    page.goto(f"{server.url}/runs/{finished['id']}")
    card = page.locator('figure[data-metric="losses/total"]')
    box = card.locator(".chart-box")
    expect(box.locator("canvas").first).to_be_visible()
    full = (float(box.get_attribute("data-x-min")), float(box.get_attribute("data-x-max")))
    box.focus()
    page.keyboard.press("+")
    expect(box).to_have_attribute("data-zoomed", "true")
    zoomed = (float(box.get_attribute("data-x-min")), float(box.get_attribute("data-x-max")))
    assert zoomed[1] - zoomed[0] == pytest.approx((full[1] - full[0]) / 2)
    page.keyboard.press("ArrowLeft")
    panned = (float(box.get_attribute("data-x-min")), float(box.get_attribute("data-x-max")))
    assert panned[0] < zoomed[0] and panned[1] - panned[0] == pytest.approx(zoomed[1] - zoomed[0])
    page.keyboard.press("Escape")
    expect(box).to_have_attribute("data-zoomed", "false")
    assert float(box.get_attribute("data-x-max")) == full[1]

    with page.expect_download() as download_info:
        card.get_by_role("button", name="Download as CSV").click()
    path = tmp_path / "chart.csv"
    download_info.value.save_as(path)
    assert download_info.value.suggested_filename == f"{finished['id']}-losses-total.csv"
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    wire = api.get(
        f"/api/runs/{finished['id']}/metrics", params={"keys": "losses/total", "max_points": 1000}
    ).json()["series"]["losses/total"]
    assert [int(r["step"]) for r in rows] == wire["step"]
    assert [float(r["wall_time"]) for r in rows] == wire["wall_time"]
    assert [float(r["value"]) for r in rows] == [float(v) for v in wire["value"]]
    assert [float(r["min"]) for r in rows] == [float(v) for v in wire["min"]]
    with page.expect_download() as png_info:
        card.get_by_role("button", name="Download as PNG").click()
    png = tmp_path / "chart.png"
    png_info.value.save_as(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_by_wall_time(server, api, finished, desktop):  # type: ignore[no-untyped-def]
    page, _console = desktop
    login(page, server)
    other = next(r for r in api.get("/api/runs").json()["items"] if r["name"] == "live-new")
    page.goto(f"{server.url}/compare?ids={finished['id']},{other['id']}&metric=losses/total")
    expect(page.locator(".compare .u-legend")).to_contain_text("live-renamed")
    expect(page.locator(".compare .u-legend")).to_contain_text("live-new")
    page.get_by_label("X axis").select_option("wall")
    page.get_by_label("Log scale").check()
    query = parse_qs(urlparse(page.url).query)
    assert query["x"] == ["wall"] and query["log"] == ["1"]
    box = page.locator(".compare .chart-box")
    expect(box.locator("canvas").first).to_be_visible()
    # Seconds since each run's first point: a tiny run trains for seconds, not epochs.
    assert 0 < float(box.get_attribute("data-x-max")) < 600
    assert page.locator(".compare .u-legend").inner_text().count("live-") == 2
    screenshot(page, "compare-wall-time")
    page.reload()
    expect(page.get_by_label("X axis")).to_have_value("wall")
    expect(page.get_by_label("Log scale")).to_be_checked()


def test_bulk_tag_and_delete_with_confirmation(server, api, finished, desktop):  # type: ignore[no-untyped-def]
    page, _console = desktop
    doomed = _submit(api, "live-doomed", total_steps=50_000_000)
    assert api.post(f"/api/runs/{doomed['id']}/cancel").status_code == 202
    _wait(api, doomed["id"], "cancelled")
    other = next(r for r in api.get("/api/runs").json()["items"] if r["name"] == "live-new")
    login(page, server)
    for run in (doomed, other):
        page.locator(f'tr[data-run-id="{run["id"]}"] input.select-run').check()
    page.get_by_label("Tag to add to the selected runs").fill("bulk")
    page.get_by_role("button", name="Add tag").click()
    for run in (doomed, other):
        expect(page.locator(f'tr[data-run-id="{run["id"]}"] .tag')).to_have_text("bulk")
    page.get_by_role("button", name="Delete selected (2)").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Delete 2 runs?")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    assert api.get(f"/api/runs/{doomed['id']}").status_code == 200
    page.get_by_role("button", name="Delete selected (2)").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    for run in (doomed, other):
        expect(page.locator(f'tr[data-run-id="{run["id"]}"]')).to_have_count(0)
        assert api.get(f"/api/runs/{run['id']}").status_code == 404
    expect(page.locator(f'tr[data-run-id="{finished["id"]}"]')).to_be_visible()
