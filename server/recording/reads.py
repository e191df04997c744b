"""The dashboard's reads of a stored recording: one env and one population at a time, at
the resolution it is drawn at (NumPy only, no JAX).

- ``time_slice``: a heatmap's worth, ``[units][points]`` of bucket means, quantized to one
  byte per value over the population's range (a heatmap has 255 colour levels; the JSON
  of 512 units x 950 points is 0.65 MB as base64 codes, 5 MB as decimal floats);
- ``pca``: the first two principal components of the env's whole trajectory and the
  trajectory projected onto them. The components are computed once per (population, env)
  and kept in the recording's ``cache/`` folder: a published recording never changes.

Both read the env's rows of the memory-mapped ``[T, N, units]`` array and nothing else,
block by block (``BLOCK_BYTES`` of steps at a time).
"""

from __future__ import annotations

import base64
import math
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from server.recording.blas import one_blas_thread
from server.recording.storage import open_array

LEVELS = 254
"""Codes ``0 .. LEVELS`` span ``[min, max]`` evenly; ``NON_FINITE`` marks a NaN or inf."""
NON_FINITE = 255
BLOCK_BYTES = 4 << 20
CACHE = "cache"
PCA_CACHE_VERSION = 1


def quantize(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """``values`` as ``uint8`` codes: ``round((v - low) / (high - low) * LEVELS)``, clipped
    to ``0 .. LEVELS`` (0 for a flat range), ``NON_FINITE`` for a non-finite value. A finite
    value in ``[low, high]`` decodes to within ``(high - low) / (2 * LEVELS)`` of itself."""
    finite = np.isfinite(values)
    scale = (high - low) / LEVELS if high > low else 1.0
    codes = np.rint((np.where(finite, values, low) - low) / scale)
    out = np.clip(codes, 0, LEVELS).astype(np.uint8)
    out[~finite] = NON_FINITE
    return out


def dequantize(codes: np.ndarray, low: float, high: float) -> np.ndarray:
    """The values of ``quantize``'s codes (NaN for ``NON_FINITE``), as float64."""
    scale = (high - low) / LEVELS if high > low else 0.0
    values = low + codes.astype(np.float64) * scale
    values[codes == NON_FINITE] = np.nan
    return values


def buckets(t0: int, t1: int, max_points: int) -> tuple[int, int]:
    """``(stride, points)``: steps ``t0 .. t1`` in ``points`` buckets of ``stride`` steps
    (the last may be shorter)."""
    stride = max(1, math.ceil((t1 - t0) / max_points))
    return stride, math.ceil((t1 - t0) / stride)


def _env_rows(array: np.ndarray, env: int, t0: int, t1: int, multiple: int) -> Iterator[np.ndarray]:
    """``array[t0:t1, env]`` as ``[steps, units]`` float32 blocks of about ``BLOCK_BYTES``
    (each a multiple of ``multiple`` steps but the last): only this env's rows are read."""
    units = int(math.prod(array.shape[2:]))
    block = max(1, BLOCK_BYTES // (4 * max(1, units * multiple))) * multiple
    for start in range(t0, t1, block):
        end = min(t1, start + block)
        yield np.asarray(array[start:end, env], np.float32).reshape(end - start, units)


def _bucket_means(array: np.ndarray, env: int, t0: int, t1: int, stride: int) -> np.ndarray:
    """``[points, units]`` float32: the mean of each ``stride`` steps of env ``env``."""
    points = math.ceil((t1 - t0) / stride)
    units = int(math.prod(array.shape[2:]))
    means = np.empty((points, units), np.float32)
    at = 0
    for rows in _env_rows(array, env, t0, t1, stride):
        whole = len(rows) // stride
        if whole:
            shaped = rows[: whole * stride].reshape(whole, stride, units)
            means[at : at + whole] = shaped.mean(axis=1, dtype=np.float64)
        if len(rows) % stride:
            means[at + whole] = rows[whole * stride :].mean(axis=0, dtype=np.float64)
        at += math.ceil(len(rows) / stride)
    return means


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
    ``max_points`` time points: each the mean of ``stride`` consecutive steps, quantized
    (``quantize``) over the finite range of all of them; ``dones`` of a point is whether
    any of its steps starts a new episode.

    Returns:
        ``{"stride", "steps": [first step of each point], "units", "points", "codes":
        base64 of uint8 [units][points], "dones": [points], "min", "max"}``.
    """
    array = open_array(directory, manifest, name)
    dones = open_array(directory, manifest, "dones")
    stride, points = buckets(t0, t1, max_points)
    values = _bucket_means(array, env, t0, t1, stride)  # [points, units]
    flags = np.asarray(dones[t0:t1, env], bool)
    marks = np.zeros(points * stride, bool)
    marks[: len(flags)] = flags
    finite = values[np.isfinite(values)]
    low = float(finite.min()) if finite.size else 0.0
    high = float(finite.max()) if finite.size else 0.0
    codes = quantize(values.T, low, high)  # [units, points], C order
    return {
        "stride": stride,
        "steps": list(range(t0, t1, stride)),
        "units": int(values.shape[1]),
        "points": points,
        "codes": base64.b64encode(codes.tobytes()).decode("ascii"),
        "dones": marks.reshape(points, stride).any(axis=1).tolist(),
        "min": low,
        "max": high,
    }


@dataclass(frozen=True)
class PcaBasis:
    """One env's first two principal components of one population: ``mean`` ``[units]``,
    ``components`` ``[2, units]`` (unit vectors, the largest loading positive; zeros for a
    component the data lacks), ``explained`` ``[2]`` (ratios of the total variance)."""

    mean: np.ndarray
    components: np.ndarray
    explained: np.ndarray


def pca_basis(array: np.ndarray, env: int) -> PcaBasis:
    """The covariance of units over all steps of env ``env`` (float64, accumulated over
    blocks of float32 rows) and its two leading eigenvectors, BLAS on this thread."""
    length = array.shape[0]
    units = int(math.prod(array.shape[2:]))
    with one_blas_thread():
        total = np.zeros(units)
        for rows in _env_rows(array, env, 0, length, 1):
            total += rows.sum(axis=0, dtype=np.float64)
        mean = total / length
        scatter = np.zeros((units, units))
        mean32 = mean.astype(np.float32)
        for rows in _env_rows(array, env, 0, length, 1):
            centred = rows - mean32
            scatter += (centred.T @ centred).astype(np.float64)
        eigenvalues, eigenvectors = np.linalg.eigh(np.nan_to_num(scatter))
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
    return PcaBasis(mean, components, explained)


def _cache_path(directory: Path, manifest: Mapping[str, Any], name: str, env: int) -> Path:
    stem = Path(manifest["arrays"][name]["file"]).stem  # the array's file: a safe name
    return directory / CACHE / f"pca{PCA_CACHE_VERSION}-{stem}-env{int(env)}.npz"


def cached_pca_basis(directory: Path, manifest: Mapping[str, Any], name: str, env: int) -> PcaBasis:
    """``pca_basis`` of the stored array, from the recording's cache when there, else
    computed and kept (written under a temporary name and renamed into place; a folder
    that cannot be written to only means no cache)."""
    path = _cache_path(directory, manifest, name, env)
    try:
        with np.load(path, allow_pickle=False) as kept:
            return PcaBasis(kept["mean"], kept["components"], kept["explained"])
    except (OSError, ValueError, KeyError):
        pass
    basis = pca_basis(open_array(directory, manifest, name), env)
    try:
        path.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".npz.tmp")
        with os.fdopen(fd, "wb") as out:
            np.savez(out, mean=basis.mean, components=basis.components, explained=basis.explained)
        os.replace(tmp, path)
    except OSError:
        pass
    return basis


def pca(
    directory: Path, manifest: Mapping[str, Any], name: str, env: int, max_points: int
) -> dict[str, Any]:
    """The first two principal components of one env's activations of one population over
    the whole recording (``cached_pca_basis``), and the trajectory projected onto them (at
    most ``max_points`` points, each the mean of ``stride`` steps).

    Returns:
        ``{"stride", "steps", "points": [[pc1, pc2] per point], "explained_variance":
        [2 ratios], "loadings": [[units] for pc1, pc2]}`` (a component that the data lacks,
        e.g. a second one of a single unit, is zeros).
    """
    basis = cached_pca_basis(directory, manifest, name, env)
    array = open_array(directory, manifest, name)
    length = array.shape[0]
    stride, _ = buckets(0, length, max_points)
    means = _bucket_means(array, env, 0, length, stride).astype(np.float64)
    with one_blas_thread():
        projected = (means - basis.mean) @ basis.components.T
    return {
        "stride": stride,
        "steps": list(range(0, length, stride)),
        "points": np.nan_to_num(projected).tolist(),
        "explained_variance": basis.explained.tolist(),
        "loadings": basis.components.tolist(),
    }
