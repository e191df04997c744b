"""Access control from outside: token, Host and Origin checks on every kind of request."""

from __future__ import annotations

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.service_harness import TOKEN, Service

ENDPOINTS = [
    ("GET", "/api/envs"),
    ("GET", "/api/envs/PointReach/preset"),
    ("GET", "/api/runs"),
    ("POST", "/api/runs"),
    ("GET", "/api/runs/0123456789ab"),
    ("PATCH", "/api/runs/0123456789ab"),
    ("POST", "/api/runs/0123456789ab/cancel"),
    ("DELETE", "/api/runs/0123456789ab"),
    ("GET", "/api/runs/0123456789ab/metrics"),
    ("GET", "/api/runs/0123456789ab/metrics.csv"),
    ("GET", "/api/runs/0123456789ab/videos"),
    ("GET", "/api/runs/0123456789ab/videos/1"),
    ("GET", "/api/runs/0123456789ab/checkpoints"),
    ("GET", "/api/runs/0123456789ab/checkpoints/0"),
    ("GET", "/api/runs/0123456789ab/logs"),
    ("GET", "/api/openapi.json"),
]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_every_endpoint_needs_the_token(service: Service, method: str, path: str) -> None:
    bare = httpx.request(method, service.url + path, json={} if method != "GET" else None)
    assert bare.status_code == 401
    assert bare.json()["detail"] == "missing or wrong token"
    wrong = httpx.request(method, service.url + path, headers={"Authorization": "Bearer nope-nope"})
    assert wrong.status_code == 401
    right = service.client.request(method, path, json={} if method in ("POST", "PATCH") else None)
    assert right.status_code != 401


def test_health_without_token_says_only_status_and_version(service: Service) -> None:
    assert httpx.get(service.url + "/api/health").json().keys() == {"status", "version"}
    full = service.client.get("/api/health").json()
    assert full["workers"] and full["workers"][0]["slots"] == ["cpu:0"]


def test_query_token_works_for_get_only(service: Service) -> None:
    assert httpx.get(f"{service.url}/api/runs?token={TOKEN}").status_code == 200
    assert httpx.post(f"{service.url}/api/runs?token={TOKEN}", json={}).status_code == 401


def test_cookie_from_the_printed_url(service: Service) -> None:
    with httpx.Client(base_url=service.url) as browser:
        landing = browser.get(f"/?token={TOKEN}")
        assert landing.status_code == 303 and landing.headers["location"] == "/"
        cookie = landing.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert browser.get("/api/runs").status_code == 200  # the cookie authenticates
    assert httpx.get(f"{service.url}/?token=wrong-token").status_code == 401


@pytest.mark.parametrize("method", ["GET", "POST", "PATCH", "DELETE"])
def test_dns_rebinding_and_foreign_origins_are_refused(service: Service, method: str) -> None:
    path = "/api/runs"
    rebound = service.client.request(method, path, headers={"Host": "evil.example:8000"})
    assert rebound.status_code == 400
    foreign = service.client.request(method, path, headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403
    same = service.client.request(method, path, headers={"Origin": service.url})
    assert same.status_code not in (400, 403)


def test_websocket_refuses_foreign_origin_and_missing_token(service: Service) -> None:
    url = f"ws://127.0.0.1:{service.port}/api/runs/0123456789ab/stream"
    with pytest.raises(InvalidStatus) as no_token:
        connect(url, open_timeout=10)
    assert no_token.value.response.status_code == 401
    with pytest.raises(InvalidStatus) as foreign:
        connect(
            url,
            origin="http://evil.example",
            additional_headers={"Authorization": f"Bearer {TOKEN}"},
            open_timeout=10,
        )
    assert foreign.value.response.status_code == 403
