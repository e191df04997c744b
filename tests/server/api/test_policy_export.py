"""``server.api.policy_export``: a checkpoint's policy exported in a spawned child (the API
process never imports JAX), for a checkpoint written before networks recorded their recipe
too (rebuilt from the run's spec), with the child's error or a timeout reported."""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from server.api.policy_export import PolicyExportFailed, policy_file
from server.store import artifacts
from tests.service_harness import tiny_ppo_spec


def _old_checkpoint(run_dir: Path, spec: dict) -> artifacts.Checkpoint:
    """A checkpoint of the spec's network without ``network_recipe`` in its metadata, as
    nnx-ppo wrote them before it recorded it."""
    from nnx_ppo import envs
    from nnx_ppo.algorithms.checkpointing import save_checkpoint
    from nnx_ppo.algorithms.step import new_training_state
    from nnx_ppo.presets import make_networks

    env = envs.load(spec["env"]["name"])
    network = make_networks(spec["network"], env.observation_size, env.action_size, 3)
    network.update_statistics(np.random.default_rng(0).normal(2.0, 3.0, (64, 6)))
    path = save_checkpoint(
        str(artifacts.checkpoints_dir(run_dir)), new_training_state(env, network, 4, 0), 96
    )
    with open(os.path.join(path, "metadata.pkl"), "rb") as f:
        metadata = pickle.load(f)
    del metadata["network_recipe"]
    with open(os.path.join(path, "metadata.pkl"), "wb") as f:
        pickle.dump(metadata, f)
    found = artifacts.find_checkpoint(run_dir, 96)
    assert found is not None
    return found


def test_an_old_checkpoint_exports_from_the_run_spec_and_failures_say_why(tmp_path):
    from nnx_ppo import policy
    from nnx_ppo.presets import make_networks

    spec = tiny_ppo_spec()
    checkpoint = _old_checkpoint(tmp_path, spec)
    other = {**spec, "network": {**spec["network"], "actor_hidden_sizes": [32]}}
    with pytest.raises(PolicyExportFailed, match="does not match the network") as failed:
        policy_file(tmp_path, checkpoint, "stablehlo", other)
    assert not failed.value.missing_extra
    assert not (tmp_path / "archives" / "step_0000000096.stablehlo").exists()
    assert [p.name for p in (tmp_path / "archives").iterdir()] == []  # no temporary left

    path = policy_file(tmp_path, checkpoint, "stablehlo", spec)
    assert path == tmp_path / "archives" / "step_0000000096.stablehlo"
    template = make_networks(spec["network"], 6, 2, 0)
    expected = policy.load(checkpoint.path, networks=template)
    obs = np.random.default_rng(1).normal(2.0, 3.0, (5, 6)).astype(np.float32)
    (action,) = jax.export.deserialize(bytearray(path.read_bytes())).call(obs)
    np.testing.assert_allclose(action, expected.act((), obs)[1], atol=1e-5)


def test_an_export_past_its_timeout_is_stopped(tmp_path):
    spec = tiny_ppo_spec()
    checkpoint = _old_checkpoint(tmp_path, spec)
    with pytest.raises(PolicyExportFailed, match=r"did not finish within 0\.05 s"):
        policy_file(tmp_path, checkpoint, "onnx", spec, timeout_s=0.05)
    assert [p.name for p in (tmp_path / "archives").iterdir()] == []


def test_the_childs_answer_names_a_missing_export_extra(tmp_path, monkeypatch):
    # The child's entry point, run here with the export extra hidden (the API answers 501
    # for this outcome, 500 for any other failure).
    import multiprocessing as mp

    from server.api import policy_export

    spec = tiny_ppo_spec()
    checkpoint = _old_checkpoint(tmp_path, spec)
    monkeypatch.setitem(sys.modules, "jax2onnx", None)  # import jax2onnx raises ImportError
    monkeypatch.setattr(policy_export.child_processes, "ignore_sigint", lambda: None)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    parent, child = mp.Pipe(duplex=False)
    out = tmp_path / "p.onnx"
    policy_export._export_main(child, str(checkpoint.path), "onnx", str(out), spec)
    outcome, message = parent.recv()
    assert outcome == "missing_extra" and "nnx-ppo[export]" in message, message
    assert not out.exists()
