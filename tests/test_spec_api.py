"""The public API matches the seed specification (``../shared/spec``), entry by entry."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

CHECKER = pathlib.Path(__file__).resolve().parents[2] / "shared" / "tools" / "check_seed_api.py"
CORE_MODULES = ",".join(
    f"nnx_ppo.algorithms.{name}" for name in ("types", "config", "ppo", "rollout", "metrics")
)


@pytest.mark.skipif(not CHECKER.exists(), reason="the shared spec checker is not beside the repo")
def test_core_modules_conform_to_the_seed_spec():
    result = subprocess.run(
        [sys.executable, str(CHECKER), "--only", CORE_MODULES],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "conformant" in result.stdout
