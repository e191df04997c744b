"""``GET /api/runs/{id}/checkpoints/{step}/policy?format=onnx|stablehlo`` on the shared
finished PointReach run: the downloaded programs act as the checkpoint's policy loaded
here (``nnx_ppo.policy.load``), a bad format is a 422 and a missing checkpoint a 404; and
the same through ``Client.download_policy`` and ``nnx-ppo policy export RUN_ID``."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import jax
import numpy as np
import onnxruntime as ort

from nnx_ppo import policy
from nnx_ppo.client import Client
from tests.client.helpers import nnx_ppo
from tests.service_harness import TOKEN, Service


def _checkpoint(service: Service, run_id: str, step: int, dest: Path) -> Path:
    archive = service.client.get(f"/api/runs/{run_id}/checkpoints/{step}")
    assert archive.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(archive.content)) as tar:
        tar.extractall(dest, filter="data")
    return dest / f"step_{step:010d}"


def test_a_checkpoints_policy_downloads_as_onnx_and_stablehlo(
    service: Service, finished_run: dict[str, Any], tmp_path: Path
) -> None:
    run_id = finished_run["id"]
    url = f"/api/runs/{run_id}/checkpoints/8000/policy"
    onnx = service.client.get(url, params={"format": "onnx"}, timeout=300)
    assert onnx.status_code == 200, onnx.text
    assert onnx.headers["content-type"] == "application/octet-stream"
    assert f'filename="{run_id}-step_0000008000.onnx"' in onnx.headers["content-disposition"]
    hlo = service.client.get(url, params={"format": "stablehlo"}, timeout=300)
    assert hlo.status_code == 200, hlo.text
    assert f'filename="{run_id}-step_0000008000.stablehlo"' in hlo.headers["content-disposition"]

    expected_policy = policy.load(_checkpoint(service, run_id, 8000, tmp_path))
    obs = np.random.default_rng(0).uniform(-1, 1, (7, 6)).astype(np.float32)
    _, expected = expected_policy.act((), obs)
    session = ort.InferenceSession(onnx.content, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"obs": obs})[0], expected, atol=1e-5)
    (action,) = jax.export.deserialize(bytearray(hlo.content)).call(obs)
    np.testing.assert_allclose(action, expected, atol=1e-5)
    assert np.ptp(np.asarray(expected)) > 1e-3  # a policy that does something

    # Exported once: the file is kept beside the checkpoint archives and served again.
    kept = service.data_dir / "runs" / run_id / "archives" / "step_0000008000.onnx"
    assert kept.read_bytes() == onnx.content
    again = service.client.get(url, params={"format": "onnx"})
    assert again.status_code == 200 and again.content == onnx.content


def test_policy_download_refusals(service: Service, finished_run: dict[str, Any]) -> None:
    run_id = finished_run["id"]
    url = f"/api/runs/{run_id}/checkpoints/8000/policy"
    for params in ({"format": "tflite"}, {}):
        refused = service.client.get(url, params=params)
        assert refused.status_code == 422, refused.text
        assert refused.json()["detail"][0]["loc"] == ["query", "format"]
    missing = service.client.get(
        f"/api/runs/{run_id}/checkpoints/1234/policy", params={"format": "onnx"}
    )
    assert missing.status_code == 404
    assert missing.json()["detail"] == f"run {run_id} has no checkpoint at step 1234"
    unknown = service.client.get(
        "/api/runs/0123456789ab/checkpoints/8000/policy", params={"format": "onnx"}
    )
    assert unknown.status_code == 404


def test_policy_export_of_a_run_by_its_id(
    service: Service, finished_run: dict[str, Any], tmp_path: Path
) -> None:
    run_id = finished_run["id"]
    target = tmp_path / "reach.onnx"
    result = nnx_ppo(service, "policy", "export", run_id, "--format", "onnx", "-o", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{target}: run {run_id}'s policy as onnx\n"
    served = service.client.get(
        f"/api/runs/{run_id}/checkpoints/8000/policy", params={"format": "onnx"}, timeout=300
    )
    assert target.read_bytes() == served.content  # the newest checkpoint's

    with Client(service.url, TOKEN) as client:  # into a folder, under the run's and step's name
        path = client.download_policy(run_id, 8000, "stablehlo", tmp_path)
    assert path == tmp_path / f"{run_id}-step_0000008000.stablehlo"
    assert jax.export.deserialize(bytearray(path.read_bytes())).in_avals[0].shape[1] == 6

    missing = nnx_ppo(service, "policy", "export", run_id, "--step", "5", "--format", "onnx")
    assert missing.returncode == 2 and "-o/--output" in missing.stderr  # argparse: required
    absent = str(tmp_path / "x.onnx")
    missing = nnx_ppo(
        service, "policy", "export", run_id, "--step", "5", "--format", "onnx", "-o", absent
    )
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert missing.stderr.startswith("error: ") and "no checkpoint at step 5" in missing.stderr
    assert not (tmp_path / "x.onnx").exists()
