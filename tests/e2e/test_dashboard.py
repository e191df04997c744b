"""The dashboard in a real headless Chromium against a real server and a real run.

Covers: the access page without a token; a validation error shown next to its field;
submitting a PPO run from the form and watching its charts grow live; the checkpoint list
and a checkpoint download; "use as teacher" prefilling the form; the phone-width layout and
keyboard navigation. Screenshots go to tests/e2e/artifacts/.
"""

from __future__ import annotations

import json
import re
import tarfile
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import DIST_INDEX, field, screenshot
from tests.service_harness import cartpole_video_spec

pytestmark = [
    pytest.mark.skipif(
        not DIST_INDEX.is_file(),
        reason="the dashboard is not built (frontend/dist/index.html missing): "
        "run `npm ci && npm run build` in frontend/",
    ),
]
playwright = pytest.importorskip(
    "playwright.sync_api", reason="the Python playwright package is not installed"
)
expect = playwright.expect

# A PPO run on the built-in PointReach env that finishes in seconds once compiled.
TINY_RUN = {
    "name": "e2e-pointreach",
    "env": "PointReach",
    "network": {"actor_hidden_sizes": "16", "critic_hidden_sizes": "16"},
    "config.ppo": {
        "n_envs": "16",
        "rollout_length": "10",
        "total_steps": "20000",
        "n_minibatches": "4",
    },
    "config.eval": {"every_steps": "4000", "n_envs": "8", "max_episode_length": "50"},
    "config": {"checkpoint_every_steps": "8000"},
}


def login(page, server) -> None:
    page.goto(server.login_url())
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()


def wait_for_env(page, name: str) -> None:
    """Waits until GET /api/envs has listed `name` (the server reads the catalogue at start)."""
    option = page.locator(f'[data-path="env.name"] option[value="{name}"]')
    expect(option).to_have_count(1, timeout=60_000)


def fill_tiny_run(page) -> None:
    field(page, "name").fill(TINY_RUN["name"])
    wait_for_env(page, "PointReach")
    field(page, "env.name").select_option("PointReach")
    for section in ("network", "config.ppo", "config.eval", "config"):
        for name, value in TINY_RUN[section].items():
            field(page, f"{section}.{name}").fill(value)


def test_missing_token_shows_the_access_page(server, desktop):
    page, console = desktop
    console.allow_status(401)
    page.goto(server.url + "/")
    expect(page.get_by_role("heading", name="Access token needed")).to_be_visible()
    expect(page.get_by_text("nnx-ppo serve")).to_be_visible()
    screenshot(page, "access-page")
    page.get_by_role("textbox", name="Access token").fill(server.token)
    page.get_by_role("button", name="Open the dashboard").click()
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    assert page.url.rstrip("/") == server.url


def test_validation_error_appears_next_to_its_field(server, desktop):
    page, console = desktop
    console.allow_status(422)
    login(page, server)
    page.get_by_role("link", name="New run").first.click()
    expect(page.get_by_role("heading", name="New run")).to_be_visible()
    wait_for_env(page, "PointReach")
    field(page, "env.name").select_option("PointReach")
    field(page, "config.ppo.n_envs").fill("10")  # not divisible by n_minibatches = 4
    page.get_by_role("button", name="Start run", exact=True).click()
    error = page.locator('[data-path="config.ppo.n_envs"] .field-error')
    # The server checks a spec in a helper process that may still be starting: allow time.
    expect(error).to_be_visible(timeout=90_000)
    expect(error).to_contain_text("divisible")
    expect(field(page, "config.ppo.n_envs")).to_have_attribute("aria-invalid", "true")
    expect(field(page, "config.ppo.n_envs")).to_be_focused()
    assert page.url.endswith("/runs/new"), "a refused spec must not leave the form"
    screenshot(page, "validation-error")


