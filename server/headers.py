"""Security headers on every HTTP answer: the dashboard's pages and assets, JSON, downloads
and refusals alike.

``Content-Security-Policy`` lets a page load scripts, styles, media and connections from
this server alone and never be framed (``frame-ancestors 'none'``, with
``X-Frame-Options: DENY`` for browsers that predate it), so that the dashboard's cancel and
delete buttons cannot be clickjacked; ``X-Content-Type-Options: nosniff`` keeps a browser
from reading a download or a JSON answer as a script or a page.

The API docs pages (``/api/docs``, ``/api/redoc``) start their viewer with an inline
script: their policy allows exactly the inline scripts that the page holds, by hash (taken
from the page as served, so it follows the docs' HTML wherever that comes from), and inline
styles and blob workers, which the docs viewers use. No other route allows inline scripts.
"""

from __future__ import annotations

import base64
import hashlib
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_COMMON = {
    "default-src": "'self'",
    "img-src": "'self' data: blob:",
    "media-src": "'self' blob:",
    "font-src": "'self' data:",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}
DASHBOARD_POLICY = {**_COMMON, "script-src": "'self'", "style-src": "'self'"}
DOCS_POLICY = {
    **_COMMON,
    "script-src": "'self'",
    "style-src": "'self' 'unsafe-inline'",
    "worker-src": "'self' blob:",
}
DOCS_PREFIXES = ("/api/docs", "/api/redoc")
HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
}
_INLINE_SCRIPT = re.compile(rb"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", re.S | re.I)
_SCRIPT_ORIGIN = re.compile(rb"<script[^>]*\bsrc=[\"'](https://[A-Za-z0-9.-]+)/", re.I)
_LINK_ORIGIN = re.compile(rb"<link[^>]*\bhref=[\"'](https://[A-Za-z0-9.-]+)/", re.I)
MAX_DOCS_PAGE = 1 << 20
"""A docs page larger than this is not hashed (its inline scripts stay blocked)."""


def policy(directives: dict[str, str]) -> str:
    return "; ".join(f"{name} {value}" for name, value in directives.items())


def docs_policy(page: bytes) -> str:
    """``DOCS_POLICY`` with the hash of each inline script of ``page`` in ``script-src``,
    and the origins of the scripts and styles it links to (FastAPI's default docs name a
    CDN; docs served from this server name none)."""
    hashes = [
        "'sha256-" + base64.b64encode(hashlib.sha256(body).digest()).decode("ascii") + "'"
        for body in _INLINE_SCRIPT.findall(page)
    ]
    scripts = sorted({o.decode("ascii") for o in _SCRIPT_ORIGIN.findall(page)})
    links = sorted({o.decode("ascii") for o in _LINK_ORIGIN.findall(page)})
    return policy(
        {
            **DOCS_POLICY,
            "script-src": " ".join([DOCS_POLICY["script-src"], *scripts, *hashes]),
            "style-src": " ".join([DOCS_POLICY["style-src"], *links]),
            "img-src": " ".join([DOCS_POLICY["img-src"], *links]),
        }
    )


class SecurityHeaders:
    """Adds ``HEADERS`` and a CSP to every HTTP response (a header the app set stays)."""

    def __init__(self, app: ASGIApp):
        self.app = app
        self.dashboard_policy = policy(DASHBOARD_POLICY)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("path", "").startswith(DOCS_PREFIXES):
            await self._docs(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = _with_headers(message, self.dashboard_policy)
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _docs(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Holds a docs page back until its body is complete, to hash its scripts."""
        start: Message | None = None
        body: list[bytes] = []

        async def send_after_hashing(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.append(message.get("body", b""))
            page = b"".join(body)
            if message.get("more_body", False) and len(page) <= MAX_DOCS_PAGE:
                return
            await send(_with_headers(start, docs_policy(page)))
            start = None
            await send({**message, "body": page})

        await self.app(scope, receive, send_after_hashing)


def _with_headers(start: Message, csp: str) -> Message:
    headers = list(start.get("headers", []))
    present = {key.lower() for key, _ in headers}
    wanted = {**HEADERS, "content-security-policy": csp}
    headers += [(k.encode(), v.encode()) for k, v in wanted.items() if k.encode() not in present]
    return {**start, "headers": headers}
