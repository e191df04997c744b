"""The GPU check's longer steps: the environment probe, the service on the GPU, and learning.

Each function takes its time limit in seconds and returns a JSON-serialisable dict; the
caller (:mod:`bench.gpu_check`) records it, or the exception, and moves on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.runs import REPO_ROOT

PROBE = r"""
import importlib, importlib.metadata as md, importlib.util, json, shutil
out = {"versions": {}, "apis": {}, "imports": {}}
for name in ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "flax", "optax",
             "orbax-checkpoint", "numpy", "mujoco", "mujoco-mjx", "playground", "brax",
             "fastapi", "sqlalchemy", "pydantic", "warp-lang"):
    try:
        out["versions"][name] = md.version(name)
    except md.PackageNotFoundError:
        out["versions"][name] = None
import jax
out["backend"] = jax.default_backend()
out["devices"] = [str(d) for d in jax.devices()]
# What nnx-ppo and Brax 0.14.2 call that JAX has removed or may remove (bench/RESULTS.md).
for api in ("pmap", "device_put_replicated", "device_put_sharded", "shard_map", "export",
            "tree.map", "sharding.NamedSharding", "sharding.SingleDeviceSharding",
            "tree_util.tree_flatten_with_path", "experimental.io_callback"):
    obj, ok = jax, True
    for part in api.split("."):
        try:
            obj = getattr(obj, part)
        except Exception:
            ok = False
            break
    out["apis"]["jax." + api] = ok
for module in ("nnx_ppo", "nnx_ppo.algorithms.ppo", "server.app", "mujoco.mjx",
               "mujoco_playground", "brax.training.agents.ppo.train", "bench.brax_runner"):
    try:
        importlib.import_module(module)
        out["imports"][module] = "ok"
    except Exception as error:
        out["imports"][module] = f"{type(error).__name__}: {error}"
try:
    import imageio_ffmpeg
    out["ffmpeg"] = imageio_ffmpeg.get_ffmpeg_exe()
except Exception as error:
    out["ffmpeg"] = f"none: {type(error).__name__}: {error}"
from bench.jax_setup import install_jax_shims
out["jax_shims_installed"] = install_jax_shims()
print(json.dumps(out))
"""


def environment(timeout_s: float) -> dict[str, Any]:
    """Versions, JAX devices, which JAX APIs exist, and that every module imports."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if done.returncode != 0:
        raise RuntimeError(f"probe failed ({done.returncode}): {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def service(timeout_s: float, env: Mapping[str, str]) -> dict[str, Any]:
    """``nnx-ppo serve`` on the GPU: a run submitted over HTTP, its stream followed to the
    end, its checkpoint and its (EGL-rendered) video downloaded."""
    import httpx

    from bench.service_harness import Service, cartpole_spec

    deadline = time.monotonic() + timeout_s
    total = 51_200  # 10 iterations of 256 envs x 20 steps
    spec = cartpole_spec(total, eval_every=total)
    ffmpeg = _ffmpeg()
    if ffmpeg is not None:  # without one the run's video writer would fail the run
        spec["config"]["video"] = {"enabled": True, "every_steps": total, "episode_length": 100}
    with tempfile.TemporaryDirectory(prefix="nnx-ppo-gpu-service-") as tmp:
        root = Path(tmp)
        with Service(root / "data", jax_cache=root / "jax", env=dict(env)) as svc:
            started = time.monotonic()
            # The submit checks the spec by loading the env (a Playground import, seconds to
            # a minute on a loaded CPU): the step's own limit, not the harness's 60 s.
            svc.client.timeout = httpx.Timeout(max(60.0, deadline - time.monotonic()))
            run = svc.submit(spec)
            events = svc.events(run["id"], timeout=max(1.0, deadline - time.monotonic()))
            final = svc.wait_for(run["id"], timeout=max(1.0, deadline - time.monotonic()))
            out: dict[str, Any] = {
                "status": final["status"],
                "run_seconds": round(time.monotonic() - started, 1),
                "stream_events": len(events),
                "stream_kinds": sorted({str(e.get("kind", e.get("type"))) for e in events}),
                "ffmpeg": ffmpeg or "none: video not requested",
            }
            if final["status"] != "succeeded":
                out["log_tail"] = svc.log()[-2000:]
                return out
            checkpoints = svc.client.get(f"/api/runs/{run['id']}/checkpoints").json()["items"]
            videos = svc.client.get(f"/api/runs/{run['id']}/videos").json()["items"]
            out["checkpoint_bytes"] = [len(svc.client.get(c["url"]).content) for c in checkpoints]
            out["video_bytes"] = [len(svc.client.get(v["url"]).content) for v in videos]
            out["video_is_mp4"] = [svc.client.get(v["url"]).content[4:8] == b"ftyp" for v in videos]
            return out


def _ffmpeg() -> str | None:
    """The ffmpeg the service's video writer would use, or None (the bundle carries none)."""
    try:
        import imageio_ffmpeg

        return str(imageio_ffmpeg.get_ffmpeg_exe())
    except (ImportError, RuntimeError):
        return None


def learning(
    remaining: Callable[[], float],
    steps: int,
    num_evals: int,
    run_timeout_s: float,
    record: Callable[[dict[str, Any]], None],
    envs: Sequence[str] | None = None,
    min_run_s: float = 30.0,
) -> dict[str, Any]:
    """Ours and Brax at Playground's own (GPU) settings, one seed each, env by env (``envs``,
    default the learning table's five), while ``remaining()`` leaves ``min_run_s`` for a
    run; ``record`` is called after every run."""
    from bench.brax_runner import run_brax_ppo_subprocess
    from bench.learning_envs import playground_settings
    from bench.nnx_runner import run_nnx_ppo_subprocess
    from bench.settings import LEARNING_TABLE_ENVS

    runners = {"nnx_ppo": run_nnx_ppo_subprocess, "brax": run_brax_ppo_subprocess}
    out: dict[str, Any] = {"steps": steps, "runs": []}
    for env in LEARNING_TABLE_ENVS if envs is None else envs:
        settings = playground_settings(env, steps, num_evals, variant="gpu")
        for library, runner in runners.items():
            limit = min(run_timeout_s, remaining())
            if limit < min_run_s:
                out["stopped"] = f"out of time before {env} {library}"
                return out
            entry: dict[str, Any] = {"env": env, "library": library}
            try:
                result = runner(settings, timeout_s=limit)
                entry.update(
                    final_eval_reward=result["final_eval_reward"],
                    env_steps_per_second=result["env_steps_per_second"],
                    compile_seconds=result["compile_seconds"],
                    total_seconds=result["total_seconds"],
                    curve=[(p["step"], p["eval_reward"]) for p in result["curve"]],
                )
            except subprocess.TimeoutExpired:
                entry["error"] = f"timed out after {limit:.0f} s"
            except subprocess.CalledProcessError as error:
                entry["error"] = f"exit {error.returncode}"
            out["runs"].append(entry)
            record(out)
    return out
