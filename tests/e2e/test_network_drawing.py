"""The network drawing in a real Chromium against a real `nnx-ppo serve`: a graph run
submitted from the New Run form's JSON editor (with its live preview) is drawn on its run
page beside the config, one node per population and one label per delayed connection; a
graph the server refuses shows its 422 under the editor, and JSON that does not parse shows
where it breaks."""

from __future__ import annotations

import copy
import json
import re

import pytest

from tests.e2e.conftest import DIST_INDEX, field, screenshot
from tests.networks.test_graph_spec import DESCRIPTION

pytestmark = [
    pytest.mark.skipif(not DIST_INDEX.is_file(), reason="the dashboard is not built"),
]
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
expect = playwright.expect

ENV = "PointReachDict"  # observations {"state": 4, "target": 2}, 2 actions
# The graph plus a delay-2 edge into the value: 5 populations, 2 delayed edges.
GRAPH = copy.deepcopy(DESCRIPTION)
GRAPH["connections"].append({"src": "in_target", "dst": "critic", "delay": 2})
SMALL = {
    "config.ppo": {"n_envs": "16", "rollout_length": "10", "total_steps": "1600"},
    "config.eval": {"every_steps": "800", "n_envs": "8", "max_episode_length": "20"},
    "config": {"checkpoint_every_steps": "1600"},
}


def open_graph_form(page, server) -> None:
    """The New Run form on ENV with network kind graph, once any preset fill is done."""
    page.goto(server.login_url())
    page.get_by_role("link", name="New run").first.click()
    expect(page.get_by_role("heading", name="New run")).to_be_visible()
    option = page.locator(f'[data-path="env.name"] option[value="{ENV}"]')
    expect(option).to_have_count(1, timeout=60_000)
    field(page, "env.name").select_option(ENV)
    # The preset comes from the server's checker process, which may still be starting.
    expect(page.locator(".preset-note")).not_to_contain_text("Loading", timeout=120_000)
    field(page, "network.kind").select_option("graph")
    # A starting graph is drawn at once.
    expect(page.locator(".graph-preview svg .node").first).to_be_visible()
    for section, values in SMALL.items():
        for name, value in values.items():
            field(page, f"{section}.{name}").fill(value)


def type_graph(page, graph: dict | str) -> None:
    text = graph if isinstance(graph, str) else json.dumps(graph, indent=2)
    page.locator(".graph-editor").fill(text)


def test_a_graph_run_from_the_form_is_drawn_on_its_page(server, desktop):
    page, _ = desktop
    open_graph_form(page, server)
    type_graph(page, GRAPH)
    preview = page.locator(".graph-preview")
    expect(preview.locator(".node")).to_have_count(5)
    expect(preview.locator(".delay-label")).to_have_count(2)
    screenshot(page, "new-run-graph-editor")

    page.get_by_role("button", name="Start run", exact=True).click()
    expect(page).to_have_url(re.compile(r"/runs/(?!new\b)[^/?]+$"), timeout=90_000)
    page.get_by_role("tab", name="Config").click()
    drawing = page.locator(".config-network svg")
    expect(drawing).to_be_visible()
    expect(drawing.locator(".node")).to_have_count(5)
    expect(drawing.locator(".node-input")).to_have_count(2)
    expect(drawing.locator(".node-action")).to_have_count(1)
    expect(drawing.locator(".node-value")).to_have_count(1)
    labels = drawing.locator(".delay-label")
    expect(labels).to_have_count(2)
    assert sorted(labels.all_text_contents()) == ["d=1", "d=2"]
    # Beside the config (a 1280 px page): the drawing's column starts right of the table's.
    table_box = page.locator(".config-table").bounding_box()
    drawing_box = drawing.bounding_box()
    assert table_box and drawing_box and drawing_box["x"] > table_box["x"] + 200
    # Nodes do not overlap as drawn.
    boxes = [drawing.locator(".node circle").nth(i).bounding_box() for i in range(5)]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a and b
            apart_x = a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
            apart_y = a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"]
            assert apart_x or apart_y, (a, b)
    screenshot(page, "run-page-network")


def test_a_bad_graph_shows_the_422_under_its_editor(server, desktop):
    page, console = desktop
    console.allow_status(422)
    open_graph_form(page, server)
    type_graph(page, '{"populations": [')
    parse_error = page.locator(".graph-parse-error")
    expect(parse_error).to_be_visible()
    expect(parse_error).to_contain_text("invalid JSON")
    expect(page.locator(".graph-preview")).to_have_class(re.compile(r"\bstale\b"))
    # Submitting it is refused in the page, marked on the editor.
    page.get_by_role("button", name="Start run", exact=True).click()
    expect(page.locator(".graph-server-error")).to_contain_text("invalid JSON")
    assert page.url.endswith("/runs/new")

    bad = copy.deepcopy(GRAPH)
    bad["connections"][2]["delay"] = 0  # hidden -> hidden: a zero-delay cycle
    bad["connections"][3]["dst"] = "nope"
    type_graph(page, bad)
    expect(parse_error).to_be_hidden()
    # The preview draws what it can and names what it cannot.
    expect(page.locator(".graph-preview .network-problems")).to_contain_text("connections[3].dst")
    page.get_by_role("button", name="Start run", exact=True).click()
    error = page.locator(".graph-server-error")
    expect(error).to_contain_text("network.connections.3.dst", timeout=90_000)
    expect(error).to_contain_text("network.connections.2.delay")
    expect(page.locator(".graph-editor")).to_have_attribute("aria-invalid", "true")
    assert page.url.endswith("/runs/new"), "a refused spec must not leave the form"
    screenshot(page, "new-run-graph-422")
