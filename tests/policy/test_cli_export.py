"""``nnx-ppo train --out DIR`` writes checkpoints, and ``nnx-ppo policy export DIR`` turns
one into an ONNX model or a StableHLO program that acts as ``nnx_ppo.policy.load`` does."""

from __future__ import annotations

import jax
import numpy as np
import onnxruntime as ort

from nnx_ppo import policy
from nnx_ppo.cli import main


def test_a_cli_trained_policy_exports(capsys, tmp_path):
    # PointReach's preset with 8 envs: 8 x 16 = 128 steps per iteration; over 256 steps the
    # preset's three checkpoints fall at each iteration's end.
    out = tmp_path / "run"
    argv = ["train", "PointReach", "--steps", "256", "--n-envs", "8", "--out", str(out)]
    tiny = ["network.actor_hidden_sizes=[8]", "network.critic_hidden_sizes=[8]"]
    assert main([*argv, *tiny, "eval.enabled=false", "--cache-dir", str(tmp_path / "jax")]) == 0
    assert f"checkpoints: {out}" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["step_0000000128", "step_0000000256"]

    onnx_file, hlo_file = tmp_path / "reach.onnx", tmp_path / "reach.stablehlo"
    assert main(["policy", "export", str(out), "--format", "onnx", "-o", str(onnx_file)]) == 0
    assert capsys.readouterr().out == (f"{onnx_file}: the policy of checkpoint step 256 as onnx\n")
    export = ["policy", "export", str(out), "--step", "128", "--format", "stablehlo"]
    assert main([*export, "-o", str(hlo_file)]) == 0

    obs = np.random.default_rng(0).uniform(-1, 1, (5, 6)).astype(np.float32)
    newest, first = policy.load(out), policy.load(out, step=128)
    session = ort.InferenceSession(onnx_file.read_bytes(), providers=["CPUExecutionProvider"])
    (action,) = session.run(None, {"obs": obs})
    np.testing.assert_allclose(action, newest.act((), obs)[1], atol=1e-5)
    program = jax.export.deserialize(bytearray(hlo_file.read_bytes()))
    (action,) = program.call(obs)
    np.testing.assert_allclose(action, first.act((), obs)[1], atol=1e-5)
    assert not np.allclose(newest.act((), obs)[1], first.act((), obs)[1], atol=1e-5)


def test_policy_export_errors_are_one_line(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    cases = {
        "no-such-dir": "neither a directory here nor a run id",
        str(tmp_path / "empty"): "neither a checkpoint nor a directory of step_* checkpoints",
    }
    for source, message in cases.items():
        argv = ["policy", "export", source, "--format", "onnx", "-o", str(tmp_path / "p")]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
