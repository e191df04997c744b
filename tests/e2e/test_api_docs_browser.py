"""``/api/docs`` (Swagger UI) and ``/api/redoc`` render in Chromium with nothing reachable
but the service (offline: every other request is refused), as the browser tests' CI is."""

from __future__ import annotations

from urllib.parse import urlsplit


def _offline(page: object, server_url: str) -> list[str]:
    """Refuses every request to another origin; the list of those refused."""
    refused: list[str] = []
    origin = urlsplit(server_url).netloc

    def handle(route: object) -> None:
        url = route.request.url
        if urlsplit(url).netloc == origin or url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            refused.append(url)
            route.abort()

    page.route("**/*", handle)
    return refused


def test_swagger_ui_and_redoc_render_offline(server, desktop):
    page, _watch = desktop
    refused = _offline(page, server.url)
    page.goto(server.login_url())  # the cookie: the pages fetch /api/openapi.json with it
    page.goto(f"{server.url}/api/docs")
    page.locator(".opblock").first.wait_for()  # an operation of the API, drawn from the spec
    assert page.locator(".opblock").count() > 20
    assert page.locator(".info .title").inner_text().startswith("nnx-ppo")
    page.goto(f"{server.url}/api/redoc")
    page.locator(".redoc-wrap").wait_for()
    page.get_by_text("/api/runs/{run_id}/metrics", exact=False).first.wait_for(state="attached")
    assert refused == []
