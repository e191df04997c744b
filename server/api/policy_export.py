"""A checkpoint's policy as an ONNX or StableHLO file (``nnx_ppo.policy.exporting``).

Exporting needs the library, which imports JAX; the API process must not. Each export runs
in a spawned child process (JAX on the CPU: it only traces), one at a time, and its file is
cached next to the checkpoint archives (``archives/step_XXXXXXXXXX.{onnx,stablehlo}``),
rebuilt only when the checkpoint is newer. A checkpoint that does not record how its
network was built (written before nnx-ppo recorded it) is rebuilt from the run's spec.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from server import child_processes
from server.store.artifacts import Checkpoint, inside

FORMATS = {"onnx": ".onnx", "stablehlo": ".stablehlo"}
"""Each export format with its file name ending."""
EXPORT_TIMEOUT_S = 300.0
_one_at_a_time = threading.Lock()


class PolicyExportFailed(Exception):
    """The child could not export the policy; ``missing_extra`` when the cause is that the
    ``export`` extra is not installed, ``unsupported`` when the format cannot express the
    network (the request's fault, not the service's)."""

    def __init__(self, message: str, *, missing_extra: bool = False, unsupported: bool = False):
        super().__init__(message)
        self.missing_extra = missing_extra
        self.unsupported = unsupported


def policy_file(
    run_dir: Path,
    checkpoint: Checkpoint,
    format: str,
    spec: dict[str, Any],
    timeout_s: float = EXPORT_TIMEOUT_S,
) -> Path:
    """The policy file of ``checkpoint`` in ``format`` (a key of ``FORMATS``), exported
    on first use.

    Raises:
        PolicyExportFailed: If the export fails or takes longer than ``timeout_s``.
        OutsideRunDir: If the checkpoint's path leaves the run's directory.
    """
    inside(run_dir, checkpoint.path)
    archives = run_dir / "archives"
    target = archives / f"{checkpoint.path.name}{FORMATS[format]}"
    with _one_at_a_time:  # exports are seconds of CPU each: never several at once
        if target.exists() and target.stat().st_mtime >= checkpoint.created_at:
            return target
        archives.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=archives, prefix=".", suffix=".tmp")
        os.close(fd)
        try:
            _export_in_child(str(checkpoint.path), format, tmp, spec, timeout_s)
            os.replace(tmp, target)
        finally:
            Path(tmp).unlink(missing_ok=True)
    return target


def _export_in_child(
    checkpoint: str, format: str, out: str, spec: dict[str, Any], timeout_s: float
) -> None:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    process = ctx.Process(
        target=_export_main,
        args=(child, checkpoint, format, out, spec),
        daemon=True,
        name="nnx-ppo-policy-export",
    )
    child_processes.start(process)
    child.close()
    try:
        if not parent.poll(timeout_s):
            raise PolicyExportFailed(f"the export did not finish within {timeout_s:g} s")
        outcome, message = parent.recv()
    except EOFError:
        raise PolicyExportFailed("the export process died") from None
    finally:
        parent.close()
        if process.is_alive():
            process.kill()
        process.join(5)
    if outcome != "ok":
        raise PolicyExportFailed(
            message,
            missing_extra=outcome == "missing_extra",
            unsupported=outcome == "unsupported",
        )


def _export_main(conn: Connection, checkpoint: str, format: str, out: str, spec: Any) -> None:
    child_processes.ignore_sigint()
    os.environ["JAX_PLATFORMS"] = "cpu"
    try:
        from nnx_ppo import policy
        from nnx_ppo.algorithms.checkpointing import read_network_recipe

        recorded = read_network_recipe(checkpoint) is not None
        loaded = policy.load(checkpoint, networks=None if recorded else _network_of(spec))
        policy.export(loaded, out, format)
        conn.send(("ok", None))
    except Exception as error:
        outcomes = {"MissingExtra": "missing_extra", "UnsupportedExport": "unsupported"}
        outcome = outcomes.get(type(error).__name__, "error")  # nnx_ppo.policy's errors
        conn.send((outcome, f"{type(error).__name__}: {error}"))
    finally:
        conn.close()


def _network_of(spec: dict[str, Any]) -> Any:
    """The network of a run's spec, as the run process builds it (a template)."""
    from nnx_ppo import envs
    from nnx_ppo.presets import make_networks
    from server.spec.spec_check import spec_network_fields

    env = envs.load(spec["env"]["name"], spec["env"].get("overrides") or {})
    fields = spec_network_fields(spec, env)
    return make_networks(fields, env.observation_size, env.action_size, 0)
