"""The env table resumes: an earlier run's finished rows are kept, the rest are run."""

from __future__ import annotations

from typing import Any

import pytest

from bench import env_table


def test_finished_rows_are_kept_and_only_the_rest_run(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def check_env(name: str, render: bool = True) -> dict[str, Any]:
        ran.append(name)
        return {"env": name, "available": True, "restored": True}

    monkeypatch.setattr(env_table, "check_env", check_env)
    earlier = [{"env": "A", "available": True, "restored": True, "compile_s": 12.0}]
    written: list[list[str]] = []
    rows = env_table.run_all(
        ["A", "B", "C"],
        render=False,
        write=lambda rs: written.append([r["env"] for r in rs]),
        done=earlier,
    )
    assert ran == ["B", "C"]
    assert rows[0] is earlier[0] and [r["env"] for r in rows] == ["A", "B", "C"]
    assert written == [["A", "B"], ["A", "B", "C"]]  # after each env that ran
