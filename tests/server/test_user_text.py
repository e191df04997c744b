"""``server.user_text`` and ``server.headers``: the pure parts, with the expected values
worked out by hand."""

from __future__ import annotations

import pytest

from nnx_ppo.client.terminal import printable as client_printable
from server.headers import DASHBOARD_POLICY, DOCS_POLICY, policy
from server.user_text import MAX_JSON_DEPTH, bounded_json, json_depth, note_text, plain_text
from server.user_text import printable as server_printable


def test_json_depth_counts_objects_and_arrays() -> None:
    assert json_depth(3) == 0 and json_depth("[[") == 0  # a string is a scalar
    assert json_depth([]) == 1 and json_depth({}) == 1
    # {"a": [1, {"b": [[]]}]}: object 1, list 2, object 3, list 4, list 5.
    assert json_depth({"a": [1, {"b": [[]]}]}) == 5
    # The deepest branch counts, not the first: [[0], [[[0]]]] is 4 deep.
    assert json_depth([[0], [[[0]]]]) == 4


def test_json_depth_stops_counting_past_its_limit_without_recursion() -> None:
    value: object = 0
    for _ in range(100_000):  # far past the recursion limit
        value = [value]
    assert json_depth(value, limit=10) == 11
    with pytest.raises(ValueError, match=f"deeper than {MAX_JSON_DEPTH}"):
        bounded_json(value)
    just = 0
    for _ in range(MAX_JSON_DEPTH):
        just = [just]  # type: ignore[assignment]
    assert bounded_json(just) is just


@pytest.mark.parametrize(
    "text", ["\x00", "\x1b[31m", "\x7f", "\x9b", "\n", "\t", "\u202e", "\u2066", "\u200f"]
)
def test_names_refuse_controls_and_bidi_characters(text: str) -> None:
    with pytest.raises(ValueError, match=f"U\\+{ord(text[0]):04X} at index 3"):
        plain_text("abc" + text)


def test_names_keep_other_unicode() -> None:
    assert plain_text("Ünïcödé 名前 שלום 🚀") == "Ünïcödé 名前 שלום 🚀"


def test_notes_keep_newlines_and_tabs() -> None:
    assert note_text("a\r\n\tb\n") == "a\n\tb\n"
    for bad in ("\r", "\x1b", "\u202e", "\x00"):
        with pytest.raises(ValueError):
            note_text("a" + bad)


@pytest.mark.parametrize("printable", [server_printable, client_printable])
def test_printable_shows_escapes(printable) -> None:  # type: ignore[no-untyped-def]
    assert printable("\x1b[2Jred\x07") == "\\x1b[2Jred\\x07"
    assert printable("invoice\u202efdp.exe") == "invoice\\u202efdp.exe"
    assert printable("plain [bold] text") == "plain [bold] text"
    assert printable("a\nb") == "a\\nb"


def test_only_the_docs_pages_allow_inline_styles_and_no_page_inline_scripts() -> None:
    dashboard = dict(d.strip().split(" ", 1) for d in policy(DASHBOARD_POLICY).split(";"))
    docs = dict(d.strip().split(" ", 1) for d in policy(DOCS_POLICY).split(";"))
    assert dashboard["script-src"] == docs["script-src"] == "'self'"
    assert dashboard["style-src"] == "'self'" and docs["style-src"] == "'self' 'unsafe-inline'"
    assert dashboard["frame-ancestors"] == docs["frame-ancestors"] == "'none'"


def test_an_unexpected_error_is_a_500_with_the_security_headers() -> None:
    # Starlette sends a 500 from outside every middleware, so SecurityHeaders never sees it.
    import asyncio

    import httpx
    from fastapi import FastAPI

    from server.app import _add_error_handlers
    from server.headers import SecurityHeaders

    app = FastAPI()
    _add_error_handlers(app)
    app.add_middleware(SecurityHeaders)

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("a bug")

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.get("/boom")

    response = asyncio.run(get())
    assert response.status_code == 500
    assert response.json() == {"detail": "internal error: RuntimeError"}
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
