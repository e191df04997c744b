"""Devices: which runs get which devices, the environment that pins a run process, and a
run that waits queued until enough devices are free (real SQLite store)."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.settings import Settings
from server.store.db import make_engine, make_sessionmaker, migrate
from server.store.run_store import RunStore
from server.worker.devices import Device, DevicePool, placement_env

CPU2 = [Device("cpu", "0"), Device("cpu", "1")]


def test_runs_get_distinct_devices_and_wait_for_enough() -> None:
    pool = DevicePool(CPU2, runs_per_device=1, max_runs=None)
    assert [d.name for d in pool.assign("a", 1) or []] == ["cpu:0"]
    assert [d.name for d in pool.assign("b", 1) or []] == ["cpu:1"]
    assert pool.free_count() == 0 and pool.assign("c", 1) is None
    pool.release("a")
    assert pool.assign("c", 2) is None  # one free device, two asked
    assert pool.holders() == {"cpu:0": [], "cpu:1": ["b"]}


def test_shared_devices_fill_the_least_used_first() -> None:
    pool = DevicePool(CPU2, runs_per_device=2, max_runs=3)
    assert [d.name for d in pool.assign("a", 1) or []] == ["cpu:0"]
    assert [d.name for d in pool.assign("b", 1) or []] == ["cpu:1"]
    assert [d.name for d in pool.assign("c", 2) or []] == ["cpu:0", "cpu:1"]
    assert pool.free_count() == 0  # max_runs reached, though no device is full
    assert pool.holders() == {"cpu:0": ["a", "c"], "cpu:1": ["b", "c"]}


def test_placement_environment() -> None:
    one = Settings()
    gpus = [Device("gpu", "2"), Device("gpu", "5")]
    assert placement_env(gpus, one, {}) == {"CUDA_VISIBLE_DEVICES": "2,5"}
    assert placement_env(CPU2[:1], one, {}) == {}
    inherited = {"XLA_FLAGS": "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=8"}
    assert placement_env(CPU2, one, inherited) == {
        "XLA_FLAGS": "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=2"
    }
    shared = Settings(runs_per_device=3)
    assert placement_env(gpus[:1], shared, {}) == {
        "CUDA_VISIBLE_DEVICES": "2",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
    }
    fraction = Settings(runs_per_device=3, device_memory_fraction=0.3)
    assert placement_env(gpus[:1], fraction, {})["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.3"
    with pytest.raises(ValueError, match="at most 1"):
        Settings(runs_per_device=4, device_memory_fraction=0.3)


def test_a_run_waits_queued_in_its_place_until_its_devices_are_free(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    store = RunStore(make_sessionmaker(make_engine(url)), tmp_path / "runs")

    def submit(gpus: int) -> str:
        spec = {"resources": {"gpus": gpus, "cpus": None}}
        return store.create(spec, kind="ppo", name="r", tags=[], notes="", total_steps=1).id

    too_big, big, small = submit(3), submit(2), submit(1)
    assert store.claim_next("w", free=1, total=2) is None  # big is first and waits
    assert store.get(big).status == "queued" and store.get(small).status == "queued"
    claimed = store.claim_next("w", free=2, total=2)
    assert claimed is not None and claimed.id == big
    claimed = store.claim_next("w", free=1, total=2)
    assert claimed is not None and claimed.id == small
    assert store.claim_next("w", free=2, total=2) is None  # 3 devices: another worker's
    assert store.get(too_big).status == "queued"
