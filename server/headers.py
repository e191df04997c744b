"""Security headers on every HTTP answer: the dashboard's pages and assets, JSON, downloads
and refusals alike.

``Content-Security-Policy`` lets a page load scripts, styles, media and connections from
this server alone and never be framed (``frame-ancestors 'none'``, with
``X-Frame-Options: DENY`` for browsers that predate it), so that the dashboard's cancel and
delete buttons cannot be clickjacked; ``X-Content-Type-Options: nosniff`` keeps a browser
from reading a download or a JSON answer as a script or a page.

The API docs pages (``/api/docs``, ``/api/redoc``, served with their assets from here by
``server.api_docs``) load scripts from this server alone too; their policy adds inline styles
and blob workers, which ReDoc uses. No route allows inline scripts.
"""

from __future__ import annotations

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


def policy(directives: dict[str, str]) -> str:
    return "; ".join(f"{name} {value}" for name, value in directives.items())


ERROR_HEADERS = {**HEADERS, "content-security-policy": policy(DASHBOARD_POLICY)}
"""The headers of an answer made outside the middleware (Starlette's 500)."""


class SecurityHeaders:
    """Adds ``HEADERS`` and a CSP to every HTTP response (a header the app set stays)."""

    def __init__(self, app: ASGIApp):
        self.app = app
        self.dashboard_policy = policy(DASHBOARD_POLICY)
        self.docs_policy = policy(DOCS_POLICY)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        csp = self.docs_policy if path.startswith(DOCS_PREFIXES) else self.dashboard_policy

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = _with_headers(message, csp)
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _with_headers(start: Message, csp: str) -> Message:
    headers = list(start.get("headers", []))
    present = {key.lower() for key, _ in headers}
    wanted = {**HEADERS, "content-security-policy": csp}
    headers += [(k.encode(), v.encode()) for k, v in wanted.items() if k.encode() not in present]
    return {**start, "headers": headers}
