"""A run's files: checkpoints (``checkpoints/step_XXXXXXXXXX/``), videos, logs.

Every path is built from validated parts (an integer step, a stored file name) under the
run's directory and checked to stay there after resolving links; symlinks inside a run
directory are never followed or archived.
"""

from __future__ import annotations

import functools
import io
import os
import re
import shutil
import stat
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

STEP_DIR = re.compile(r"step_(\d{10})")
LOG_FILE = "run.log"


class OutsideRunDir(Exception):
    """A path that resolves outside its run's directory."""


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path
    size_bytes: int
    created_at: float


def checkpoints_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def videos_dir(run_dir: Path) -> Path:
    return run_dir / "videos"


def logs_dir(run_dir: Path) -> Path:
    return run_dir / "logs"


def inside(run_dir: Path, path: Path) -> Path:
    """``path`` if it is a regular file or directory inside ``run_dir`` (links resolved);
    raises ``OutsideRunDir`` otherwise."""
    root = run_dir.resolve()
    resolved = path.resolve()
    if path.is_symlink() or not resolved.is_relative_to(root) or resolved == root:
        raise OutsideRunDir(str(path))
    return resolved


def list_checkpoints(run_dir: Path) -> list[Checkpoint]:
    """Complete checkpoints, oldest first (half-written ones live under hidden names)."""
    directory = checkpoints_dir(run_dir)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    found = []
    for name in names:
        match = STEP_DIR.fullmatch(name)
        if match is None:
            continue
        path = directory / name
        try:
            info = path.lstat()
        except OSError:  # deleted meanwhile
            continue
        if not stat.S_ISDIR(info.st_mode):  # a link (lstat) or a file
            continue
        size = _checkpoint_size(str(path), info.st_ino, info.st_mtime_ns)
        found.append(Checkpoint(int(match.group(1)), path, size, info.st_mtime))
    return found


def find_checkpoint(run_dir: Path, step: int | None) -> Checkpoint | None:
    """The checkpoint at ``step``, or the newest when ``step`` is None."""
    checkpoints = list_checkpoints(run_dir)
    if step is None:
        return checkpoints[-1] if checkpoints else None
    return next((c for c in checkpoints if c.step == step), None)


@functools.lru_cache(maxsize=4096)
def _checkpoint_size(path: str, _inode: int, _mtime_ns: int) -> int:
    """``_tree_size`` of a complete checkpoint, once per directory: a checkpoint is written
    under a hidden name and renamed into place whole, and one replaced at the same step is
    another directory (another inode), so its size is sized once, not on every listing
    (the pollers' ``GET .../checkpoints`` walked every file of every checkpoint: the API's
    busiest handler under load)."""
    return _tree_size(Path(path))


def _tree_size(path: Path) -> int:
    """The bytes of the files under ``path``, links neither counted nor followed (a
    directory that cannot be read counts as empty, as with ``os.walk``).

    ``os.scandir``'s entries know their type without a system call: one ``lstat`` per
    file, a third of the time ``os.walk`` with ``Path.is_symlink`` and ``Path.stat`` took
    (``GET .../checkpoints`` sizes every checkpoint of the run on each request)."""
    total = 0
    pending = [str(path)]
    while pending:
        try:
            entries = os.scandir(pending.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif not entry.is_symlink():
                    total += entry.stat(follow_symlinks=False).st_size
    return total


def checkpoint_archive(run_dir: Path, checkpoint: Checkpoint) -> Path:
    """A ``.tar.gz`` of the checkpoint whose single top-level folder is ``step_X/``,
    built once and cached in ``run_dir/archives/``."""
    inside(run_dir, checkpoint.path)
    archives = run_dir / "archives"
    archives.mkdir(exist_ok=True)
    target = archives / f"{checkpoint.path.name}.tar.gz"
    if target.exists() and target.stat().st_mtime >= checkpoint.created_at:
        return target
    fd, tmp = tempfile.mkstemp(dir=archives, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            _add_tree(tar, checkpoint.path, checkpoint.path.name)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _add_tree(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    """Adds directories and regular files only: links are skipped, never followed."""
    tar.add(path, arcname=arcname, recursive=False)
    for entry in sorted(path.iterdir()):
        if entry.is_symlink():
            continue
        name = f"{arcname}/{entry.name}"
        if entry.is_dir():
            _add_tree(tar, entry, name)
        elif entry.is_file():
            tar.add(entry, arcname=name, recursive=False)


class BadArchive(ValueError):
    """A checkpoint archive that is not one folder ``step_X/`` of plain files and folders,
    or that unpacks past its size limit."""


class ArchiveTooLarge(BadArchive):
    """A checkpoint archive that unpacks past its size limit."""


def install_checkpoint(archive: Path, run_dir: Path, step: int, limit: int) -> Checkpoint:
    """Unpacks a ``checkpoint_archive`` of ``step`` into ``run_dir``'s checkpoints: into a
    hidden folder first (plain files and folders only, nothing outside ``step_X/``, at most
    ``limit`` bytes), then renamed into place, replacing a copy that was there."""
    name = f"step_{step:010d}"
    directory = checkpoints_dir(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=directory, prefix=".incoming-"))
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            members = tar.getmembers()
            if sum(m.size for m in members) > limit:
                raise ArchiveTooLarge(f"the checkpoint unpacks past {limit} bytes")
            for member in members:
                if member.name.split("/", 1)[0] != name or not (member.isfile() or member.isdir()):
                    raise BadArchive(f"unexpected archive member {member.name!r}")
            tar.extractall(staging, filter="data")
        target = directory / name
        if target.exists():  # the same checkpoint again (a retried upload)
            shutil.rmtree(target)
        os.replace(staging / name, target)
    except (tarfile.TarError, OSError) as error:
        raise BadArchive(f"not a checkpoint archive: {error}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    found = find_checkpoint(run_dir, step)
    if found is None:
        raise BadArchive(f"the archive held no checkpoint of step {step}")
    return found


def log_tail(run_dir: Path, lines: int | None) -> str:
    """The run process's output, or its last ``lines`` lines."""
    path = logs_dir(run_dir) / LOG_FILE
    try:
        inside(run_dir, path)
        with open(path, "rb") as f:
            if lines is None:
                return f.read().decode("utf-8", "replace")
            return _tail(f, lines)
    except (OSError, OutsideRunDir):
        return ""


def _tail(f: io.BufferedReader, lines: int) -> str:
    f.seek(0, os.SEEK_END)
    end = f.tell()
    block, data = 8192, b""
    while end > 0 and data.count(b"\n") <= lines:
        start = max(0, end - block)
        f.seek(start)
        data = f.read(end - start) + data
        end = start
    text = data.decode("utf-8", "replace")
    parts = text.splitlines()[-lines:] if lines else []
    return "\n".join(parts) + ("\n" if parts else "")
