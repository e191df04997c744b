"""``nnx_ppo.client.Client`` against a real service: the token file, submit and its 422s,
the stream (with a dropped connection resumed by seq), metrics as arrays and frames,
checkpoints that ``load_checkpoint`` reads, logs, cancel, and clean errors."""

from __future__ import annotations

import contextlib
import csv
import http.server
import io
import json
import math
import socket
import stat
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nnx_ppo.client import (
    ApiError,
    ArchiveError,
    Client,
    NotFound,
    ServiceUnavailable,
    Unauthorized,
)
from nnx_ppo.client.archive import extract_checkpoint
from tests.client.helpers import load_checkpoint_step
from tests.service_harness import ROOT, TOKEN, Service, free_port, tiny_ppo_spec


@pytest.fixture
def client(service: Service) -> Iterator[Client]:
    with Client(service.url, TOKEN) as c:
        yield c


def test_importing_the_client_loads_neither_jax_nor_the_server() -> None:
    code = (
        "import sys, nnx_ppo.client; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'jax', 'flax', 'server'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_token_comes_from_the_file_serve_writes(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = service.data_dir / "api_token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token_file.read_text().strip() == TOKEN
    monkeypatch.delenv("NNX_PPO_API_TOKEN", raising=False)
    monkeypatch.setenv("NNX_PPO_URL", service.url)
    monkeypatch.setenv("NNX_PPO_DATA_DIR", str(service.data_dir))
    with Client() as c:
        assert c.url == service.url and c.token == TOKEN
        assert c.health().workers  # the workers are shown with the token only
    monkeypatch.chdir(service.data_dir.parent)  # ./nnx_ppo_data is the default data dir
    monkeypatch.delenv("NNX_PPO_DATA_DIR")
    (service.data_dir.parent / "nnx_ppo_data").mkdir(exist_ok=True)
    (service.data_dir.parent / "nnx_ppo_data" / "api_token").write_text("wrong-token-123\n")
    with Client() as c, pytest.raises(Unauthorized) as error:
        c.runs()
    assert error.value.status_code == 401 and "NNX_PPO_API_TOKEN" in str(error.value)


def test_errors_carry_the_servers_detail(client: Client) -> None:
    with pytest.raises(NotFound) as missing:
        client.run("0123456789ab")
    assert missing.value.status_code == 404 and "not found" in str(missing.value)
    spec = tiny_ppo_spec()
    spec["config"]["ppo"]["n_envs"] = 10
    spec["network"]["activation"] = "nope"
    with pytest.raises(ApiError) as invalid:
        client.submit(spec)
    assert invalid.value.status_code == 422
    fields = dict(invalid.value.field_errors)
    assert {"config.ppo.n_envs", "network.activation"} <= set(fields), fields
    assert "config.ppo.n_envs" in str(invalid.value)
    with Client(f"http://127.0.0.1:{free_port()}", TOKEN) as nobody:
        with pytest.raises(ServiceUnavailable, match="cannot reach the nnx-ppo service"):
            nobody.runs()
        with pytest.raises(ServiceUnavailable):
            next(nobody.follow("0123456789ab", retry_for=0.5))
    with pytest.raises(NotFound):
        next(client.follow("0123456789ab"))


def test_follow_replays_and_resumes_by_seq(
    client: Client, service: Service, finished_run: dict[str, Any]
) -> None:
    run_id = finished_run["id"]
    events = list(client.follow(run_id))
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs)) and seqs[-1] == finished_run["last_seq"]
    assert events[-1].terminal and events[-1].status == "succeeded"
    metrics = [e for e in events if e.type == "metrics"]
    assert metrics[-1].step == 8000 and all(isinstance(e.values, dict) for e in metrics)
    assert {e.checkpoint.step for e in events if e.checkpoint} == {4000, 8000}
    middle = seqs[len(seqs) // 2]
    assert [e.seq for e in client.follow(run_id, after_seq=middle)] == seqs[len(seqs) // 2 + 1 :]
    assert list(client.follow(run_id, after_seq=seqs[-1])) == []  # seen everything

    # Through a proxy that cuts the first connection midway: the client reconnects and
    # resumes after the last seq it saw, so nothing is lost or repeated.
    with _CuttingProxy(service.port, cut_after_bytes=3000) as proxy:
        with Client(proxy.url, TOKEN) as through:
            resumed = list(through.follow(run_id))
        assert proxy.connections >= 2
    assert [e.seq for e in resumed] == seqs
    assert [e.raw for e in resumed] == [e.raw for e in events]


def test_metrics_as_arrays_and_frames(client: Client, finished_run: dict[str, Any]) -> None:
    run_id = finished_run["id"]
    csv_rows = list(
        csv.DictReader(io.StringIO(client._http.get(f"/api/runs/{run_id}/metrics.csv").text))
    )
    every = client.metrics(run_id)
    assert sum(len(s) for s in every.values()) == len(csv_rows)
    for row in csv_rows[:: max(1, len(csv_rows) // 50)]:
        s = every[row["key"]]
        i = int(np.searchsorted(s.step, int(row["step"])))
        assert s.step[i] == int(row["step"]) and s.wall_time[i] == float(row["wall_time"])
        expected = float(row["value"].replace("Infinity", "inf"))
        assert s.value[i] == expected or (math.isnan(expected) and math.isnan(s.value[i]))
    reward = every["eval/episode_reward"]
    assert reward.step.tolist() == [4000, 8000] and reward.value.dtype == np.float64

    key = next(k for k, s in every.items() if len(s) > 20)
    few = client.metrics(run_id, keys=[key], max_points=5)
    assert list(few) == [key] and 1 <= len(few[key]) <= 5
    assert few[key].step[-1] == every[key].step[-1]
    assert np.all(few[key].min <= few[key].value) and np.all(few[key].value <= few[key].max)

    frame = client.metrics_frame(run_id, keys=["eval/episode_reward", key])
    assert list(frame.columns) == ["key", "step", "value", "min", "max", "wall_time"]
    assert len(frame) == 2 + len(every[key])
    wide = frame.pivot(index="step", columns="key", values="value")
    assert wide.loc[8000, "eval/episode_reward"] == reward.value[-1]


def test_checkpoints_videos_and_logs(
    client: Client, finished_run: dict[str, Any], tmp_path: Path
) -> None:
    run_id = finished_run["id"]
    assert [c.step for c in client.checkpoints(run_id)] == [4000, 8000]
    newest = client.download_checkpoint(run_id, dest=tmp_path)
    assert newest == tmp_path / "step_0000008000" and (newest / "metadata.pkl").is_file()
    again = client.download_checkpoint(run_id, dest=tmp_path)  # replaces it, nothing left over
    assert again == newest and sorted(p.name for p in tmp_path.iterdir()) == ["step_0000008000"]
    older = client.download_checkpoint(run_id, 4000, tmp_path / "older")
    assert load_checkpoint_step(older, finished_run["spec"]) == 4000
    with pytest.raises(NotFound):
        client.download_checkpoint(run_id, 123, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["older", "step_0000008000"]
    assert client.videos(run_id) == []
    with pytest.raises(NotFound):
        client.download_video(run_id, 1, tmp_path)
    assert "PointReach" in {e.name for e in client.envs()}  # the catalogue has loaded by now
    assert client.logs(run_id, tail=1).strip().startswith("finished in")
    assert len(client.logs(run_id)) > len(client.logs(run_id, tail=1))


def test_submit_list_cancel_and_wait(client: Client) -> None:
    run = client.submit({**tiny_ppo_spec(total_steps=5_000_000), "name": "to-cancel"})
    assert run.status == "queued" and run.total_steps == 5_000_000 and not run.finished
    listed = client.runs(q="to-cancel")
    assert listed.total == 1 and [r.id for r in listed] == [run.id]
    # A page is a sequence: indexing and slicing work as on the list of its runs.
    assert listed[0].id == run.id and listed[-1] == listed[0]
    assert [r.id for r in listed[:5]] == [run.id] and run in listed
    with pytest.raises(IndexError):
        listed[1]
    cancelled = client.cancel(run.id)  # a queued run at once, a running one at its next step
    assert cancelled.status == "cancelled" or cancelled.cancel_requested
    done = client.wait(run.id)
    assert done.status == "cancelled" and done.finished
    assert run.id in [r.id for r in client.runs(status="cancelled")]
    assert client.update(run.id, tags=["gone"]).tags == ["gone"]
    client.delete(run.id)
    with pytest.raises(NotFound):
        client.run(run.id)


def _tar(path: Path, entries: list[tarfile.TarInfo]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info in entries:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return path


def _entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, 1 if kind == tarfile.REGTYPE else 0
    return info


@pytest.mark.parametrize(
    "entries",
    [
        [_entry("step_0000000001/../../escape")],
        [_entry("/abs/step_0000000001")],
        [_entry("step_0000000001/link", tarfile.SYMTYPE, "/etc/passwd")],
        [_entry("step_0000000001/hard", tarfile.LNKTYPE, "step_0000000001/a")],
        [_entry("step_0000000001/a"), _entry("other/b")],
        [_entry("not_a_step/a")],
    ],
)
def test_unsafe_checkpoint_archives_are_refused(tmp_path: Path, entries) -> None:  # type: ignore[no-untyped-def]
    archive = _tar(tmp_path / "bad.tar.gz", entries)
    with pytest.raises(ArchiveError):
        extract_checkpoint(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "escape").exists()


class _CuttingProxy:
    """A TCP proxy to the service that drops its first connection (no close frame) after
    ``cut_after_bytes`` bytes from the server; later connections pass whole."""

    def __init__(self, port: int, cut_after_bytes: int):
        self.upstream = port
        self.cut = cut_after_bytes
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self.threads: list[threading.Thread] = []

    def __enter__(self) -> _CuttingProxy:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            up = socket.create_connection(("127.0.0.1", self.upstream))
            limit = self.cut if self.connections == 1 else None
            for src, dst, cap in ((down, up, None), (up, down, limit)):
                t = threading.Thread(target=self._pump, args=(src, dst, cap, down, up))
                t.daemon = True
                t.start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, cap: int | None, *both: socket.socket):
        sent = 0
        try:
            while data := src.recv(4096):
                if cap is not None and sent + len(data) > cap:
                    dst.sendall(data[: cap - sent])
                    break
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for s in both:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


class _SlowService(http.server.BaseHTTPRequestHandler):
    """Answers every request after ``DELAY_S``, as a service whose spec check loads a
    Playground env for the first time does: a run for a POST, an empty list for a GET."""

    DELAY_S = 1.0

    def _answer(self, body: dict[str, Any], status: int) -> None:
        time.sleep(self.DELAY_S)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client gave up
            self.wfile.write(data)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer({"id": "slow1", "status": "queued"}, 201)

    def do_GET(self) -> None:
        self._answer({"items": [], "total": 0, "events_seq": 0}, 200)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_submission_waits_for_the_spec_check_longer_than_other_requests() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowService)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with Client(url, TOKEN, timeout=0.3) as slow:
            assert slow.submit(tiny_ppo_spec()).id == "slow1"  # 1 s > the client's 0.3 s
            with pytest.raises(ServiceUnavailable, match="timed out"):
                slow.runs()
    finally:
        server.shutdown()
        server.server_close()
