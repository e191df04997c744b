"""The run page's Recordings tab in a real Chromium against a real `nnx-ppo serve`: a
recording of a small recurrent graph network (PointReachDict, four populations) opens as one
heatmap and one projection per population under a step slider, all sharing one cursor;
typed steps, or a Shift-drag across a heatmap, zoom every heatmap into those steps;
env 0's video scrubs the cursor and a click on a heatmap seeks the video; a recording job
is started, refused (422, shown by its field) and cancelled from the page.

The built-in envs cannot render, so the video test serves the recording's detail with a
video entry and an MP4 made here (Playwright routes): the page's side of the video is what
is checked; the service's video endpoint has its own tests."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.e2e.conftest import DIST_INDEX, screenshot

pytestmark = [
    pytest.mark.skipif(not DIST_INDEX.is_file(), reason="the dashboard is not built"),
]
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
expect = playwright.expect

GRAPH = {
    "kind": "graph",
    "populations": [
        {"name": "sensory", "size": 4, "input_from": "state", "activation": "tanh"},
        {"name": "motor", "size": 8, "activation": "tanh"},
        {"name": "arm", "size": 4, "output_to": "arm"},
        {"name": "critic", "size": 1, "output_to": "value"},
    ],
    "connections": [
        {"src": "sensory", "dst": "motor"},
        {"src": "motor", "dst": "motor", "delay": 1},
        {"src": "motor", "dst": "arm"},
        {"src": "sensory", "dst": "critic"},
    ],
    "actions": {"arm": "arm"},
    "value": "value",
}
SPEC = {
    "kind": "ppo",
    "name": "recorded-graph",
    "env": {"name": "PointReachDict"},
    "preset": False,
    "network": GRAPH,
    "config": {
        "ppo": {"n_envs": 8, "rollout_length": 8, "total_steps": 640},
        "eval": {"every_steps": 640, "n_envs": 4, "max_episode_length": 20},
        "checkpoint_every_steps": 640,
    },
}
LENGTH, N_ENVS, FPS = 60, 3, 20.0


@pytest.fixture(scope="module")
def api(server):  # type: ignore[no-untyped-def]
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=240
    ) as client:
        yield client


def _until(read: Any, done: Any, timeout: float = 240) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = read()
        if done(value):
            return value
        time.sleep(0.3)
    raise TimeoutError(f"still {value}")


@pytest.fixture(scope="module")
def run_id(api: httpx.Client) -> str:
    response = api.post("/api/runs", json=SPEC)
    assert response.status_code == 201, response.text
    rid = response.json()["id"]
    _until(lambda: api.get(f"/api/runs/{rid}").json()["status"], lambda s: s == "succeeded")
    return str(rid)


@pytest.fixture(scope="module")
def recording(api: httpx.Client, run_id: str) -> dict[str, Any]:
    body = {"n_envs": N_ENVS, "episode_length": LENGTH, "seed": 3}
    response = api.post(f"/api/runs/{run_id}/recordings", json=body)
    assert response.status_code == 201, response.text
    url = f"/api/runs/{run_id}/recordings/{response.json()['id']}"
    detail = _until(lambda: api.get(url).json(), lambda r: r["status"] not in ("queued", "running"))
    assert detail["status"] == "succeeded", detail["error"]
    return dict(detail)


def _open(page: Any, server: Any, run_id: str, rec: int) -> None:
    page.goto(server.login_url())
    page.goto(f"{server.url}/runs/{run_id}?tab=recordings&recording={rec}")
    expect(page.locator(f'.rec-view[data-recording="{rec}"]')).to_be_visible()


def _cursor(page: Any) -> list[str]:
    """The cursor's step as each heatmap, the slider and the projections show it."""
    heat = page.locator(".rec-heatmap").evaluate_all("(els) => els.map((e) => e.dataset.cursor)")
    return [*heat, page.locator("#rec-step").input_value()]


def _click_at(locator: Any, fraction: float) -> None:
    """A click at ``fraction`` of the element's width (scrolled into view first)."""
    locator.scroll_into_view_if_needed()
    box = locator.bounding_box()
    assert box is not None
    locator.click(position={"x": box["width"] * fraction, "y": box["height"] / 2})


