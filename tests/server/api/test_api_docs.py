"""``/api/docs`` and ``/api/redoc`` work offline: every script, stylesheet and icon they
reference is served by the service itself (Swagger UI's came from a CDN: a blank page
offline), and neither page has an inline script (a ``script-src 'self'`` policy allows it)."""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.service_harness import Service


class _References(HTMLParser):
    """The URLs a page loads (``src``, ``href``, ``data-openapi-url``, ``spec-url``) and the
    number of inline scripts and styles."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.inline: list[str] = []
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for name in ("src", "href", "data-openapi-url", "spec-url"):
            if values.get(name):
                self.urls.append(str(values[name]))
        if "style" in values or any(name.startswith("on") for name in values):
            self.inline.append(f"<{tag}> attribute")
        self._open = tag if tag in ("script", "style") and "src" not in values else None

    def handle_data(self, data: str) -> None:
        if self._open is not None and data.strip():
            self.inline.append(f"<{self._open}> {data.strip()[:40]}")

    def handle_endtag(self, tag: str) -> None:
        self._open = None


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = Service(tmp_path_factory.mktemp("docs") / "data", worker=False).start()
    yield svc
    svc.close()


@pytest.mark.parametrize(("page", "bundle"), [("docs", "swagger-ui"), ("redoc", "redoc")])
def test_the_docs_pages_load_only_local_assets(api: Service, page: str, bundle: str) -> None:
    response = api.client.get(f"/api/{page}")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    refs = _References()
    refs.feed(response.text)
    assert refs.inline == [], refs.inline
    assert "/api/openapi.json" in refs.urls
    scripts = [url for url in refs.urls if url.endswith(".js")]
    assert any(bundle in url for url in scripts), refs.urls
    for url in refs.urls:
        assert url.startswith("/") and not url.startswith("//"), url  # this origin only
        # Without the token: a page opened with ?token= loads them without the cookie
        # (all but the OpenAPI document, which is behind the token like the whole API).
        asset = api.client.get(url, headers={"Authorization": ""})
        if url == "/api/openapi.json":
            assert asset.status_code == 401
            asset = api.client.get(url)
        assert asset.status_code == 200 and len(asset.content) > 0, url
        kind = asset.headers["content-type"]
        if url.endswith(".js"):
            assert kind.startswith("text/javascript"), (url, kind)
        if url.endswith(".css"):
            assert kind.startswith("text/css"), (url, kind)
    assert api.client.get("/docs-assets/nope.js").status_code == 404


def test_the_swagger_ui_bundle_is_the_packaged_one(api: Service) -> None:
    import fastapi_offline

    packaged = Path(fastapi_offline.__file__).parent / "static" / "swagger-ui-bundle.js"
    assert api.client.get("/docs-assets/swagger-ui-bundle.js").content == packaged.read_bytes()