def test_picking_an_env_fills_the_form_from_its_preset(server, desktop):
    page, _console = desktop
    login(page, server)
    page.goto(server.url + "/runs/new")
    field(page, "name").fill("from-a-preset")
    wait_for_env(page, "MemoryCue")
    field(page, "env.name").select_option("MemoryCue")  # its preset: an LSTM, 12-step episodes
    # The preset comes from the spec-checker process, which may still be starting.
    expect(field(page, "network.kind")).to_have_value("lstm", timeout=60_000)
    expect(field(page, "network.lstm_size")).to_have_value("32")
    expect(field(page, "config.ppo.n_envs")).to_have_value("64")
    expect(field(page, "config.eval.max_episode_length")).to_have_value("12")
    expect(field(page, "name")).to_have_value("from-a-preset")  # the run's own fields stay
    expect(page.locator(".preset-note")).to_contain_text("Filled from the MemoryCue preset")

    field(page, "config.ppo.n_envs").fill("8")
    page.get_by_role("button", name="Fill from preset").click()
    expect(field(page, "config.ppo.n_envs")).to_have_value("64", timeout=30_000)
    screenshot(page, "new-run-from-preset")


def test_a_new_run_opens_with_the_default_env_preset_and_its_page_shows_what_came_from_it(
    server, desktop
):
    page, _console = desktop
    login(page, server)
    page.goto(server.url + "/runs/new")
    wait_for_env(page, "PointReach")
    expect(field(page, "env.name")).to_have_value("PointReach")  # the first env
    # PointReach's preset: 64 envs x 16 steps, learning rate 1e-3 (the library: 256 x 20, 1e-4).
    expect(field(page, "config.ppo.n_envs")).to_have_value("64", timeout=60_000)
    expect(field(page, "config.ppo.rollout_length")).to_have_value("16")
    expect(page.locator(".preset-note")).to_contain_text("Filled from the PointReach preset")
    field(page, "config.ppo.learning_rate").fill("0.002")
    page.get_by_role("tab", name="JSON").click()
    spec = json.loads(page.get_by_label("Run spec (JSON)").input_value())
    # What equals the preset is left to the server, which records it as the preset's.
    assert spec["preset"] == {"variant": "cpu"}, spec
    assert spec["config"] == {"ppo": {"learning_rate": 0.002}}, spec

    # The run page's config view marks the fields that came from the preset.
    body = {**spec, "name": "from-the-preset", "config": {"ppo": {"total_steps": 300}}}
    headers = {"Authorization": f"Bearer {server.token}"}
    run = httpx.post(f"{server.url}/api/runs", json=body, headers=headers, timeout=60).json()
    httpx.post(f"{server.url}/api/runs/{run['id']}/cancel", headers=headers, timeout=60)
    page.goto(f"{server.url}/runs/{run['id']}")
    page.get_by_role("tab", name="Config").click()
    expect(page.locator(".preset-origin")).to_contain_text("from the PointReach preset")
    n_envs = page.locator(".config-table tr", has_text="config.ppo.n_envs")
    expect(n_envs).to_have_attribute("data-from", "preset")
    total = page.locator(".config-table tr", has_text="config.ppo.total_steps")
    expect(total).to_have_attribute("data-from", "spec")
    screenshot(page, "run-config-from-preset")


def test_the_randomization_switch_follows_the_env_and_shows_its_error(server, desktop):
    page, console = desktop
    console.allow_status(422)
    login(page, server)
    page.goto(server.url + "/runs/new")
    wait_for_env(page, "PointReach")
    field(page, "env.name").select_option("PointReach")
    switch = page.locator('[data-path="env.randomize"] input[type="checkbox"]')
    help_line = page.locator('[data-path="env.randomize"] .field-help')
    # PointReach has no domain randomizer: off, and it cannot be turned on.
    expect(switch).not_to_be_checked()
    expect(switch).to_be_disabled()
    expect(help_line).to_have_text("PointReach has no domain randomizer in MuJoCo Playground.")
    # A spec that has it on anyway (the JSON view, loaded into the form): it shows on, can be
    # turned off, and the server's refusal is shown next to it.
    page.get_by_role("tab", name="JSON").click()
    editor = page.get_by_label("Run spec (JSON)")
    spec = {"kind": "ppo", "env": {"name": "PointReach", "randomize": True}, "preset": False}
    editor.fill(json.dumps(spec))
    page.get_by_role("tab", name="Form").click()
    expect(switch).to_be_checked()
    expect(switch).to_be_enabled()
    page.get_by_role("button", name="Start run", exact=True).click()
    error = page.locator('[data-path="env.randomize"] .field-error')
    expect(error).to_be_visible(timeout=90_000)
    expect(error).to_contain_text("has no domain randomizer")
    switch.uncheck()
    expect(switch).to_be_disabled()  # off again, and stays off for this env
    screenshot(page, "new-run-randomization-switch")


