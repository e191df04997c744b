"""A plugin through the dashboard, in a real Chromium against a real `nnx-ppo serve` that sees
the example package (env `TwoLinkArm`, network `plugin:tiny`): the New Run form offers the
plugin network, takes its arguments as a JSON object (refusing anything else in place), and
the run it starts trains; resuming that run opens the form with the plugin network and its
arguments (it used to turn into an `mlp`), and the server takes it."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import DIST_INDEX, Server, field, screenshot, serving

pytestmark = [
    pytest.mark.skipif(not DIST_INDEX.is_file(), reason="the dashboard is not built"),
]
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
expect = playwright.expect

SMALL = {
    "config.ppo": {
        "n_envs": "8",
        "rollout_length": "8",
        "total_steps": "128",
        "n_minibatches": "2",
    },
    "config.eval": {"every_steps": "128", "n_envs": "2", "max_episode_length": "16"},
    "config": {"checkpoint_every_steps": "64"},
}
KWARGS = '{"hidden": 8, "value_sizes": [8]}'


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, example_plugin: dict[str, str]
) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("e2e-plugin"), example_plugin) as started:
        yield started


def test_a_plugin_network_trains_from_the_form_and_resumes_as_itself(server, desktop):
    page, console = desktop
    console.allow_status(422)
    console.allow_status(404)  # GET /api/envs/TwoLinkArm/preset: a plugin env has none
    page.goto(server.login_url())
    page.goto(server.url + "/runs/new")
    option = page.locator('[data-path="env.name"] option[value="TwoLinkArm"]')
    expect(option).to_have_count(1, timeout=60_000)
    field(page, "env.name").select_option("TwoLinkArm")
    expect(page.locator(".preset-note")).to_contain_text("has no preset", timeout=60_000)
    kinds = page.locator('[data-path="network.kind"] option[value="plugin:tiny"]')
    expect(kinds).to_have_count(1, timeout=30_000)
    field(page, "network.kind").select_option("plugin:tiny")
    arguments = field(page, "network.kwargs")
    expect(arguments).to_be_visible()
    for section, values in SMALL.items():
        for name, value in values.items():
            field(page, f"{section}.{name}").fill(value)
    field(page, "name").fill("plugin-from-the-form")

    arguments.fill("[8]")  # not an object: refused where it was typed, nothing sent
    page.get_by_role("button", name="Start run", exact=True).click()
    error = page.locator('[data-path="network.kwargs"] .field-error')
    expect(error).to_contain_text("JSON object")
    arguments.fill('{"hidden": "eight"}')  # an object the factory refuses: the server's 422
    page.get_by_role("button", name="Start run", exact=True).click()
    expect(page.locator(".field-error:visible").first).to_contain_text("hidden", timeout=60_000)
    arguments.fill(KWARGS)
    page.get_by_role("button", name="Start run", exact=True).click()
    page.wait_for_url(re.compile(r"/runs/(?!new\b)[^/?]+$"), timeout=90_000)
    run_id = page.url.rsplit("/", 1)[1]
    expect(page.locator(".run-header .badge")).to_have_text("succeeded", timeout=300_000)

    # Resuming it: the form holds the plugin network and its arguments, and the server takes
    # the spec (an mlp would not fit the checkpoint).
    page.goto(f"{server.url}/runs/new?resume={run_id}")
    expect(field(page, "network.kind")).to_have_value("plugin:tiny", timeout=60_000)
    expect(field(page, "network.kwargs")).to_have_value('{"hidden":8,"value_sizes":[8]}')
    screenshot(page, "new-run-form-plugin")
    field(page, "config.ppo.total_steps").fill("192")
    page.get_by_role("button", name="Start run", exact=True).click()
    page.wait_for_url(re.compile(r"/runs/(?!new\b)[^/?]+$"), timeout=90_000)
    assert page.url.rsplit("/", 1)[1] != run_id
