"""The recording job: a spawned child process of the recording runner that records one
recording into a staging folder and answers over a pipe.

Order of events: set the JAX environment (before JAX is imported), load the env and the
checkpoint's network, trace the activations' shapes, then per chunk of ``C`` steps: run the
jitted chunk (``rollout.chunk_function``), write its arrays to the memory-mapped files
(``storage.RecordingWriter``) and, for a video, render env 0's states and pipe the frames
to ffmpeg; finally write the manifest and answer ``("ok", manifest)``, or ``("error",
message)`` on any failure. The child dies with its parent; it never publishes anything
(the runner renames the staging folder once the answer is ``ok``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from server import child_processes
from server.spec.checkpoint_network import activation_units, load_env, load_network, recordable

DEFAULT_RENDER = {"height": 240, "width": 320}


@dataclass(frozen=True)
class JobRequest:
    """Everything the child needs (picklable)."""

    run_id: str
    checkpoint: str
    """The checkpoint's folder."""
    step: int
    spec: dict[str, Any]
    """The run's spec (its env; its network for a checkpoint without a recipe)."""
    n_envs: int
    episode_length: int
    seed: int
    video: bool
    out_dir: str
    chunk_bytes: int
    """The host memory one chunk of steps may take (sets ``C``)."""
    jax_platforms: str
    """``JAX_PLATFORMS`` of the child ('' leaves JAX's choice)."""


def main(conn: Connection, request: JobRequest) -> None:
    """Entry point of the child (see the module doc)."""
    child_processes.die_with_parent()
    child_processes.ignore_sigint()
    if request.jax_platforms:
        os.environ["JAX_PLATFORMS"] = request.jax_platforms
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        manifest = record(request, lambda done: conn.send(("progress", done)))
        conn.send(("ok", manifest))
    except Exception as error:
        conn.send(("error", f"{type(error).__name__}: {error}"))
    finally:
        conn.close()


def chunk_steps(per_step_bytes: int, chunk_bytes: int, length: int) -> int:
    """Steps per chunk: as many as fit ``chunk_bytes``, at least 1, at most ``length``."""
    return max(1, min(length, chunk_bytes // max(1, per_step_bytes)))


def record(request: JobRequest, progress: Callable[[int], None]) -> dict[str, Any]:
    """Records into ``request.out_dir``; returns the manifest (host loop, see the module
    doc)."""
    import jax
    import jax.numpy as jnp

    from server.recording import rollout
    from server.recording.storage import VIDEO, ArraySpec, RecordingWriter, activation_name

    env = load_env(request.spec)
    if request.video and not callable(getattr(env, "render", None)):
        raise ValueError(f"the env {request.spec['env']['name']} cannot be rendered")
    network = load_network(request.checkpoint, request.spec, env)
    units = activation_units(env, network)
    obs = jax.eval_shape(lambda k: env.reset(k).obs, jax.random.key(0))
    obs_units = sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(obs))
    per_step = request.n_envs * 4 * (sum(units.values()) + obs_units + env.action_size + 4)
    steps = chunk_steps(per_step, request.chunk_bytes, request.episode_length)
    recorder = recordable(network)
    key = jax.random.key(request.seed)
    carry = rollout.initial_carry(env, recorder, request.n_envs, key)
    run = rollout.chunk_function(env, recorder, steps, key, frames=request.video)
    out = Path(request.out_dir)
    activations = {activation_name(k) for k in units}
    writer: RecordingWriter | None = None
    video = _video_stream(out / VIDEO, env) if request.video else None
    try:
        for t0 in range(0, request.episode_length, steps):
            carry, output = run(carry, jnp.asarray(t0, jnp.int32))
            valid = min(steps, request.episode_length - t0)
            arrays = {k: v[:valid] for k, v in rollout.host_arrays(output).items()}
            if writer is None:
                specs = [
                    ArraySpec(k, _kind(k, activations), tuple(v.shape[2:]), str(v.dtype))
                    for k, v in arrays.items()
                ]
                writer = RecordingWriter(out, request.episode_length, request.n_envs, specs)
            writer.write(t0, arrays)
            if video is not None:
                video.write(_render(env, output.frames, valid))
            progress(t0 + valid)
        if video is not None:
            video.close()
    except BaseException:
        if video is not None:
            video.abort()
        raise
    assert writer is not None  # episode_length >= 1
    return writer.close(
        run_id=request.run_id,
        step=request.step,
        env={
            "name": request.spec["env"]["name"],
            "overrides": request.spec["env"].get("overrides") or {},
        },
        seed=request.seed,
        n_envs=request.n_envs,
        episode_length=request.episode_length,
        chunk_steps=steps,
        video={"file": VIDEO, "env": 0, "frames": video.frames, "fps": video.fps}
        if video
        else None,
    )


def _kind(name: str, activations: set[str]) -> str:
    return "activations" if name in activations else name.split("/", 1)[0]


def _video_stream(path: Path, env: Any) -> Any:
    from server.recording.video_stream import Mp4Stream

    try:
        dt = float(env.dt)
    except (AttributeError, TypeError, ValueError):
        dt = 0.0
    fps = 1.0 / dt if dt > 0 else 30.0
    return Mp4Stream(path, round(fps, 3))


def _render(env: Any, states: Any, valid: int) -> Any:
    """Frames ``[valid, H, W, 3]`` of env 0's states (one per step)."""
    import jax
    import numpy as np

    host = jax.device_get(states)
    trajectory = [jax.tree.map(lambda x, t=t: x[t], host) for t in range(valid)]
    frames = env.render(trajectory, **DEFAULT_RENDER)
    return np.stack([np.asarray(f) for f in frames]).astype(np.uint8, copy=False)
