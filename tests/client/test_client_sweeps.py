"""``nnx-ppo sweep FILE.json`` and the client's sweep methods against a real service: a
two-trial grid submitted and followed to its end (progress, a line per trial, the running
best, the summary), then read, replayed, refused and deleted through ``Client``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnx_ppo.client import ApiError, Client, NotFound
from tests.client.helpers import nnx_ppo
from tests.service_harness import TOKEN, Service, tiny_ppo_spec


def test_sweep_cli_then_the_client(service: Service, tmp_path: Path) -> None:
    spec = tiny_ppo_spec(total_steps=1920)
    spec["config"]["eval"]["every_steps"] = 960
    body = {
        "spec": spec,
        "space": {"config.seed": {"grid": [1, 2]}},
        "method": "grid",
        "parallel": 1,
    }
    sweep_file = tmp_path / "sweep.json"
    sweep_file.write_text(json.dumps(body))
    result = nnx_ppo(service, "sweep", str(sweep_file), "--name", "cli-sweep")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    sweep_id, name, status = lines[0].split()
    assert (name, status) == ("cli-sweep", "running")
    assert any("grid, 2 trials, 1 at once, objective max eval/episode_reward" in x for x in lines)
    for trial in (0, 1):
        assert any(f"trial #{trial} succeeded: objective" in x for x in lines), result.stdout
    assert any("new best: trial #" in x for x in lines), result.stdout
    assert lines[-1].startswith(f"sweep {sweep_id} finished: 2 trials (2 succeeded); best trial #")

    with Client(service.url, TOKEN) as client:
        sweep = client.sweep(sweep_id)
        assert sweep.finished and sweep.status == "finished" and sweep.name == "cli-sweep"
        assert sorted(t.params["config.seed"] for t in sweep.trials) == [1, 2]
        assert sweep.best is not None
        assert sweep.best.objective == max(t.objective or -1e9 for t in sweep.trials)
        assert f"#{sweep.best.trial} (run {sweep.best.run_id})" in lines[-1]
        assert sweep_id in [s.id for s in client.sweeps(status="finished")]
        events = list(client.follow_sweep(sweep_id))  # a replay, to the final status
        assert [e.seq for e in events] == list(range(1, sweep.last_seq + 1))
        assert events[-1].terminal and events[-1].status == "finished"
        assert [e.run_id for e in events if e.type == "best"][-1] == sweep.best.run_id
        run = client.run(sweep.best.run_id)  # a trial is an ordinary run
        assert (
            run.status == "succeeded"
            and run.spec["config"]["seed"] == sweep.best.params["config.seed"]
        )
        with pytest.raises(ApiError) as invalid:
            client.submit_sweep({**body, "space": {"config.ppo.nope": {"grid": [1, 2]}}})
        assert invalid.value.status_code == 422
        assert [f for f, _ in invalid.value.field_errors] == ["space.config.ppo.nope"]
        client.delete_sweep(sweep_id)
        with pytest.raises(NotFound):
            client.sweep(sweep_id)
        with pytest.raises(NotFound):
            client.run(sweep.best.run_id)  # its trials went with it
        with pytest.raises(NotFound):
            next(client.follow_sweep(sweep_id))