def test_the_tab_draws_each_population_and_shares_one_cursor(server, desktop, recording, run_id):
    page, _ = desktop
    populations = recording["manifest"]["populations"]
    assert len(populations) >= 2
    _open(page, server, run_id, recording["id"])
    heatmaps = page.locator(".rec-heatmap")
    expect(heatmaps).to_have_count(len(populations))
    expect(page.locator(".rec-projection")).to_have_count(len(populations))
    keys = heatmaps.evaluate_all("(els) => els.map((e) => e.dataset.key)")
    assert sorted(keys) == sorted(populations)
    # A canvas that was drawn on has some non-blank pixels.
    drawn = heatmaps.first.evaluate(
        "(c) => c.getContext('2d').getImageData(0, 0, c.width, c.height).data.some((v) => v > 0)"
    )
    assert drawn

    # The step slider moves every heatmap's cursor.
    page.locator("#rec-step").fill("30")
    expect(heatmaps.first).to_have_attribute("data-cursor", "30")
    assert set(_cursor(page)) == {"30"}
    # A click at three quarters of a heatmap moves the slider and the others there:
    # 60 steps over the width, x = 0.75 -> step 45.
    _click_at(heatmaps.nth(1), 0.75)
    expect(page.locator("#rec-step")).to_have_value("45")
    assert set(_cursor(page)) == {"45"}
    points = page.locator(".rec-projection").evaluate_all(
        "(els) => els.map((e) => e.dataset.cursorPoint)"
    )
    assert set(points) == {"45"}  # 60 steps, one point per step
    # The arrow keys on a focused heatmap step the cursor.
    heatmaps.nth(1).press("ArrowRight")
    expect(heatmaps.first).to_have_attribute("data-cursor", "46")

    page.locator("#rec-order").select_option("peak")
    expect(heatmaps.first).to_have_attribute("data-order", "peak")
    page.locator("#rec-env").select_option("2")
    expect(heatmaps).to_have_count(len(populations))
    expect(heatmaps.first).to_have_attribute("data-cursor", "46")
    screenshot(page, "run-page-recording")


def test_typed_or_shift_dragged_steps_zoom_every_heatmap(server, desktop, recording, run_id):
    page, _ = desktop
    populations = recording["manifest"]["populations"]
    _open(page, server, run_id, recording["id"])
    heatmaps = page.locator(".rec-heatmap")
    expect(heatmaps).to_have_count(len(populations))
    readout = page.locator(".rec-window-readout")
    expect(readout).to_have_text(f"all {LENGTH} steps")

    def shown() -> set[tuple[str, str]]:
        return {
            (t0, t1)
            for t0, t1 in heatmaps.evaluate_all(
                "(els) => els.map((e) => [e.dataset.t0, e.dataset.t1])"
            )
        }

    # A window that is not one is refused where it was typed; nothing is reloaded.
    page.locator("#rec-from").fill("40")
    page.locator("#rec-to").fill("10")
    page.get_by_role("button", name="Zoom").click()
    expect(page.locator(".rec-window .field-error")).to_contain_text("Steps shown:")
    assert shown() == {("0", str(LENGTH))}
    # Steps 10-29 typed: every heatmap is redrawn from a slice of those steps, and the
    # cursor (at 0, outside them) moves to the first.
    page.locator("#rec-to").fill("29")
    page.locator("#rec-from").fill("10")
    page.get_by_role("button", name="Zoom").click()
    expect(readout).to_have_text(f"steps 10\u201329 of {LENGTH}")
    expect(page.locator(".rec-window .field-error")).to_be_hidden()
    for i in range(len(populations)):
        expect(heatmaps.nth(i)).to_have_attribute("data-t0", "10")
        expect(heatmaps.nth(i)).to_have_attribute("data-t1", "30")
    expect(page.locator("#rec-step")).to_have_value("10")
    # A click at 76% of a zoomed heatmap: 20 steps from 10, so step 10 + 15.
    _click_at(heatmaps.first, 0.76)
    expect(page.locator("#rec-step")).to_have_value("25")
    # Shift-drag across another from 26% to 51%: steps 15 to 20.
    target = heatmaps.nth(1)
    target.scroll_into_view_if_needed()
    box = target.bounding_box()
    assert box is not None
    y = box["y"] + box["height"] / 2
    page.keyboard.down("Shift")
    page.mouse.move(box["x"] + box["width"] * 0.26, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.51, y, steps=5)
    page.mouse.up()
    page.keyboard.up("Shift")
    expect(readout).to_have_text(f"steps 15\u201320 of {LENGTH}")
    for i in range(len(populations)):
        expect(heatmaps.nth(i)).to_have_attribute("data-t1", "21")
    assert shown() == {("15", "21")}
    screenshot(page, "run-page-recording-zoomed")
    expect(page.locator("#rec-step")).to_have_value("15")  # 25 is outside: to the first
    page.get_by_role("button", name="Whole episode").click()
    expect(readout).to_have_text(f"all {LENGTH} steps")
    for i in range(len(populations)):
        expect(heatmaps.nth(i)).to_have_attribute("data-t1", str(LENGTH))
    assert shown() == {("0", str(LENGTH))}


