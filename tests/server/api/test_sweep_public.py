"""What the sweeps list shows of a sweep (``GET /api/sweeps`` items): the base spec's env,
its trials by status, and the best finished trial, from rows built in memory."""

from __future__ import annotations

from typing import Any

from server.api.sweeps import sweep_public
from server.spec.sweep_space import SweepCreate
from server.store.models import RunRow, SweepRow
from tests.service_harness import tiny_ppo_spec


def _sweep(mode: str) -> SweepRow:
    request = SweepCreate.model_validate(
        {
            "spec": tiny_ppo_spec(),
            "space": {"config.ppo.learning_rate": {"log_uniform": [1e-4, 1e-2]}},
            "max_trials": 6,
            "parallel": 2,
            "objective": {"metric": "eval/episode_reward", "mode": mode},
        }
    )
    return SweepRow(
        id="s0123456789a",
        name="lr",
        status="running",
        request=request.model_dump(mode="json"),
        base_total_steps=20_000,
        created_at=100.0,
        last_seq=7,
    )


def _trial(number: int, status: str, reward: Any) -> RunRow:
    return RunRow(
        id=f"r{number}",
        kind="ppo",
        name=f"lr #{number}",
        status=status,
        spec={},
        created_at=100.0 + number,
        queued_at=100.0 + number,
        steps=0,
        total_steps=20_000,
        latest_metrics={} if reward is None else {"eval/episode_reward": reward},
        sweep_id="s0123456789a",
        trial=number,
        trial_params={"config.ppo.learning_rate": 10.0 ** -(number + 2)},
    )


def test_a_listed_sweep_names_its_env_counts_its_trials_and_picks_the_best() -> None:
    trials = [
        _trial(0, "succeeded", -3.0),
        _trial(1, "succeeded", -1.5),
        _trial(2, "pruned", -0.5),  # better, but pruned: never the best
        _trial(3, "running", -0.1),  # better, but not finished
        _trial(4, "succeeded", float("nan")),  # no finite objective
    ]
    listed = sweep_public(_sweep("max"), trials)
    assert listed.env == "PointReach"
    assert listed.max_trials == 6 and listed.parallel == 2
    assert listed.trial_counts == {"succeeded": 3, "pruned": 1, "running": 1}
    assert listed.best is not None and listed.best.trial == 1
    assert listed.best.objective == -1.5
    # minimising, the lowest finished objective wins: trial 0 (-3.0)
    lowest = sweep_public(_sweep("min"), trials).best
    assert lowest is not None and lowest.trial == 0
    assert "request" not in listed.model_dump()  # the list leaves the detail out
