"""The client's commands of ``nnx-ppo`` in a subprocess against a real service: submit
from a file and follow it to its end, ls, watch, logs, pull (a checkpoint that
``load_checkpoint`` reads), cancel, and one clear line (never a traceback) for errors."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.client.helpers import load_checkpoint_step, nnx_ppo
from tests.service_harness import Service, free_port, tiny_ppo_spec


def _one_error_line(result: Any, *needles: str) -> None:
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_submit_follow_ls_and_logs(service: Service, tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({**tiny_ppo_spec(total_steps=1920), "name": "from-file"}))
    submitted = nnx_ppo(service, "submit", str(spec_file), "--tag", "cli", "--follow")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    run_id, name, status = submitted.stdout.splitlines()[0].split()
    assert (name, status) == ("from-file", "queued")
    last = submitted.stdout.strip().splitlines()[-1]
    assert last.startswith(f"run {run_id} succeeded: 1,920 of 1,920 steps"), submitted.stdout
    assert "status running" in submitted.stdout and "finished in" in submitted.stdout

    listed = nnx_ppo(service, "ls", "--tag", "cli")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (run_id, "from-file", "succeeded", "1,920/1,920")
    ]
    logs = nnx_ppo(service, "logs", run_id, "--tail", "1")
    assert logs.returncode == 0 and logs.stdout.startswith("finished in")
    followed = nnx_ppo(service, "logs", run_id, "-f")  # a finished run: prints all, ends
    assert followed.returncode == 0 and followed.stdout.strip().endswith(logs.stdout.strip())


def test_watch_and_pull(service: Service, finished_run: dict[str, Any], tmp_path: Path) -> None:
    run_id = finished_run["id"]
    watched = nnx_ppo(service, "watch", run_id)
    assert watched.returncode == 0, watched.stderr
    out = watched.stdout.strip().splitlines()
    assert out[-1].startswith(f"run {run_id} succeeded: 8,000 of 8,000 steps in ")
    assert "eval/episode_reward" in out[-1]
    assert any("checkpoint at step 4,000" in line for line in out), out

    pulled = nnx_ppo(service, "pull", run_id, "--step", "4000", "--dest", str(tmp_path / "p"))
    assert pulled.returncode == 0, pulled.stderr
    checkpoint = tmp_path / "p" / "step_0000004000"
    assert f"checkpoint: {checkpoint}" in pulled.stdout
    spec = json.loads((tmp_path / "p" / "spec.json").read_text())
    assert spec == finished_run["spec"]
    assert load_checkpoint_step(checkpoint, spec) == 4000


def test_cancel(service: Service) -> None:
    run = service.submit({**tiny_ppo_spec(total_steps=5_000_000), "name": "cli-cancel"})
    cancelled = nnx_ppo(service, "cancel", run["id"])
    assert cancelled.returncode == 0 and cancelled.stdout.startswith(run["id"]), cancelled
    assert service.wait_for(run["id"], timeout=120)["status"] == "cancelled"


def test_errors_are_one_line(service: Service, tmp_path: Path) -> None:
    _one_error_line(nnx_ppo(service, "watch", "0123456789ab"), "404", "not found")
    bad = tiny_ppo_spec()
    bad["config"]["ppo"]["n_envs"] = 10
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    _one_error_line(nnx_ppo(service, "submit", str(tmp_path / "bad.json")), "config.ppo.n_envs")
    (tmp_path / "broken.json").write_text("{nope")
    _one_error_line(nnx_ppo(service, "submit", str(tmp_path / "broken.json")), "not valid JSON")
    _one_error_line(nnx_ppo(service, "submit", str(tmp_path / "missing.json")), "missing.json")
    nobody = f"http://127.0.0.1:{free_port()}"
    _one_error_line(nnx_ppo(service, "ls", "--url", nobody), "cannot reach", nobody)
    wrong_token = nnx_ppo(service, "ls", "--token", "wrong-token-123")
    _one_error_line(wrong_token, "401", "--token", "NNX_PPO_API_TOKEN")
    assert "token=..." not in wrong_token.stderr  # the Python client's spelling


def test_submit_a_preset_then_delete_it(service: Service) -> None:
    """``submit --preset NAME --steps N`` sends the env's name and the total (the service
    fills the rest from the env's preset); a misspelt env is one line with a suggestion;
    ``delete`` removes the run once it has finished."""
    submitted = nnx_ppo(service, "submit", "--preset", "PointReach", "--steps", "1920")
    assert submitted.returncode == 0, submitted.stderr
    run = service.run(submitted.stdout.split()[0])
    assert run["spec"]["env"]["name"] == "PointReach"
    assert run["spec"]["config"]["ppo"]["total_steps"] == 1920 == run["total_steps"]
    misspelt = nnx_ppo(service, "submit", "--preset", "PointReech", "--steps", "1920")
    _one_error_line(misspelt, "env.name", "did you mean 'PointReach'")
    _one_error_line(nnx_ppo(service, "submit", "--steps", "5"), "--preset")

    assert service.wait_for(run["id"], timeout=180)["status"] == "succeeded"
    deleted = nnx_ppo(service, "delete", run["id"])
    assert deleted.returncode == 0 and deleted.stdout.split() == [run["id"], "deleted"]
    assert service.client.get(f"/api/runs/{run['id']}").status_code == 404
    _one_error_line(nnx_ppo(service, "delete", run["id"]), "404")


def test_export_to_tensorboard(
    service: Service, finished_run: dict[str, Any], tmp_path: Path
) -> None:
    run_id = finished_run["id"]
    exported = nnx_ppo(service, "export", run_id, "--to", "tensorboard", "--dest", str(tmp_path))
    assert exported.returncode == 0, exported.stderr
    (path,) = tmp_path.iterdir()
    assert exported.stdout.strip() == str(path)
    assert path.name.startswith("events.out.tfevents.") and path.name.endswith(run_id)
    body = path.read_bytes()
    assert b"eval/episode_reward" in body and len(body) > 100  # records of its scalars
    _one_error_line(nnx_ppo(service, "export", run_id, "--to", "wandb"), "--project")


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    from server.cli import COMMANDS, main

    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0
    listed = {line.split()[0] for line in out.splitlines() if re.match(r"    \S", line)}
    expected = {"serve", "worker", "envs", "train", "submit", "ls", "watch", "logs"}
    expected |= {"cancel", "delete", "pull", "export", "sweep", "policy"}
    assert expected <= listed == set(COMMANDS), out
    for command in COMMANDS:  # and each one's own help
        with pytest.raises(SystemExit) as exited:
            main([command, "--help"])
        assert exited.value.code == 0
        assert f"usage: nnx-ppo {command}" in capsys.readouterr().out, command
