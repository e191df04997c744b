"""The spec checker and the env catalogue, each in a child process of the API.

Judging a spec needs the library (env loading, network shapes), which imports JAX; the API
process must not. A long-lived ``SpecChecker`` process answers one check at a time over a
pipe; the env catalogue is computed once by a short-lived process and cached in the data
directory (per library version), since describing every MuJoCo Playground env takes a minute.
Both children run JAX on the CPU: they only trace shapes.
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from nnx_ppo import plugins
from server import __version__, child_processes

log = logging.getLogger("nnx_ppo.server")

CHECK_TIMEOUT_S = 120.0


class CheckerUnavailable(Exception):
    """The checker process died or did not answer in time."""


def _child_env() -> None:
    child_processes.ignore_sigint()
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ.setdefault("MUJOCO_GL", "egl")


def _checker_main(conn: Connection) -> None:
    _child_env()
    from server.spec.checkpoint_network import recording_shape
    from server.spec.spec_check import check_spec

    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        try:
            if isinstance(request, dict) and request.get("op") == "metrics":
                conn.send(("ok", _metric_keys(request["spec"])))
                continue
            if isinstance(request, dict) and request.get("op") == "recording":
                conn.send(("ok", recording_shape(request["spec"], request["checkpoint"])))
                continue
            if isinstance(request, dict):  # {"op": "preset", "name", "variant"}
                conn.send(("ok", _preset_answer(request["name"], request["variant"])))
                continue
            spec, teacher_network, resume_checkpoint = request
            conn.send(("ok", check_spec(spec, teacher_network, resume_checkpoint)))
        except Exception as error:
            conn.send(("error", f"{type(error).__name__}: {error}"))


def _metric_keys(spec: dict[str, Any]) -> list[str] | None:
    from server.spec.spec_check import metric_keys

    return metric_keys(spec)


def _preset_answer(name: str, variant: str) -> dict[str, Any]:
    from server.spec.spec_check import preset_answer

    try:
        return {"preset": preset_answer(name, variant)}
    except ValueError as error:
        return {"error": str(error)}


def _catalogue_main(path: str, include_playground: bool) -> None:
    _child_env()
    from server.spec.spec_check import describe_envs

    tmp = f"{path}.tmp"
    entries = []
    installed = plugins.fingerprint()
    for entry in describe_envs(include_playground):
        entries.append(entry)
        with open(tmp, "w") as f:  # partial results, so that built-ins show at once
            json.dump(_cache(False, installed, entries), f)
        os.replace(tmp, path)
    with open(tmp, "w") as f:
        json.dump(_cache(True, installed, entries), f)
    os.replace(tmp, path)


def _cache(complete: bool, installed: list[str], items: list[Any]) -> dict[str, Any]:
    return {"version": __version__, "plugins": installed, "complete": complete, "items": items}


class SpecChecker:
    """Runs ``spec_check.check_spec`` in a child process; thread-safe, one check at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: mp.process.BaseProcess | None = None
        self._conn: Connection | None = None

    def _ensure_started(self) -> Connection:
        if self._process is None or not self._process.is_alive() or self._conn is None:
            ctx = mp.get_context("spawn")
            parent, child = ctx.Pipe()
            process = ctx.Process(
                target=_checker_main, args=(child,), daemon=True, name="nnx-ppo-spec-checker"
            )
            child_processes.start(process)
            child.close()
            self._process, self._conn = process, parent
        return self._conn

    def start(self) -> None:
        with self._lock:
            self._ensure_started()

    def check(
        self,
        spec: dict[str, Any],
        teacher_network: dict[str, Any] | None,
        resume_checkpoint: str | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """``spec_check.check_spec`` in the checker process: the field errors and the run's
        total steps."""
        with self._lock:
            conn = self._ensure_started()
            try:
                conn.send((spec, teacher_network, resume_checkpoint))
                if not conn.poll(CHECK_TIMEOUT_S):
                    self._kill()
                    raise CheckerUnavailable("the spec check did not finish in time")
                status, answer = conn.recv()
            except (EOFError, OSError, BrokenPipeError) as error:
                self._kill()
                raise CheckerUnavailable(f"the spec checker stopped: {error}") from error
        if status != "ok":
            raise CheckerUnavailable(f"the spec check failed: {answer}")
        errors, total_steps = answer
        return list(errors), int(total_steps)

    def preset(self, name: str, variant: str) -> dict[str, Any]:
        """``spec_check.preset_answer`` in the checker process.

        Raises:
            ValueError: the library refused ``name`` or ``variant`` (the message says why).
            CheckerUnavailable: the checker died or did not answer in time.
        """
        answer = self._ask({"op": "preset", "name": name, "variant": variant})
        if "error" in answer:
            raise ValueError(answer["error"])
        preset: dict[str, Any] = answer["preset"]
        return preset

    def metric_keys(self, spec: dict[str, Any]) -> list[str] | None:
        """``spec_check.metric_keys`` of a valid stored spec, in the checker process.

        Raises:
            CheckerUnavailable: the checker died or did not answer in time.
        """
        answer = self._ask({"op": "metrics", "spec": spec})
        return None if answer is None else [str(k) for k in answer]

    def recording_shape(self, spec: dict[str, Any], checkpoint: str) -> dict[str, Any]:
        """The units per population that a recording of ``checkpoint`` (of a run with
        ``spec``) records, and whether the env renders: ``{"units": {key: n},
        "renderable": bool}``, in the checker process.

        Raises:
            ValueError: the env or the network could not be built (the message says why).
            CheckerUnavailable: the checker died or did not answer in time.
        """
        answer: dict[str, Any] = self._ask(
            {"op": "recording", "spec": spec, "checkpoint": checkpoint}
        )
        if "error" in answer:
            raise ValueError(answer["error"])
        return answer

    def _ask(self, request: Any) -> Any:
        with self._lock:
            conn = self._ensure_started()
            try:
                conn.send(request)
                if not conn.poll(CHECK_TIMEOUT_S):
                    self._kill()
                    raise CheckerUnavailable("the checker did not answer in time")
                status, answer = conn.recv()
            except (EOFError, OSError, BrokenPipeError) as error:
                self._kill()
                raise CheckerUnavailable(f"the spec checker stopped: {error}") from error
        if status != "ok":
            raise CheckerUnavailable(f"the checker failed: {answer}")
        return answer

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join(5)
        self._process, self._conn = None, None

    def stop(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            if self._process is not None:
                self._process.join(2)
            self._kill()


class EnvCatalogue:
    """The env list for ``GET /api/envs``, read from a cache file that a child process
    fills (built-in envs first, then the plugin envs, then MuJoCo Playground's); the cache
    is kept while the library version and the installed plugins are the same."""

    def __init__(self, data_dir: Path, include_playground: bool = True):
        self.path = data_dir / ("envs.json" if include_playground else "envs-builtin.json")
        self.include_playground = include_playground
        self._process: mp.process.BaseProcess | None = None

    def start(self) -> None:
        cached = self._read()
        if (
            cached is not None
            and cached.get("complete")
            and cached.get("version") == __version__
            and cached.get("plugins") == plugins.fingerprint()
        ):
            return
        ctx = mp.get_context("spawn")
        self._process = ctx.Process(
            target=_catalogue_main,
            args=(str(self.path), self.include_playground),
            daemon=True,
            name="nnx-ppo-env-catalogue",
        )
        child_processes.start(self._process)

    def stop(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._process.kill()
            self._process.join(5)

    def _read(self) -> dict[str, Any] | None:
        try:
            with open(self.path) as f:
                data = json.load(f)
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def entries(self) -> tuple[list[dict[str, Any]], bool]:
        data = self._read() or {}
        return list(data.get("items", [])), bool(data.get("complete", False))

    def names(self) -> set[str]:
        return {entry["name"] for entry in self.entries()[0]}
