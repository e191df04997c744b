"""``server.store.artifacts.list_checkpoints``: complete checkpoints only, each sized by
the files inside it, links neither counted nor followed."""

from __future__ import annotations

from pathlib import Path

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