def _mp4(path: Path, frames: int) -> bytes:
    from server.recording.video_stream import Mp4Stream

    stream = Mp4Stream(path, FPS)
    shades = np.linspace(0, 255, frames).astype(np.uint8)
    stream.write(np.broadcast_to(shades[:, None, None, None], (frames, 32, 48, 3)).copy())
    stream.close()
    return path.read_bytes()


def _serve_ranges(route: Any, body: bytes) -> None:
    """Answers a (range) request for ``body`` as the service's FileResponse does: a video
    that cannot be read by ranges cannot be seeked."""
    asked = re.match(r"bytes=(\d+)-(\d*)", route.request.headers.get("range", ""))
    headers = {"Content-Type": "video/mp4", "Accept-Ranges": "bytes"}
    if not asked:
        route.fulfill(status=200, body=body, headers=headers)
        return
    first = int(asked[1])
    last = int(asked[2]) if asked[2] else len(body) - 1
    headers["Content-Range"] = f"bytes {first}-{last}/{len(body)}"
    route.fulfill(status=206, body=body[first : last + 1], headers=headers)


def test_the_video_scrubs_the_cursor_and_a_heatmap_seeks_it(
    server, desktop, recording, run_id, tmp_path: Path
):
    page, _ = desktop
    detail = {
        **recording,
        "video": True,
        "manifest": {
            **recording["manifest"],
            "video": {"file": "video.mp4", "env": 0, "frames": LENGTH, "fps": FPS},
        },
    }
    video = _mp4(tmp_path / "v.mp4", LENGTH)
    base = f"/api/runs/{run_id}/recordings/{recording['id']}"
    page.route(
        re.compile(re.escape(base) + r"$"),
        lambda route: route.fulfill(content_type="application/json", body=json.dumps(detail)),
    )
    page.route(
        re.compile(re.escape(base) + r"/video$"),
        lambda route: _serve_ranges(route, video),
    )
    _open(page, server, run_id, recording["id"])
    player = page.locator("video.rec-video")
    expect(player).to_be_visible()
    page.wait_for_function("() => document.querySelector('video.rec-video').readyState >= 1")
    heatmaps = page.locator(".rec-heatmap")
    expect(heatmaps.first).to_be_visible()

    # Scrubbing the video to 1.0 s (20 fps: frame 20) moves the cursor.
    player.evaluate("(v) => { v.currentTime = 1.0; }")
    expect(heatmaps.first).to_have_attribute("data-cursor", "20")
    expect(page.locator("#rec-step")).to_have_value("20")
    # A click at a quarter of a heatmap (step 15) seeks the video to frame 15's middle.
    _click_at(heatmaps.first, 0.25)
    expect(page.locator("#rec-step")).to_have_value("15")
    page.wait_for_function(
        "() => Math.abs(document.querySelector('video.rec-video').currentTime - 0.775) < 0.01"
    )
    # Another env's heatmaps hide the video (it shows env 0).
    page.locator("#rec-env").select_option("1")
    expect(player).to_be_hidden()
    expect(page.locator(".rec-env-note")).to_be_visible()


def test_a_job_is_started_refused_and_cancelled_from_the_page(
    server, desktop, api, run_id, recording
):
    page, console = desktop
    console.allow_status(422)
    page.goto(server.login_url())
    page.goto(f"{server.url}/runs/{run_id}?tab=recordings")
    expect(page.locator("#rec-new-step option")).to_have_count(2)  # newest, step 640
    # A video of an env without render is refused by its field.
    page.locator("#rec-new-video").check()
    page.get_by_role("button", name="Record").click()
    problems = page.locator(".rec-form-problems")
    expect(problems).to_contain_text("video: the env PointReachDict cannot be rendered")
    expect(page.locator("#rec-new-video")).to_have_attribute("aria-invalid", "true")

    before = {r["id"] for r in api.get(f"/api/runs/{run_id}/recordings").json()["items"]}
    page.locator("#rec-new-video").uncheck()
    page.locator("#rec-new-envs").fill("2")
    page.locator("#rec-new-length").fill("200000")  # long: still going when cancelled
    page.get_by_role("button", name="Record").click()
    expect(problems).to_be_empty()
    new = _until(
        lambda: {r["id"] for r in api.get(f"/api/runs/{run_id}/recordings").json()["items"]},
        lambda ids: len(ids - before) == 1,
        timeout=20,
    )
    rec = (new - before).pop()
    row = page.locator(f'tr[data-recording="{rec}"]')
    expect(row).to_have_attribute("data-status", re.compile("queued|running"))
    row.get_by_role("button", name=f"Cancel #{rec}").click()
    expect(row).to_have_attribute("data-status", "cancelled", timeout=60_000)
    expect(row.get_by_role("button", name=re.compile("Cancel"))).to_have_count(0)
    screenshot(page, "run-page-recordings-cancelled")
