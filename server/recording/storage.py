"""A recording's files, and the reads the API serves from them (NumPy only, no JAX).

A stored recording is a folder ``recordings/<id>/`` of its run's directory:

- ``manifest.json``: what ``Manifest`` describes (arrays, units per population,
  checkpoint step, env, seed, video);
- ``arrays/NNN.npy``: one ``.npy`` per array, ``[T, N, ...]`` (time, env, ...): the
  activations of each population or module path (``[T, N, units]``, float32), ``dones``
  (``[T, N]`` bool, pre-step: True at a step whose env was reset because its episode ended
  at the step before), ``obs`` (``obs/<key>`` for a dict observation), ``actions`` and
  ``rewards`` (``rewards/<stream>`` for a dict reward) of the same steps;
- ``video.mp4`` (when asked for): env 0, one frame per step, frame ``t`` the state that
  step ``t`` acted on.

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


def _buckets(t0: int, t1: int, max_points: int) -> tuple[int, int]:
    """``(stride, points)``: steps ``t0 .. t1`` in ``points`` buckets of ``stride`` steps
    (the last may be shorter)."""
    stride = max(1, math.ceil((t1 - t0) / max_points))
    return stride, math.ceil((t1 - t0) / stride)


def time_slice(
    directory: Path,
    manifest: Mapping[str, Any],
    name: str,
    env: int,
    t0: int,
    t1: int,
    max_points: int,
) -> dict[str, Any]:
    """One env's activations of one population over steps ``[t0, t1)``, at most
    ``max_points`` time points: each the mean of ``stride`` consecutive steps; ``dones``
    of a point is whether any of its steps starts a new episode.

    Returns:
        ``{"stride", "steps": [first step of each point], "values": [units][points],
        "dones": [points], "min", "max"}``.
    """
    array = open_array(directory, manifest, name)
    dones = open_array(directory, manifest, "dones")
    stride, points = _buckets(t0, t1, max_points)
    units = int(math.prod(array.shape[2:]))
    values = np.empty((points, units), np.float32)
    marks = np.zeros(points, bool)
    block = max(1, (1 << 20) // max(1, units * stride)) * stride  # ~4 MiB of steps at a time
    for start in range(t0, t1, block):
        end = min(t1, start + block)
        part = np.asarray(array[start:end, env], np.float32).reshape(end - start, units)
        flags = np.asarray(dones[start:end, env], bool)
        first = (start - t0) // stride
        for i, s in enumerate(range(0, end - start, stride)):
            values[first + i] = part[s : s + stride].mean(axis=0)
            marks[first + i] = bool(flags[s : s + stride].any())
    finite = values[np.isfinite(values)]
    return {
        "stride": stride,
        "steps": list(range(t0, t1, stride)),
        "values": values.T.tolist(),
        "dones": marks.tolist(),
        "min": float(finite.min()) if finite.size else 0.0,
        "max": float(finite.max()) if finite.size else 0.0,
    }


def pca(
    directory: Path, manifest: Mapping[str, Any], name: str, env: int, max_points: int
) -> dict[str, Any]:
    """The first two principal components of one env's activations of one population over
    the whole recording (the covariance of units accumulated over blocks of steps), and the
    trajectory projected onto them (at most ``max_points`` points, each the mean of
    ``stride`` steps).

    Returns:
        ``{"stride", "steps", "points": [[pc1, pc2] per point], "explained_variance":
        [2 ratios], "loadings": [[units] for pc1, pc2]}`` (a component that the data lacks,
        e.g. a second one of a single unit, is zeros).
    """
    array = open_array(directory, manifest, name)
    length = array.shape[0]
    units = int(math.prod(array.shape[2:]))
    block = max(1, (1 << 20) // max(1, units))

    def rows(start: int) -> np.ndarray:
        end = min(length, start + block)
        return np.asarray(array[start:end, env], np.float64).reshape(end - start, units)

    total = np.zeros(units)
    for start in range(0, length, block):
        total += rows(start).sum(axis=0)
    mean = total / length
    scatter = np.zeros((units, units))
    for start in range(0, length, block):
        centred = rows(start) - mean
        scatter += centred.T @ centred
    scatter = np.nan_to_num(scatter)
    eigenvalues, eigenvectors = np.linalg.eigh(scatter)
    order = np.argsort(eigenvalues)[::-1][:2]
    components = np.zeros((2, units))
    components[: len(order)] = eigenvectors[:, order].T
    for c in components:  # a sign convention: the largest loading is positive
        if c.size and c[np.argmax(np.abs(c))] < 0:
            c *= -1
    variance = np.clip(eigenvalues, 0, None)
    explained = np.zeros(2)
    if variance.sum() > 0:
        explained[: len(order)] = variance[order] / variance.sum()
    stride, points = _buckets(0, length, max_points)
    projected = np.empty((points, 2))
    for i, s in enumerate(range(0, length, stride)):
        part = np.asarray(array[s : s + stride, env], np.float64).reshape(-1, units)
        projected[i] = (part.mean(axis=0) - mean) @ components.T
    return {
        "stride": stride,
        "steps": list(range(0, length, stride)),
        "points": np.nan_to_num(projected).tolist(),
        "explained_variance": explained.tolist(),
        "loadings": components.tolist(),
    }
