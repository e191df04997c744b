"""Bad input from outside: path traversal on every path parameter (with the encodings that
broke other artifact servers) and symlinks planted inside a run directory, oversized and
malformed bodies, websocket floods and clients that never read."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import socket
import tarfile
import threading
import time
import uuid
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed, InvalidMessage, InvalidStatus
from websockets.sync.client import connect

from tests.reliability.helpers import ReliableService
from tests.service_harness import TOKEN, tiny_ppo_spec

pytestmark = pytest.mark.category("bad_input")

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def secret(api: ReliableService) -> str:
    """A file outside every run directory, next to the database, that must never be served."""
    value = f"TOP-SECRET-{uuid.uuid4().hex}"
    (api.data_dir / "secret.txt").write_text(value)
    (api.data_dir / "runs" / "secret.txt").write_text(value)
    return value


@pytest.fixture(scope="module")
def run_id(api: ReliableService) -> str:
    return api.submit(tiny_ppo_spec())["id"]


def raw(api: ReliableService, method: str, path: str) -> tuple[int, bytes, dict[str, str]]:
    """A request whose path goes out byte for byte (httpx would normalise ``..``)."""
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        conn.putheader("Authorization", f"Bearer {TOKEN}")
        conn.putheader("Content-Length", "0")
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read(), {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()


TRAVERSALS = [
    "../../../../etc/passwd",
    "..%2f..%2f..%2f..%2fetc%2fpasswd",
    "%2e%2e%2f%2e%2e%2f%2e%2e%2fsecret.txt",
    "%252e%252e%252f%252e%252e%252fsecret.txt",
    "..\\..\\..\\secret.txt",
    "..%5c..%5c..%5csecret.txt",
    "%2fetc%2fpasswd",
    "/etc/passwd",
    "..;/..;/secret.txt",
    "{run};x=../../secret.txt",
    "{run}%00",
    "....//....//secret.txt",
    "%c0%ae%c0%ae%2fsecret.txt",
]
TEMPLATES = [
    ("GET", "/api/runs/{p}"),
    ("PATCH", "/api/runs/{p}"),
    ("DELETE", "/api/runs/{p}"),
    ("POST", "/api/runs/{p}/cancel"),
    ("GET", "/api/runs/{p}/metrics"),
    ("GET", "/api/runs/{p}/metrics.csv"),
    ("GET", "/api/runs/{p}/logs"),
    ("GET", "/api/runs/{p}/videos"),
    ("GET", "/api/runs/{run}/videos/{p}"),
    ("GET", "/api/runs/{p}/checkpoints"),
    ("GET", "/api/runs/{run}/checkpoints/{p}"),
    ("GET", "/{p}"),  # the dashboard's static files
    ("GET", "/assets/{p}"),
]


@pytest.mark.parametrize("payload", TRAVERSALS)
def test_path_traversal_on_every_path_parameter(
    api: ReliableService, secret: str, run_id: str, payload: str
) -> None:
    for method, template in TEMPLATES:
        path = template.replace("{p}", payload).replace("{run}", run_id)
        status, body, _ = raw(api, method, path)
        where = f"{method} {path}: {status}"
        assert status < 500, where
        assert secret.encode() not in body and b"root:" not in body, where
        if path.startswith("/api"):
            assert status in (400, 404, 405, 422), where
            assert "detail" in json.loads(body), where
    ws_path = f"/api/runs/{payload.replace('{run}', run_id)}/stream"
    try:
        with connect(f"ws://127.0.0.1:{api.port}{ws_path}", additional_headers=AUTH) as ws:
            received = []
            with contextlib.suppress(ConnectionClosed, TimeoutError):
                received.append(ws.recv(timeout=5))
            # Closed without a single event (4404: no such run; 1000: no such route).
            assert received == [] and ws.close_code in (1000, 1008, 4404), (ws_path, received)
    except InvalidStatus as refused:  # refused before the handshake
        assert refused.response.status_code in (400, 403, 404), ws_path
    except InvalidMessage:  # the server closed the TCP connection on a path it cannot parse
        pass
    assert (api.data_dir / "secret.txt").read_text() == secret  # nothing deleted
    assert api.run(run_id)["status"] in ("queued", "cancelled")


def _outside(tmp_path: Path, secret: str) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text(secret)
    (outside / "step_0000000009").mkdir()
    (outside / "step_0000000009" / "metadata.pkl").write_text(secret)
    return outside


def test_symlinked_checkpoints_are_neither_listed_nor_served(
    api: ReliableService, secret: str, tmp_path: Path
) -> None:
    run = api.submit(tiny_ppo_spec())["id"]
    outside = _outside(tmp_path, secret)
    checkpoints = api.checkpoints_dir(run)
    checkpoints.mkdir(parents=True)
    (checkpoints / "step_0000000001").symlink_to("/etc")
    (checkpoints / "step_0000000009").symlink_to(outside / "step_0000000009")
    real = checkpoints / "step_0000000002"
    (real / "networks").mkdir(parents=True)
    (real / "networks" / "data").write_bytes(b"\0" * 64)
    (real / "metadata.pkl").symlink_to(outside / "canary.txt")
    (real / "passwd").symlink_to("/etc/passwd")
    (real / "networks" / "up").symlink_to(outside)

    listed = api.client.get(f"/api/runs/{run}/checkpoints").json()
    assert [c["step"] for c in listed["items"]] == [2]
    for step in (1, 9):
        assert api.client.get(f"/api/runs/{run}/checkpoints/{step}").status_code == 404
    archive = api.client.get(f"/api/runs/{run}/checkpoints/2")
    assert archive.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(archive.content)) as tar:
        members = tar.getmembers()
        assert {m.name for m in members} == {
            "step_0000000002",
            "step_0000000002/networks",
            "step_0000000002/networks/data",
        }
        assert all(m.isdir() or m.isreg() for m in members)
    assert secret.encode() not in archive.content


def test_symlinked_videos_and_logs_are_not_served(
    api: ReliableService, secret: str, tmp_path: Path
) -> None:
    from server.store.db import make_engine, make_sessionmaker
    from server.store.run_store import RunStore

    run = api.submit(tiny_ppo_spec())["id"]
    outside = _outside(tmp_path, secret)
    videos = api.run_dir(run) / "videos"
    videos.mkdir(parents=True)
    (videos / "linked.mp4").symlink_to(outside / "canary.txt")
    logs = api.run_dir(run) / "logs"
    logs.mkdir()
    (logs / "run.log").symlink_to(outside / "canary.txt")
    # Video rows as a run process would store them (one with a file name no run writes).
    engine = make_engine(api.db_url)
    store = RunStore(make_sessionmaker(engine), api.data_dir / "runs")
    try:
        linked = store.record_video(run, 10, "linked.mp4", 1.0, 5)
        escaping = store.record_video(run, 20, "../../secret.txt", 1.0, 5)
        absolute = store.record_video(run, 30, str(outside / "canary.txt"), 1.0, 5)
    finally:
        engine.dispose()
    for video in (linked, escaping, absolute):
        response = api.client.get(video["url"])
        assert response.status_code == 404, (video, response.status_code)
        assert secret not in response.text
    logs_response = api.client.get(f"/api/runs/{run}/logs")
    assert logs_response.status_code == 200 and secret not in logs_response.text


@pytest.mark.parametrize("what", ["link-inside", "run-dir-is-a-link"])
def test_delete_never_deletes_outside_the_run(
    api: ReliableService, secret: str, tmp_path: Path, what: str
) -> None:
    run = api.submit(tiny_ppo_spec())["id"]
    outside = _outside(tmp_path, secret)
    run_dir = api.run_dir(run)
    if what == "link-inside":
        (run_dir / "checkpoints").mkdir(parents=True)
        (run_dir / "checkpoints" / "step_0000000001").symlink_to(outside)
        (run_dir / "videos").symlink_to(outside)
        (run_dir / "logs").mkdir()
        (run_dir / "logs" / "run.log").symlink_to(outside / "canary.txt")
    else:
        run_dir.symlink_to(outside)
    assert api.client.post(f"/api/runs/{run}/cancel").json()["status"] == "cancelled"
    assert api.client.delete(f"/api/runs/{run}").status_code == 204
    assert api.client.get(f"/api/runs/{run}").status_code == 404
    assert (outside / "canary.txt").read_text() == secret
    assert (outside / "step_0000000009" / "metadata.pkl").read_text() == secret
    assert (api.data_dir / "secret.txt").read_text() == secret


MALFORMED = {
    "not-json": b"{not json",
    "truncated": b'{"kind": "ppo", "env": {"name": "Point',
    "array": b"[]",
    "string": b'"ppo"',
    "null": b"null",
    "bad-utf8": b'{"kind": "\xff\xfe"}',
    "nan": b'{"kind": "ppo", "env": {"name": "PointReach"}, "config": {"seed": NaN}}',
    "huge-number": b'{"kind": "ppo", "env": {"name": "PointReach"}, "config": {"seed": 1e999}}',
    "huge-int": b'{"kind": "ppo", "env": {"name": "PointReach"}, "config": {"seed": '
    + b"9" * 4000
    + b"}}",
    "int-past-float": b'{"kind": "ppo", "env": {"name": "PointReach"}, "config": {"ppo": '
    b'{"learning_rate": 1' + b"0" * 400 + b"}}}",
    "deep-nesting": b'{"kind": "ppo", "env": {"name": "PointReach", "overrides": {"a": '
    + b"[" * 100_000
    + b"]" * 100_000
    + b"}}}",
    "long-name": json.dumps({**tiny_ppo_spec(), "name": "x" * 500_000}).encode(),
    "many-tags": json.dumps({**tiny_ppo_spec(), "tags": ["t"] * 100_000}).encode(),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_bodies_are_4xx_json(api: ReliableService, name: str) -> None:
    body = MALFORMED[name]
    target = api_run(api)
    before = api.client.get("/api/runs").json()["total"]
    for method, path in (("POST", "/api/runs"), ("PATCH", f"/api/runs/{target}")):
        response = api.client.request(
            method, path, content=body, headers={"content-type": "application/json"}
        )
        assert 400 <= response.status_code < 500, (method, response.status_code, response.text)
        assert response.json()["detail"], response.text
    assert api.client.get("/api/runs").json()["total"] == before  # nothing queued


_run_for_patch: dict[str, str] = {}


def api_run(api: ReliableService) -> str:
    if "id" not in _run_for_patch:
        _run_for_patch["id"] = api.submit(tiny_ppo_spec())["id"]
    return _run_for_patch["id"]


@pytest.mark.parametrize("how", ["content-length", "chunked", "lying-length"])
def test_oversized_bodies_are_413(api: ReliableService, how: str) -> None:
    big = json.dumps({**tiny_ppo_spec(), "notes": "x" * 1_100_000}).encode()
    target = api_run(api)
    before = api.client.get("/api/runs").json()["total"]
    for method, path in (("POST", "/api/runs"), ("PATCH", f"/api/runs/{target}")):
        if how == "content-length":
            status, body = _send(api, method, path, {"Content-Length": str(len(big))}, [big])
        elif how == "chunked":
            chunks = [big[i : i + 65536] for i in range(0, len(big), 65536)]
            status, body = _send(api, method, path, {"Transfer-Encoding": "chunked"}, chunks, True)
        else:  # claims 100 bytes and sends a megabyte: the rest is never a request
            status, body = _send(api, method, path, {"Content-Length": "100"}, [big])
        expected = (413,) if how != "lying-length" else (400, 413, 422)
        assert status in expected, (method, status, body[:200])
        assert json.loads(body)["detail"]
    assert api.client.get("/api/runs").json()["total"] == before
    assert api.client.get("/api/health").status_code == 200


def _send(  # type: ignore[no-untyped-def]
    api: ReliableService, method: str, path: str, headers: dict, chunks: list, chunked=False
) -> tuple[int, bytes]:
    """Sends the body as given (no client-side checks), and reads the answer."""
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=30)
    try:
        conn.putrequest(method, path)
        for key, value in {**headers, **AUTH, "Content-Type": "application/json"}.items():
            conn.putheader(key, value)
        conn.endheaders()
        try:
            for chunk in chunks:
                conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            if chunked:
                conn.send(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before reading it all
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _follow(api: ReliableService, run: str, out: list, closed: list, **kwargs) -> None:  # type: ignore[no-untyped-def]
    with connect(
        f"ws://127.0.0.1:{api.port}/api/runs/{run}/stream", additional_headers=AUTH, **kwargs
    ) as ws:
        try:
            while True:
                out.append(json.loads(ws.recv(timeout=60)))
        except ConnectionClosed:
            pass
        except TimeoutError:
            pass
        closed.append(ws.close_code)


def test_a_flooding_websocket_is_closed_1008_and_others_keep_streaming(
    api: ReliableService,
) -> None:
    run = api.submit(tiny_ppo_spec())["id"]
    events: list = []
    closed: list = []
    follower = threading.Thread(target=_follow, args=(api, run, events, closed), daemon=True)
    follower.start()
    with connect(f"ws://127.0.0.1:{api.port}/api/runs/{run}/stream", additional_headers=AUTH) as ws:
        assert json.loads(ws.recv(timeout=10))["seq"] == 1
        with pytest.raises(ConnectionClosed):
            for i in range(5000):
                ws.send(json.dumps({"spam": i, "pad": "x" * 1000}))
                time.sleep(0.0005)
            ws.recv(timeout=10)
        assert ws.close_code == 1008
    # Oversized client messages are refused too.
    with connect(f"ws://127.0.0.1:{api.port}/api/runs/{run}/stream", additional_headers=AUTH) as ws:
        ws.recv(timeout=10)
        with pytest.raises(ConnectionClosed):
            ws.send("x" * 200_000)
            ws.recv(timeout=10)
        assert ws.close_code in (1009, 1008)
    assert api.client.post(f"/api/runs/{run}/cancel").status_code == 202
    follower.join(30)
    assert [e["seq"] for e in events] == [1, 2] and events[-1]["status"] == "cancelled"
    assert closed == [1000]


def test_a_client_that_never_reads_does_not_slow_the_others(api: ReliableService) -> None:
    """One client follows a run and never reads (its TCP window fills up) while 1000 events
    of 6 KB are stored: another client receives every one of them in order, quickly, and
    the API keeps answering."""
    from server.store.db import make_engine, make_sessionmaker
    from server.store.run_store import RunStore

    run = api.submit(tiny_ppo_spec())["id"]
    stuck = connect(
        f"ws://127.0.0.1:{api.port}/api/runs/{run}/stream", additional_headers=AUTH, max_queue=1
    )
    stuck.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    events: list = []
    closed: list = []
    follower = threading.Thread(target=_follow, args=(api, run, events, closed), daemon=True)
    follower.start()
    engine = make_engine(api.db_url)
    store = RunStore(make_sessionmaker(engine), api.data_dir / "runs")
    latencies = []
    try:
        started = time.monotonic()
        for i in range(1000):
            store.record_log(run, f"line {i} " + "y" * 6000)
            if i % 100 == 0:
                t = time.monotonic()
                assert api.client.get(f"/api/runs/{run}").status_code == 200
                latencies.append(time.monotonic() - t)
        wait = time.monotonic() + 60
        while len(events) < 1001 and time.monotonic() < wait:
            time.sleep(0.05)
        took = time.monotonic() - started
    finally:
        engine.dispose()
    assert [e["seq"] for e in events] == list(range(1, 1002))
    assert took < 45, took
    assert max(latencies) < 2.0, latencies
    api.client.post(f"/api/runs/{run}/cancel")
    follower.join(30)
    assert closed == [1000]
    stuck.close()
