"""``server.recording.reads`` without a service or JAX: the slice's bucket means and
episode marks worked out by hand and read back through its one-byte codes; the codes'
round trip within half a level; the PCA against an SVD of the same rows, and the cached
basis equal to a fresh one."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest

from server.recording import reads, storage


def _write(directory: Path, length: int = 10, units: int = 3) -> tuple[dict, dict]:
    rng = np.random.default_rng(0)
    full = {
        "pop": rng.normal(size=(length, 2, units)).astype(np.float32),
        "dones": np.zeros((length, 2), bool),
    }
    full["dones"][4, 1] = True
    specs = [
        storage.ArraySpec("pop", "activations", (units,), "float32"),
        storage.ArraySpec("dones", "dones", (), "bool"),
    ]
    writer = storage.RecordingWriter(directory, length, 2, specs)
    for t0 in range(0, length, 4):  # chunks of 4 steps (the last shorter)
        writer.write(t0, {k: v[t0 : t0 + 4] for k, v in full.items()})
    return full, writer.close(step=7, seed=1, n_envs=2, episode_length=length)


def _values(read: dict) -> np.ndarray:
    codes = np.frombuffer(base64.b64decode(read["codes"]), np.uint8)
    return reads.dequantize(codes.reshape(read["units"], read["points"]), read["min"], read["max"])


def test_a_slice_averages_buckets_of_steps_and_marks_episode_starts(tmp_path: Path) -> None:
    full, manifest = _write(tmp_path)
    read = reads.time_slice(tmp_path, manifest, "pop", 1, 1, 10, 4)
    # 9 steps in at most 4 points: stride ceil(9 / 4) = 3, points at steps 1, 4, 7.
    assert read["stride"] == 3 and read["steps"] == [1, 4, 7]
    assert (read["units"], read["points"]) == (3, 3)
    assert read["dones"] == [False, True, False]  # the reset before step 4
    means = full["pop"][1:10, 1].reshape(3, 3, 3).mean(axis=1).T  # [units][points]
    assert read["min"] == pytest.approx(means.min()) and read["max"] == pytest.approx(means.max())
    # One byte per value: within half a level, (max - min) / 254 / 2, of the mean.
    half_level = (read["max"] - read["min"]) / (2 * reads.LEVELS)
    np.testing.assert_allclose(_values(read), means, atol=half_level * 1.001)


def test_a_short_last_bucket_is_the_mean_of_its_steps(tmp_path: Path) -> None:
    full, manifest = _write(tmp_path, length=23)
    read = reads.time_slice(tmp_path, manifest, "pop", 0, 0, 23, 5)
    # stride ceil(23 / 5) = 5: points at 0, 5, 10, 15, 20; the last holds steps 20..22.
    assert read["stride"] == 5 and read["steps"] == [0, 5, 10, 15, 20]
    half_level = (read["max"] - read["min"]) / (2 * reads.LEVELS)
    np.testing.assert_allclose(
        _values(read)[:, 4], full["pop"][20:23, 0].mean(axis=0), atol=half_level * 1.001
    )


def test_codes_round_trip_within_half_a_level_and_mark_non_finite_values() -> None:
    rng = np.random.default_rng(1)
    values = rng.uniform(-3, 5, size=(40, 70))
    values[0, 0], values[1, 1], values[2, 2] = np.nan, np.inf, -np.inf
    low, high = -3.0, 5.0
    codes = reads.quantize(values, low, high)
    assert codes.dtype == np.uint8
    back = reads.dequantize(codes, low, high)
    finite = np.isfinite(values)
    assert (codes[~finite] == reads.NON_FINITE).all() and np.isnan(back[~finite]).all()
    # A level is 8 / 254; rounding to the nearest level is off by at most half of one,
    # which is under the (max - min) / 255 that a 256-colour map resolves.
    assert np.abs(back - values)[finite].max() <= 8 / 254 / 2 + 1e-12 < 8 / 255
    assert codes[finite].max() <= reads.LEVELS
    assert reads.quantize(np.array([-3.0, 5.0]), low, high).tolist() == [0, reads.LEVELS]
    flat = reads.quantize(np.full(3, 2.0), 2.0, 2.0)
    assert flat.tolist() == [0, 0, 0] and reads.dequantize(flat, 2.0, 2.0).tolist() == [2.0] * 3


def test_the_pca_matches_an_svd_and_its_cache_equals_a_fresh_basis(tmp_path: Path) -> None:
    full, manifest = _write(tmp_path, length=40, units=6)
    read = reads.pca(tmp_path, manifest, "pop", 1, 40)
    rows = full["pop"][:, 1].astype(np.float64)
    centred = rows - rows.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    sign = np.sign(vt[0][np.argmax(np.abs(vt[0]))])
    np.testing.assert_allclose(read["loadings"][0], vt[0] * sign, atol=1e-5)
    np.testing.assert_allclose(np.asarray(read["points"])[:, 0], centred @ vt[0] * sign, atol=1e-5)
    np.testing.assert_allclose(read["explained_variance"][0], s[0] ** 2 / (s**2).sum(), rtol=1e-5)

    kept = list((tmp_path / reads.CACHE).iterdir())
    assert len(kept) == 1 and kept[0].suffix == ".npz"
    cached = reads.cached_pca_basis(tmp_path, manifest, "pop", 1)
    fresh = reads.pca_basis(storage.open_array(tmp_path, manifest, "pop"), 1)
    for name in ("mean", "components", "explained"):
        np.testing.assert_array_equal(getattr(cached, name), getattr(fresh, name))
    # Another env has its own basis, not env 1's.
    other = reads.pca(tmp_path, manifest, "pop", 0, 40)
    assert other["loadings"] != read["loadings"]
    assert len(list((tmp_path / reads.CACHE).iterdir())) == 2
    # A second read of env 1 comes from the cache and says the same.
    assert reads.pca(tmp_path, manifest, "pop", 1, 40) == read