def test_json_view_submits_the_text_as_is(server, desktop):
    page, console = desktop
    console.allow_status(422)
    login(page, server)
    page.goto(server.url + "/runs/new")
    page.get_by_role("tab", name="JSON").click()
    editor = page.get_by_label("Run spec (JSON)")
    expect(editor).to_have_value(re.compile(r'"kind": "ppo"'))
    editor.fill('{"kind": "ppo", "env": {"name": "NoSuchEnv"}}')
    page.get_by_role("button", name="Start run from JSON").click()
    expect(page.get_by_role("alert").filter(has_text="env.name")).to_be_visible(timeout=60_000)


def test_submit_a_run_watch_it_live_and_download_a_checkpoint(server, desktop, tmp_path: Path):
    page, _console = desktop
    login(page, server)
    page.goto(server.url + "/runs/new")
    fill_tiny_run(page)
    precision = field(page, "network.precision")
    expect(precision).to_have_value("float32")  # the library's default
    precision.select_option("bfloat16")
    screenshot(page, "new-run-form")
    page.get_by_role("button", name="Start run", exact=True).click()
    page.wait_for_url(re.compile(r"/runs/(?!new\b)[^/?]+$"), timeout=90_000)
    run_id = page.url.rsplit("/", 1)[1]
    expect(page.get_by_role("heading", name=TINY_RUN["name"])).to_be_visible()

    # The chart of losses/total appears and grows while the run trains (live, no reload).
    card = page.locator('figure[data-metric="losses/total"]')
    expect(card).to_be_visible(timeout=240_000)
    first = int(card.get_attribute("data-points"))
    deadline = time.monotonic() + 240
    grown = first
    while time.monotonic() < deadline and grown <= first:
        page.wait_for_timeout(250)
        grown = int(card.get_attribute("data-points"))
    assert grown > first, f"the chart did not grow past {first} points"
    expect(card.locator("canvas").first).to_be_visible()
    expect(page.locator('figure[data-metric^="eval/"]').first).to_be_visible(timeout=120_000)

    expect(page.locator(".run-header .badge")).to_have_text("succeeded", timeout=240_000)
    final_points = int(card.get_attribute("data-points"))
    assert final_points >= grown
    # The run process's own system/* samples have a group of their own.
    system = page.locator('details[data-group="system"]')
    expect(system.locator('figure[data-metric="system/rss_bytes"]')).to_be_visible()
    expect(system.locator('figure[data-metric="system/cpu_percent"]')).to_be_visible()
    screenshot(page, "run-page-charts")

    # Zoom: drag across the plot, then "Reset zoom".
    over = card.locator(".u-over")
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=5)
    page.mouse.up()
    expect(card.locator(".chart-box")).to_have_attribute("data-zoomed", "true")
    page.get_by_role("button", name="Reset zoom").click()
    expect(card.locator(".chart-box")).to_have_attribute("data-zoomed", "false")

    # Wall time on the x axis, smoothing and a log scale redraw without errors.
    page.get_by_label("X axis").select_option("wall")
    page.get_by_label("Log scale").check()
    page.get_by_label("Smoothing").evaluate(
        "el => { el.value = '0.6'; el.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    expect(card.locator("canvas").first).to_be_visible()
    expect(card.locator(".u-legend")).to_contain_text("smoothed")
    page.get_by_label("X axis").select_option("step")

    # The log tail of the run process.
    page.get_by_role("tab", name="Logs").click()
    expect(page.locator("pre.log")).not_to_have_text("")

    # The same run reloaded: the history is drawn from GET /metrics plus the replay.
    page.reload()
    expect(page.get_by_role("tab", name="Logs")).to_have_attribute("aria-selected", "true")
    page.get_by_role("tab", name="Charts").click()
    expect(card).to_be_visible()
    expect(card).to_have_attribute("data-points", str(final_points))

    # Checkpoints: listed with their steps; one downloads as a .tar.gz of step_XXXXXXXXXX/.
    page.get_by_role("tab", name="Checkpoints").click()
    rows = page.locator("table.checkpoints tbody tr")
    expect(rows.first).to_be_visible()
    assert rows.count() >= 2, "checkpoints every 8000 steps of a 20000-step run"
    step = int(rows.first.get_attribute("data-step"))
    with page.expect_download() as download_info:
        rows.first.get_by_role("link", name="Download").click()
    archive = tmp_path / "checkpoint.tar.gz"
    download_info.value.save_as(archive)
    with tarfile.open(archive, "r:gz") as tar:
        tops = {name.split("/", 1)[0] for name in tar.getnames()}
    assert tops == {f"step_{step:010d}"}
    # Its policy, as the service exports it (GET .../policy, tested in tests/client).
    for format, label in (("onnx", "ONNX policy"), ("stablehlo", "StableHLO policy")):
        link = rows.first.get_by_role("link", name=label)
        policy_url = f"/api/runs/{run_id}/checkpoints/{step}/policy?format={format}"
        expect(link).to_have_attribute("href", policy_url)
        expect(link).to_have_attribute("download", f"{run_id}-step_{step:010d}.{format}")
    screenshot(page, "run-page-checkpoints")

    # "Use as teacher" opens the form as a distillation run with this run as the teacher.
    rows.first.get_by_role("link", name="Use as teacher").click()
    expect(page.get_by_role("heading", name="New run")).to_be_visible()
    expect(page.locator("#kind-distillation")).to_be_checked()
    expect(page.locator('[data-path="teacher"] select').first).to_have_value(run_id)
    expect(page.locator('[data-path="teacher"] select').nth(1)).to_have_value(str(step))

    # "Resume from here" opens the form with the run's own spec and the checkpoint, and a
    # total past the checkpoint (the newest, at the run's end: as much again); the server
    # accepts the spec as the form rebuilt it, and the run's progress starts at the step.
    page.go_back()
    page.get_by_role("tab", name="Checkpoints").click()
    rows.first.get_by_role("link", name="Resume from here").click()
    expect(page.locator("#kind-ppo")).to_be_checked()
    expect(field(page, "name")).to_have_value(f"{TINY_RUN['name']}-resumed")
    expect(field(page, "network.actor_hidden_sizes")).to_have_value("16")
    expect(field(page, "network.precision")).to_have_value("bfloat16")
    expect(field(page, "config.ppo.n_envs")).to_have_value("16")
    expect(page.locator('[data-path="resume_from"] select').first).to_have_value(run_id)
    expect(page.locator('[data-path="resume_from"] select').nth(1)).to_have_value(str(step))
    assert step == 20_000  # the newest checkpoint is listed first
    expect(field(page, "config.ppo.total_steps")).to_have_value("40000")
    page.get_by_role("button", name="Start run", exact=True).click()
    page.wait_for_url(re.compile(r"/runs/(?!new\b)[^/?]+$"), timeout=90_000)
    expect(page.get_by_role("heading", name=f"{TINY_RUN['name']}-resumed")).to_be_visible()
    progress = page.locator(".progress-label").first
    expect(progress).to_have_text(re.compile(r"^(2\d|3\d|40),\d{3} / 40,000$"))
    expect(page.locator(".run-header .badge")).to_have_text(re.compile("queued|running|succeeded"))

    # The runs list shows it finished, with its progress.
    page.get_by_role("link", name="Runs", exact=True).click()
    row = page.locator(f'tr[data-run-id="{run_id}"]')
    expect(row.locator(".badge")).to_have_text("succeeded")
    expect(row).to_contain_text("PointReach")
    screenshot(page, "runs-list")

    # Compare: the run's eval reward overlaid (one run here), its spec in the differences.
    row.get_by_role("checkbox").check()
    compare_button = page.get_by_role("button", name="Compare selected (1)")
    expect(compare_button).to_be_disabled()  # two runs or more
    page.goto(f"{server.url}/compare?ids={run_id}&metric=eval/episode_reward")
    expect(page.get_by_label("Metric")).to_have_value("eval/episode_reward")
    expect(page.locator(".compare canvas").first).to_be_visible()
    expect(page.locator(".compare .u-legend")).to_contain_text(TINY_RUN["name"])


def test_non_finite_values_are_marked_not_dropped(server, desktop):
    """The server sends NaN and the infinities as strings; the chart shows a gap with a red
    marker and names the step. The history of a real run is replaced by one with a NaN."""
    page, _console = desktop
    login(page, server)
    runs = page.evaluate("fetch('/api/runs').then(r => r.json())")["items"]
    if not runs:
        pytest.skip("needs a run from an earlier test")
    history = {
        "series": {
            "losses/total": {
                "step": [160, 320, 480, 640],
                "value": [1.0, "NaN", "Infinity", 0.5],
                "min": [0.5, "NaN", "Infinity", 0.5],
                "max": [1.5, "NaN", "Infinity", 0.5],
            }
        }
    }
    page.route(
        re.compile(r".*/api/runs/[^/]+/metrics\?.*"),
        lambda route: route.fulfill(json=history),
    )
    page.goto(f"{server.url}/runs/{runs[0]['id']}")
    card = page.locator('figure[data-metric="losses/total"]')
    notes = card.locator(".chart-notes .nonfinite")
    expect(notes).to_contain_text("2 non-finite: NaN at step 320, +Inf at step 480")
    expect(card.locator(".chart-notes")).to_contain_text("band shows each bucket's min and max")
    screenshot(page, "run-page-nan-marker")


def test_cancel_a_running_run(server, desktop):
    page, _console = desktop
    login(page, server)
    spec = {
        "kind": "ppo",
        "name": "e2e-cancel",
        "env": {"name": "PointReach"},
        "network": {"actor_hidden_sizes": [16], "critic_hidden_sizes": [16]},
        "config": {
            "ppo": {
                "n_envs": 16,
                "rollout_length": 10,
                "total_steps": 50_000_000,
                "n_minibatches": 4,
            },
            "eval": {"every_steps": 4000, "n_envs": 8, "max_episode_length": 50},
            "checkpoint_every_steps": 8000,
        },
    }
    run = page.evaluate(
        "spec => fetch('/api/runs', {method: 'POST', headers: {'Content-Type': 'application/json'},"
        " body: JSON.stringify(spec)}).then(r => r.json())",
        spec,
    )
    page.goto(f"{server.url}/runs/{run['id']}")
    expect(page.locator(".run-header .badge")).to_have_text("running", timeout=240_000)
    expect(page.locator('figure[data-metric="losses/total"]')).to_be_visible(timeout=240_000)
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator(".run-header .badge")).to_have_text("cancelled", timeout=120_000)
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)
    screenshot(page, "run-cancelled")


