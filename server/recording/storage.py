"""A recording's files: writing them, opening them, the download (NumPy only, no JAX).
The dashboard's reads of them (a slice, a projection) are ``reads``'.

A stored recording is a folder ``recordings/<id>/`` of its run's directory:

- ``manifest.json``: what ``Manifest`` describes (arrays, units per population,
  checkpoint step, env, seed, video);
- ``arrays/NNN.npy``: one ``.npy`` per array, ``[T, N, ...]`` (time, env, ...): the
  activations of each population or module path (``[T, N, units]``, float32), ``dones``
  (``[T, N]`` bool, pre-step: True at a step whose env was reset because its episode ended
  at the step before), ``obs`` (``obs/<key>`` for a dict observation), ``actions`` and
  ``rewards`` (``rewards/<stream>`` for a dict reward) of the same steps;
- ``video.mp4`` (when asked for): env 0, one frame per step, frame ``t`` the state that
  step ``t`` acted on;
- ``cache/`` (made by the reads, later): what ``reads`` computed once and keeps (a
  recording never changes once published).

The job writes into a hidden staging folder (``.staging-*``) and the runner renames it into
place once complete, so a listed recording is never partial. The arrays are written chunk
by chunk into memory-mapped ``.npy`` files (``RecordingWriter``): no more than one chunk of
steps is in host memory. The download (``npz_file``) is built from them on first request:
an uncompressed ``.npz`` whose members are named by the arrays' names, which
``np.load(path, allow_pickle=False)`` reads.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "nnx-ppo-recording/1"
MANIFEST = "manifest.json"
VIDEO = "video.mp4"
NPZ = "recording.npz"
EXTRA_KINDS = ("dones", "obs", "actions", "rewards")
"""The arrays beside the activations (each named by its kind, or ``kind/<key>``)."""
DONES_MEANING = (
    "dones[t, n] is True when env n was reset before step t because its episode ended at "
    "step t - 1 (the network's state was reset with it); dones[0] is all False"
)


class RecordingUnreadable(Exception):
    """A stored recording's files are missing or do not match its manifest."""


def recordings_dir(run_dir: Path) -> Path:
    return run_dir / "recordings"


def recording_dir(run_dir: Path, recording_id: int) -> Path:
    return recordings_dir(run_dir) / str(int(recording_id))


def staging_dir(run_dir: Path, recording_id: int) -> Path:
    """A new, empty hidden folder for a recording being written."""
    parent = recordings_dir(run_dir)
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=parent, prefix=f".staging-{int(recording_id)}-"))


def activation_name(key: str) -> str:
    """An activation's array name: its key, unless that is taken by an extra array."""
    reserved = key in EXTRA_KINDS or key.split("/", 1)[0] in EXTRA_KINDS
    return f"activations/{key}" if reserved else key


@dataclass(frozen=True)
class ArraySpec:
    """One array of a recording: ``[T, N, *tail]`` of ``dtype``; ``kind`` is
    ``activations`` or one of ``EXTRA_KINDS``."""

    name: str
    kind: str
    tail: tuple[int, ...]
    dtype: str


class RecordingWriter:
    """Writes a recording's arrays chunk by chunk into ``.npy`` files under ``directory``
    (memory-mapped: a chunk goes to disk as it is written)."""

    def __init__(self, directory: Path, length: int, n_envs: int, specs: list[ArraySpec]):
        self.directory = directory
        self.length = length
        self.n_envs = n_envs
        self.specs = {spec.name: spec for spec in specs}
        (directory / "arrays").mkdir(parents=True, exist_ok=True)
        self.files = {spec.name: f"arrays/{i:03d}.npy" for i, spec in enumerate(specs)}
        self._arrays = {
            spec.name: np.lib.format.open_memmap(
                directory / self.files[spec.name],
                mode="w+",
                dtype=np.dtype(spec.dtype),
                shape=(length, n_envs, *spec.tail),
            )
            for spec in specs
        }

    def write(self, t0: int, chunk: Mapping[str, np.ndarray]) -> None:
        """Writes ``chunk`` (``[c, N, ...]`` per array name, every array) at steps
        ``t0 .. t0 + c``."""
        for name, values in chunk.items():
            target = self._arrays[name]
            target[t0 : t0 + len(values)] = values
            target.flush()

    def close(self, **fields: Any) -> dict[str, Any]:
        """Writes the manifest (``fields`` plus the arrays and units); returns it."""
        arrays = {}
        for name, spec in self.specs.items():
            arrays[name] = {
                "file": self.files[name],
                "kind": spec.kind,
                "shape": [self.length, self.n_envs, *spec.tail],
                "dtype": spec.dtype,
            }
        self._arrays.clear()  # closes the maps
        populations = {
            name: math.prod(spec.tail)
            for name, spec in self.specs.items()
            if spec.kind == "activations"
        }
        manifest = {
            "format": FORMAT,
            **fields,
            "arrays": arrays,
            "populations": populations,
            "dones": DONES_MEANING,
        }
        tmp = self.directory / f".{MANIFEST}.tmp"
        tmp.write_text(json.dumps(manifest, indent=1))
        os.replace(tmp, self.directory / MANIFEST)
        return manifest


def tree_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def publish(staging: Path, target: Path) -> int:
    """Renames a complete staging folder into place; returns its size in bytes."""
    if target.exists():  # a folder of a recording whose row is gone (a reused id)
        shutil.rmtree(target)
    os.replace(staging, target)
    return tree_size(target)


def read_manifest(directory: Path) -> dict[str, Any]:
    try:
        manifest: dict[str, Any] = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError) as error:
        raise RecordingUnreadable(f"the recording's manifest is unreadable: {error}") from None
    return manifest


def open_array(directory: Path, manifest: Mapping[str, Any], name: str) -> np.ndarray:
    """The array ``name``, memory-mapped read-only (``KeyError`` for an unknown name)."""
    entry = manifest["arrays"][name]
    try:
        array: np.ndarray = np.load(directory / entry["file"], mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as error:
        raise RecordingUnreadable(f"the array {name!r} is unreadable: {error}") from None
    if list(array.shape) != list(entry["shape"]):
        raise RecordingUnreadable(f"the array {name!r} is {array.shape}, not {entry['shape']}")
    return array


def npz_file(directory: Path) -> Path:
    """The recording as one ``.npz`` (members ``<name>.npy``, uncompressed), built on first
    use and kept; written under a temporary name and renamed into place."""
    target = directory / NPZ
    if target.exists():
        return target
    manifest = read_manifest(directory)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".", suffix=".npz.tmp")
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
            for name, entry in manifest["arrays"].items():
                z.write(directory / entry["file"], arcname=f"{name}.npy")
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target
