"""Access control, as one ASGI middleware in front of every route (HTTP and websocket).

In order: the ``Host`` header must name this server (loopback or ``allowed_hosts``; else
400), an ``Origin`` header must be this server's own origin (else 403: no DNS rebinding,
no cross-site requests, websockets included), ``/api`` needs the token (else 401) except
``GET /api/health`` and a run process's report routes (``/api/runs/{id}/report/...``,
which check its run token themselves: ``server.api.report``), and request bodies are capped
(else 413; artifact uploads at ``max_upload_bytes``).
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Iterable
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.settings import LOOPBACK_HOSTS

COOKIE = "nnx_ppo_token"
PUBLIC_PATHS = frozenset({"/api/health"})
REPORT_PATH = re.compile(r"/api/runs/[0-9a-f]{12}/report/[A-Za-z0-9_./-]+")
"""The routes a run token opens (and no other); the admin token does not open them."""
UPLOAD_PATH = re.compile(
    r"/api/runs/[0-9a-f]{12}/report/(checkpoints/[0-9]+|videos/[A-Za-z0-9_.]+|log)"
)


def host_name(host_header: str) -> str:
    """``host[:port]`` -> host, lower-case; IPv6 literals keep their brackets."""
    host = host_header.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end != -1 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        out.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return out


def request_token(scope: Scope, headers: dict[str, str]) -> str | None:
    """The token a request carries: bearer header; on GET and websockets also ``?token=``;
    the browser's cookie."""
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    if scope["type"] == "websocket" or scope.get("method") in ("GET", "HEAD"):
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if query.get("token"):
            return str(query["token"][0])
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:
        return None
    return cookie[COOKIE].value if COOKIE in cookie else None


def token_matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


class AccessMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        allowed_hosts: Iterable[str],
        max_body_bytes: int,
        max_upload_bytes: int | None = None,
    ):
        self.app = app
        self.token = token
        self.allowed = {h.lower() for h in (*LOOPBACK_HOSTS, *allowed_hosts)}
        self.max_body_bytes = max_body_bytes
        self.max_upload_bytes = max_upload_bytes or max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        host = headers.get("host", "")
        if host_name(host) not in self.allowed:
            await _refuse(scope, receive, send, 400, f"Host {host!r} is not allowed")
            return
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in (
            f"http://{host}".lower(),
            f"https://{host}".lower(),
        ):
            await _refuse(scope, receive, send, 403, f"Origin {origin!r} is not allowed")
            return
        path = scope.get("path", "")
        authenticated = token_matches(request_token(scope, headers), self.token)
        reporting = REPORT_PATH.fullmatch(path) is not None
        if (
            path.startswith("/api")
            and path not in PUBLIC_PATHS
            and not reporting
            and not authenticated
        ):
            await _refuse(scope, receive, send, 401, "missing or wrong token")
            return
        scope.setdefault("state", {})["authenticated"] = authenticated and not reporting
        if scope["type"] == "http":
            upload = UPLOAD_PATH.fullmatch(path) is not None
            limit = self.max_upload_bytes if upload else self.max_body_bytes
            length = headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > limit):
                await _refuse(scope, receive, send, 413, "request body too large")
                return
            if upload:  # streamed to disk by its route, which counts what it reads
                receive = self._capped(receive, limit)
            elif length is None and "transfer-encoding" in headers:
                # A chunked body is read here, so that one past the cap is a 413 (raised
                # inside the app, FastAPI's body parsing would turn it into a 400).
                body = await _read_capped(receive, self.max_body_bytes)
                if body is None:
                    await _refuse(scope, receive, send, 413, "request body too large")
                    return
                receive = _replay(body, receive)
            else:
                receive = self._capped(receive, self.max_body_bytes)
        await self.app(scope, receive, send)

    @staticmethod
    def _capped(receive: Receive, limit: int) -> Receive:
        seen = 0

        async def capped_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge()
            return message

        return capped_receive


async def _read_capped(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None once it passes ``limit`` bytes."""
    chunks, seen = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields ``body`` once, then waits on the client as before."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class BodyTooLarge(Exception):
    """A chunked request body passed ``max_body_bytes``."""


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    prefix = "http"
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        if "websocket.http.response" not in scope.get("extensions", {}):
            await send({"type": "websocket.close", "code": 1008, "reason": detail[:120]})
            return
        prefix = "websocket.http"
    await send({"type": f"{prefix}.response.start", "status": status, "headers": headers})
    await send({"type": f"{prefix}.response.body", "body": body})