@pytest.mark.slow
def test_eval_videos_play_inline(server, desktop):
    """A CartpoleBalance run (MuJoCo Playground, rendered with EGL) records two eval videos;
    the step slider picks one and the browser decodes it."""
    page, _console = desktop
    login(page, server)
    # The spec of tests/server's end-to-end test: one compilation serves both (the cache).
    spec = {**cartpole_video_spec(), "name": "e2e-video"}
    run = page.evaluate(
        "spec => fetch('/api/runs', {method: 'POST', headers: {'Content-Type': 'application/json'},"
        " body: JSON.stringify(spec)}).then(r => r.json())",
        spec,
    )
    page.goto(f"{server.url}/runs/{run['id']}?tab=videos")
    expect(page.locator(".run-header .badge")).to_have_text("succeeded", timeout=540_000)
    slider = page.get_by_label("Training step")
    expect(slider).to_have_attribute("max", "1")
    expect(page.locator(".video-caption")).to_contain_text("Step 3,200")
    slider.focus()
    page.keyboard.press("ArrowLeft")
    expect(page.locator(".video-caption")).to_contain_text("Step 1,600")
    video = page.locator("video")
    expect(video).to_have_attribute("src", re.compile(r"/api/runs/.+/videos/"))
    page.wait_for_function("() => document.querySelector('video').readyState >= 2", timeout=30_000)
    assert video.evaluate("v => [v.videoWidth, v.videoHeight]") == [160, 120]
    screenshot(page, "run-page-video")


def test_phone_width_and_keyboard(server, phone):
    page, _console = phone
    login(page, server)
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the runs list is {overflow}px wider than a 375px screen"
    screenshot(page, "phone-runs-list")
    # Keyboard: the skip link, then the nav, reach the form without a mouse.
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="New run").first).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="New run")).to_be_visible()
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the form is {overflow}px wider than a 375px screen"
    screenshot(page, "phone-new-run")
    runs = page.evaluate("fetch('/api/runs').then(r => r.json())")
    if runs["items"]:
        page.goto(f"{server.url}/runs/{runs['items'][0]['id']}")
        expect(page.locator(".run-header .badge")).to_be_visible()
        page.get_by_role("tab", name="Charts").focus()
        page.keyboard.press("ArrowRight")
        expect(page.get_by_role("tab", name="Videos")).to_have_attribute("aria-selected", "true")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the run page is {overflow}px wider than a 375px screen"
        screenshot(page, "phone-run-page")
