"""Exports against a real service: the TensorBoard event file read back with TensorBoard's
own reader (every point of every key, as in metrics.csv; non-finite values too), and
``nnx-ppo export --to wandb`` in W&B's offline mode read back from its ``.wandb`` file."""

from __future__ import annotations

import csv
import io
import json
import math
import struct
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from server.store.db import make_engine, make_sessionmaker
from server.store.run_store import RunStore
from tests.client.helpers import nnx_ppo
from tests.service_harness import Service, tiny_ppo_spec


def _csv_points(service: Service, run_id: str) -> dict[str, list[tuple[int, float, float]]]:
    text = service.client.get(f"/api/runs/{run_id}/metrics.csv").text
    points: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    for row in csv.DictReader(io.StringIO(text)):
        value = float(row["value"].replace("Infinity", "inf"))
        points[row["key"]].append((int(row["step"]), float(row["wall_time"]), value))
    return points


def _tensorboard_points(path: Path) -> dict[str, list[tuple[int, float, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(path), size_guidance={"scalars": 0})  # 0: keep all
    accumulator.Reload()
    return {
        key: [(e.step, e.wall_time, e.value) for e in accumulator.Scalars(key)]
        for key in accumulator.Tags()["scalars"]
    }


def _same_float32(a: float, b: float) -> bool:
    x, y = np.float32(a), np.float32(b)
    return bool(x == y or (np.isnan(x) and np.isnan(y)))


def _export(service: Service, run_id: str, tmp_path: Path) -> Path:
    response = service.client.get(f"/api/runs/{run_id}/export", params={"format": "tensorboard"})
    assert response.status_code == 200, response.text
    disposition = response.headers["content-disposition"]
    assert 'filename="events.out.tfevents.' in disposition and run_id in disposition
    path = tmp_path / f"events.out.tfevents.{run_id}"
    path.write_bytes(response.content)
    return path


def _assert_same_points(tensorboard: dict, expected: dict) -> None:
    assert set(tensorboard) == set(expected)
    for key, points in expected.items():
        got = tensorboard[key]
        assert [(s, w) for s, w, _ in got] == [(s, w) for s, w, _ in points], key
        assert all(_same_float32(g[2], p[2]) for g, p in zip(got, points, strict=True)), key


def test_tensorboard_export_has_every_point(
    service: Service, finished_run: dict[str, Any], tmp_path: Path
) -> None:
    run_id = finished_run["id"]
    expected = _csv_points(service, run_id)
    assert sum(map(len, expected.values())) > 100
    _assert_same_points(_tensorboard_points(_export(service, run_id, tmp_path)), expected)

    unknown = service.client.get(f"/api/runs/{run_id}/export", params={"format": "csv"})
    assert unknown.status_code == 422 and unknown.json()["detail"][0]["loc"] == [
        "query",
        "format",
    ]
    assert service.client.get(f"/api/runs/{run_id}/export").status_code == 422
    missing = service.client.get("/api/runs/0123456789ab/export?format=tensorboard")
    assert missing.status_code == 404


def test_tensorboard_export_keeps_non_finite_values(service: Service, tmp_path: Path) -> None:
    run = service.submit(tiny_ppo_spec(total_steps=5_000_000))
    service.client.post(f"/api/runs/{run['id']}/cancel")
    service.wait_for(run["id"], timeout=120)
    # Metrics as a run process stores them (the store's own call, on the service's file).
    engine = make_engine(f"sqlite:///{service.data_dir / 'nnx_ppo.db'}")
    store = RunStore(make_sessionmaker(engine), service.data_dir / "runs")
    base = 1.7e9
    done = service.run(run["id"])["steps"]
    batch = [
        (done + 10, base + 1.25, {"losses/a": math.nan, "losses/b": 1.5}),
        (done + 20, base + 2.5, {"losses/a": math.inf, "losses/b": -math.inf}),
        (done + 30, base + 3.75, {"losses/a": 0.1, "losses/b": 1e30}),
    ]
    assert store.record_metrics_batch(run["id"], batch) == 3
    engine.dispose()
    expected = _csv_points(service, run["id"])
    got = _tensorboard_points(_export(service, run["id"], tmp_path))
    _assert_same_points(got, expected)
    assert math.isnan(got["losses/a"][0][2]) and got["losses/a"][1][2] == math.inf
    assert got["losses/b"][1][2] == -math.inf and got["losses/b"][2][1] == base + 3.75


def _wandb_records(path: Path) -> list[Any]:
    """The protobuf records of a ``.wandb`` file: a 7-byte header (``:W&B``, magic,
    version), then 32 KiB blocks of chunks, each with a 7-byte header (CRC32, length,
    type: 1 full, 2 first, 3 middle, 4 last); a block's tail under 7 bytes is padding."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, pending, pos, block = [], b"", 7, 32768
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 2):
            pending = chunk
        elif kind in (3, 4):
            pending += chunk
        else:
            break
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def test_export_to_wandb_offline(
    service: Service, finished_run: dict[str, Any], tmp_path: Path
) -> None:
    pytest.importorskip("wandb")
    run_id = finished_run["id"]
    env = {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true"}
    result = nnx_ppo(service, "export", run_id, "--to", "wandb", "--project", "p", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    (wandb_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    assert str(wandb_file.parent) in result.stdout
    history: dict[str, list[tuple[int, float]]] = defaultdict(list)
    config: dict[str, Any] = {}
    for record in _wandb_records(wandb_file):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            for item in record.history.item:
                key = item.key or "/".join(item.nested_key)
                if not key.startswith("_"):
                    history[key].append((record.history.step.num, json.loads(item.value_json)))
        elif kind == "run":
            config.update({i.key: json.loads(i.value_json) for i in record.run.config.update})
    assert config["nnx_ppo_run_id"] == run_id
    assert config["network"] == finished_run["spec"]["network"]
    assert config["config"] == finished_run["spec"]["config"]
    expected = _csv_points(service, run_id)
    assert set(history) == set(expected)
    for key, points in expected.items():
        assert history[key] == [(s, v) for s, _, v in points], key

    running = service.submit(tiny_ppo_spec(total_steps=5_000_000))
    refused = nnx_ppo(service, "export", running["id"], "--to", "wandb", "--project", "p", env=env)
    service.client.post(f"/api/runs/{running['id']}/cancel")
    assert refused.returncode == 1 and "once it has finished" in refused.stderr
    assert "Traceback" not in refused.stderr
