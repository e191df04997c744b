"""Access from outside, on every endpoint of the OpenAPI document (plus the websocket):
no token, a wrong token (header, query, cookie, a prefix of the right one, the right one on
a non-GET query) is 401; a DNS-rebinding Host is 400 and a foreign Origin 403 on every
method, DELETE included, even with the right token. Extends ``tests/server/api/test_access.py``
(which checks a fixed list) to whatever the app serves."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from server.app import create_app
from server.settings import Settings
from tests.reliability.helpers import ReliableService
from tests.service_harness import TOKEN

pytestmark = pytest.mark.category("access")

RUN = "0123456789ab"


def _endpoints() -> list[tuple[str, str]]:
    """Every (method, path) the app documents, path parameters filled in; plus the docs."""
    schema = create_app(Settings(api_token="collect-only-token"), with_worker=False).openapi()
    out = [("GET", "/api/openapi.json"), ("GET", "/api/docs"), ("GET", "/api/no-such-thing")]
    for path, operations in schema["paths"].items():
        concrete = re.sub(r"\{run_id\}", RUN, path)
        concrete = re.sub(r"\{(step|video_id)\}", "1", concrete)
        out += [(method.upper(), concrete) for method in operations]
    return out


ENDPOINTS = _endpoints()
PUBLIC = {("GET", "/api/health")}
WRONG = [
    {"Authorization": "Bearer wrong-token-0123456789"},
    {"Authorization": f"Bearer {TOKEN[:-1]}"},  # a prefix of the right one
    {"Authorization": f"Bearer {TOKEN}x"},
    {"Authorization": f"Basic {TOKEN}"},
    {"Authorization": TOKEN},
    {"Cookie": "nnx_ppo_token=wrong-token-0123456789"},
    {"Cookie": f"other={TOKEN}"},
]
REBOUND_HOSTS = ["evil.example", "evil.example:8000", "127.0.0.1.evil.example", "localhost.evil"]
FOREIGN_ORIGINS = ["http://evil.example", "null", "http://127.0.0.1.evil.example", "file://"]


def test_every_documented_operation_is_covered() -> None:
    assert len(ENDPOINTS) >= 18  # 15 operations today, plus the docs and an unknown path


def _body(method: str) -> dict | None:
    return {} if method in ("POST", "PATCH", "PUT") else None


@pytest.mark.parametrize(("method", "path"), ENDPOINTS, ids=[f"{m} {p}" for m, p in ENDPOINTS])
def test_missing_or_wrong_token_is_401(api: ReliableService, method: str, path: str) -> None:
    url = api.url + path
    attempts = [{}, *WRONG]
    for headers in attempts:
        response = httpx.request(method, url, headers=headers, json=_body(method))
        if (method, path) in PUBLIC:
            assert response.status_code == 200 and response.json().keys() == {"status", "version"}
            continue
        assert response.status_code == 401, (headers, response.status_code)
        assert response.json() == {"detail": "missing or wrong token"}
        assert response.headers["www-authenticate"] == "Bearer"
    wrong_query = httpx.request(method, f"{url}?token=wrong-token-0123456789", json=_body(method))
    right_query = httpx.request(method, f"{url}?token={TOKEN}", json=_body(method))
    if (method, path) not in PUBLIC:
        assert wrong_query.status_code == 401
        # The query token is for GETs (links, media) only.
        assert (right_query.status_code == 401) == (method != "GET"), right_query.status_code
    right = api.client.request(method, path, json=_body(method))
    assert right.status_code != 401


@pytest.mark.parametrize(("method", "path"), ENDPOINTS, ids=[f"{m} {p}" for m, p in ENDPOINTS])
def test_dns_rebinding_and_foreign_origins_are_refused(
    api: ReliableService, method: str, path: str
) -> None:
    for host in REBOUND_HOSTS:
        response = api.client.request(method, path, headers={"Host": host}, json=_body(method))
        assert response.status_code == 400, (host, response.status_code)
        assert "detail" in response.json()
    for origin in FOREIGN_ORIGINS:
        response = api.client.request(method, path, headers={"Origin": origin}, json=_body(method))
        assert response.status_code == 403, (origin, response.status_code)
        assert "detail" in response.json()
    same = api.client.request(method, path, headers={"Origin": api.url}, json=_body(method))
    assert same.status_code not in (400, 401, 403), same.text


def _ws(api: ReliableService, run_id: str, query: str = "", **kwargs):  # type: ignore[no-untyped-def]
    return connect(
        f"ws://127.0.0.1:{api.port}/api/runs/{run_id}/stream{query}", open_timeout=10, **kwargs
    )


@pytest.mark.parametrize(
    ("query", "kwargs", "status"),
    [
        ("", {}, 401),
        ("?token=wrong-token-0123456789", {}, 401),
        ("", {"additional_headers": {"Authorization": "Bearer wrong-token-0123456789"}}, 401),
        ("", {"additional_headers": {"Cookie": "nnx_ppo_token=wrong-token-0123456789"}}, 401),
        (f"?token={TOKEN}", {"origin": "http://evil.example"}, 403),
        (f"?token={TOKEN}", {"origin": "null"}, 403),
        (f"?token={TOKEN}", {"additional_headers": {"Host": "evil.example"}}, 400),
    ],
    ids=["none", "wrong-query", "wrong-bearer", "wrong-cookie", "origin", "null-origin", "host"],
)
def test_websocket_refuses(api: ReliableService, query: str, kwargs: dict, status: int) -> None:
    run_id = api.submit(_spec())["id"]
    with pytest.raises(InvalidStatus) as refused:
        _ws(api, run_id, query, **kwargs)
    assert refused.value.response.status_code == status
    # The right token on the same run is accepted and replays its events.
    with _ws(api, run_id, f"?token={TOKEN}") as ws:
        assert json.loads(ws.recv(timeout=10))["seq"] == 1


def _spec() -> dict:
    from tests.service_harness import tiny_ppo_spec

    return tiny_ppo_spec()
