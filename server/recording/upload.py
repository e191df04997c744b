"""A recording made in a script, uploaded by its tracked run
(``nnx_ppo.tracking.TrackedRun.upload_recording``), checked and stored as a recording the
service made is (``storage``): listed with the run's, shown in its Recordings tab,
downloaded as the same ``.npz`` (NumPy only, no JAX).

The upload is a ``.npz`` read with ``allow_pickle=False`` whose members are:

- ``activations/<key>``: ``[T, N, ...]`` numbers, one per population or module path (at
  least one; stored as float32 under ``storage.activation_name(key)``);
- ``dones``: ``[T, N]`` bool, the pre-step mask (``storage.DONES_MEANING``);
- optionally ``obs``, ``actions``, ``rewards`` (or ``obs/<key>``, ``rewards/<key>``):
  ``[T, N, ...]`` numbers of the same steps;
- ``meta.json``: ``{"step": int, "seed": int, "env": {"name": str, "overrides": {...}}}``
  (the checkpoint step it records, the env resets' seed, the env).

Anything else (another member, an array of another ``T`` or ``N``, an object array) is
refused with ``BadRecording`` naming it; nothing is published then.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from server.recording.storage import (
    EXTRA_KINDS,
    ArraySpec,
    RecordingWriter,
    activation_name,
    recordings_dir,
)

UPLOAD_NAME = re.compile(r"[0-9a-f]{32}")
"""An upload's name (its route's last part): chosen by the script, one per recording."""
META = "meta.json"
ACTIVATIONS = "activations/"
KEY = re.compile(r"[A-Za-z0-9_./:\-\[\]]{1,200}")
"""A population's or module path's key, or an extra array's ``<key>``."""


class BadRecording(ValueError):
    """The upload is not a recording (the message says what is wrong)."""


def stage_upload(
    upload: Path, run_dir: Path, run_id: str, max_bytes: int
) -> tuple[Path, dict[str, Any]]:
    """Checks ``upload`` and writes it as a stored recording's files into a new hidden
    staging folder of the run's recordings; returns the folder and its manifest.

    Raises:
        BadRecording: The upload is not a recording, or its activations exceed
            ``max_bytes`` (as float32).
    """
    meta = _meta(upload)
    try:
        npz = np.load(upload, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise BadRecording(f"not a .npz file: {error}") from None
    with npz:
        names = [name for name in npz.files if name != META]
        specs, length, n_envs = _specs(npz, names, max_bytes)
        recordings_dir(run_dir).mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=recordings_dir(run_dir), prefix=".staging-upload-"))
        try:
            writer = RecordingWriter(staging, length, n_envs, [spec for _, spec in specs])
            for member, spec in specs:  # one array in host memory at a time
                writer.write(0, {spec.name: np.asarray(npz[member], dtype=spec.dtype)})
            manifest = writer.close(
                run_id=run_id,
                step=meta["step"],
                env=meta["env"],
                seed=meta["seed"],
                n_envs=n_envs,
                episode_length=length,
                chunk_steps=length,
                video=None,
                source="uploaded",
            )
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return staging, manifest


def _meta(upload: Path) -> dict[str, Any]:
    try:
        with zipfile.ZipFile(upload) as archive:
            raw = archive.read(META) if META in archive.namelist() else b"{}"
    except (OSError, zipfile.BadZipFile) as error:
        raise BadRecording(f"not a .npz file: {error}") from None
    try:
        meta = json.loads(raw)
    except ValueError as error:
        raise BadRecording(f"{META} is not JSON: {error}") from None
    if not isinstance(meta, dict):
        raise BadRecording(f"{META} must be a JSON object")
    step, seed = meta.get("step"), meta.get("seed", 0)
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < 2**62:
        raise BadRecording(f"{META}: step must be an integer >= 0 (the checkpoint's), got {step!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**62:
        raise BadRecording(f"{META}: seed must be an integer >= 0, got {seed!r}")
    env = meta.get("env", {})
    name = env.get("name") if isinstance(env, dict) else None
    overrides = env.get("overrides", {}) if isinstance(env, dict) else None
    if not isinstance(name, str | None) or not isinstance(overrides, dict):
        raise BadRecording(f"{META}: env must be {{'name': str, 'overrides': {{...}}}}")
    return {"step": step, "seed": seed, "env": {"name": name or "", "overrides": overrides}}


def _specs(
    npz: Any, names: list[str], max_bytes: int
) -> tuple[list[tuple[str, ArraySpec]], int, int]:
    """``(member, ArraySpec)`` of each array to store, ``T`` and ``N``."""
    if "dones" not in names:
        raise BadRecording("the recording has no dones ([T, N] bool)")
    dones = _header(npz, "dones")
    if len(dones[0]) != 2 or dones[1] != np.dtype(bool):
        raise BadRecording(f"dones must be [T, N] bool, got {list(dones[0])} {dones[1]}")
    length, n_envs = dones[0]
    if length < 1 or n_envs < 1:
        raise BadRecording(f"dones is {list(dones[0])}: T and N must be at least 1")
    specs: list[tuple[str, ArraySpec]] = []
    activation_bytes = 0
    for member in sorted(names):
        shape, dtype = _header(npz, member)
        if member.startswith(ACTIVATIONS):
            key, kind = member[len(ACTIVATIONS) :], "activations"
        else:
            kind, _, key = member.partition("/")
            if kind not in EXTRA_KINDS or (kind == "dones" and key):
                allowed = ", ".join(f"{k}[/<key>]" for k in EXTRA_KINDS[1:])
                raise BadRecording(
                    f"{member!r} is not a recording's array: activations/<key>, dones, {allowed}"
                )
        if key and not KEY.fullmatch(key):
            raise BadRecording(f"{member!r}: its key must match {KEY.pattern}")
        if kind == "activations" and not key:
            raise BadRecording("an activations/<key> array needs its key")
        if tuple(shape[:2]) != (length, n_envs):
            raise BadRecording(
                f"{member!r} is {list(shape)}: it must be [T={length}, N={n_envs}, ...]"
            )
        if not (np.issubdtype(dtype, np.number) or dtype == np.dtype(bool)):
            raise BadRecording(f"{member!r} is of {dtype}: numbers or bools only")
        tail = tuple(int(n) for n in shape[2:])
        if kind == "activations":
            activation_bytes += length * n_envs * math.prod(tail) * 4
            specs.append((member, ArraySpec(activation_name(key), kind, tail, "float32")))
        else:
            specs.append((member, ArraySpec(member, kind, tail, dtype.name)))
    if not any(spec.kind == "activations" for _, spec in specs):
        raise BadRecording("the recording has no activations/<key> array")
    if activation_bytes > max_bytes:
        raise BadRecording(
            f"its activations are {activation_bytes} bytes as float32, above the limit of "
            f"{max_bytes} (recording_max_bytes)"
        )
    return specs, int(length), int(n_envs)


def _header(npz: Any, member: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """A member's shape and dtype, read from its ``.npy`` header (not its data)."""
    fmt = np.lib.format
    try:
        with npz.zip.open(f"{member}.npy") as f:
            version = fmt.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = fmt.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = fmt.read_array_header_2_0(f)
            else:
                raise ValueError(f".npy format {version}: 1.0 or 2.0 only")
    except (KeyError, OSError, ValueError) as error:
        raise BadRecording(f"{member!r} is not a .npy array: {error}") from None
    if dtype.hasobject:
        raise BadRecording(f"{member!r} holds Python objects")
    return tuple(shape), dtype
