"""``server.store.artifacts.list_checkpoints``: complete checkpoints only, each sized by
the files inside it, links neither counted nor followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from server.store import artifacts
from server.store.artifacts import list_checkpoints


def test_checkpoint_sizes_count_the_files_inside_and_no_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "big").write_bytes(b"x" * 1000)
    (outside / "dir" / "big").write_bytes(b"x" * 1000)
    step = tmp_path / "run" / "checkpoints" / "step_0000000010"
    (step / "networks" / "d").mkdir(parents=True)
    (step / "metadata.pkl").write_bytes(b"abc")
    (step / "networks" / "d" / "chunk").write_bytes(b"12345")
    (step / "networks" / "empty").write_bytes(b"")
    (step / "file_link").symlink_to(outside / "big")
    (step / "networks" / "dir_link").symlink_to(outside / "dir")
    half_written = tmp_path / "run" / "checkpoints" / ".step_0000000020.tmp"
    half_written.mkdir()
    (half_written / "metadata.pkl").write_bytes(b"abc")

    (checkpoint,) = list_checkpoints(tmp_path / "run")

    assert checkpoint.step == 10 and checkpoint.path == step
    # metadata.pkl 3 + chunk 5 + empty 0 = 8; neither link's 1000 bytes.
    assert checkpoint.size_bytes == 8


def test_a_run_without_checkpoints_lists_none(tmp_path: Path) -> None:
    assert list_checkpoints(tmp_path / "run") == []


def test_a_checkpoint_is_sized_once_and_again_when_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    walked: list[Path] = []
    tree_size = artifacts._tree_size

    def counting(path: Path) -> int:
        walked.append(path)
        return tree_size(path)

    monkeypatch.setattr(artifacts, "_tree_size", counting)
    checkpoints = tmp_path / "run" / "checkpoints"
    for step, size in ((10, 3), (20, 4)):
        (checkpoints / f"step_{step:010d}").mkdir(parents=True)
        (checkpoints / f"step_{step:010d}" / "a").write_bytes(b"x" * size)
    assert [c.size_bytes for c in list_checkpoints(tmp_path / "run")] == [3, 4]
    assert [c.size_bytes for c in list_checkpoints(tmp_path / "run")] == [3, 4]
    assert len(walked) == 2  # the second listing sized nothing
    # Step 20 saved again: written under a hidden name, renamed over the old one's.
    replacement = checkpoints / ".step_0000000020.tmp"
    replacement.mkdir()
    (replacement / "a").write_bytes(b"x" * 9)
    os.rename(checkpoints / "step_0000000020", checkpoints / ".old")
    os.rename(replacement, checkpoints / "step_0000000020")
    assert [c.size_bytes for c in list_checkpoints(tmp_path / "run")] == [3, 9]
    assert walked[2:] == [checkpoints / "step_0000000020"]
