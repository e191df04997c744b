"""The Ray executor: each claimed run becomes a Ray actor that asks for the run's resources
(``resources.gpus``/``cpus``; default one GPU where the cluster has GPUs, else one CPU), and
Ray places it. On its node the actor starts the same run process as the local worker does
(``run_process.main``), with a scratch data directory of that node and an ``HttpReporter``:
no disk or database is shared with the API; the run token issued at the claim is all it
holds. ``pip install nnx-ppo[ray]``.

The supervisor (the Ray driver) still decides which run starts; the actor's end decides
the run's outcome: the run process's own as with the local executor, ``Failed`` when the
actor's call raised, and ``Lost`` (requeued) when Ray lost it (its node or worker died) or
its process went silent. The actors are detached (named ``nnx-ppo-run-{id}-{attempt}``):
a supervisor that stops or dies leaves its runs going, and the next supervisor adopts the
runs of a dead worker whose actors are alive (the run processes retry their reports while
the API is away) and requeues the others. A requeued run is claimed again and resumes,
wherever Ray places it, from its newest checkpoint, which the run process downloads from
the API. ``resources.node`` prefers a node (soft affinity: another node when that one is
gone).

Environment of a node (set on ``ray start``): ``NNX_PPO_NODE_DIR``, the node's scratch
directory (default ``$TMPDIR/nnx-ppo-node``), and ``NNX_PPO_JAX_CACHE``, its compilation
cache (default inside the scratch directory).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.settings import Settings
from server.store import run_reports
from server.store.models import RunRow
from server.store.run_store import RunNotFound, RunStore
from server.worker import run_process
from server.worker.devices import Placement
from server.worker.executor import Ended, Failed, Lost, RunOutcome
from server.worker.http_reporter import RemoteAccess

log = logging.getLogger("nnx_ppo.worker")

PLACING_S = 60.0
"""A task that has not reported from a node this long after submission no longer holds
back the next claim (Ray may be waiting for resources)."""
NAMESPACE = "nnx-ppo"
NODE_SECRETS = ("api_token", "database_url")
"""Settings that never travel to a node."""


@dataclass
class RayRun:
    run_id: str
    ref: Any
    """The task's ``ray.ObjectRef``."""
    submitted: float
    placed: bool = False
    actor: Any = None
    """The run's ``RunActor`` handle."""


def execute_on_node(run_id: str, settings_json: str, remote: RemoteAccess) -> RunOutcome:
    """The body of a run's Ray task, on the node Ray chose: the run process, as a child
    (``spawn``; it dies with this task's worker), and its outcome."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    scratch = Path(
        os.environ.get("NNX_PPO_NODE_DIR") or Path(tempfile.gettempdir()) / "nnx-ppo-node"
    )
    cache = os.environ.get("NNX_PPO_JAX_CACHE")
    fields = Settings.model_validate_json(settings_json).model_dump(exclude={"jax_cache"})
    settings = Settings(**{**fields, "data_dir": scratch, "jax_cache": cache})
    settings.ensure_dirs()
    node = f"{node_id} ({socket.gethostname()})"
    remote = RemoteAccess(remote.api_url, remote.token, node, remote.heartbeat_s)
    gpus = ray.get_gpu_ids()
    devices = tuple(f"gpu:{i}" for i in range(len(gpus))) or ("cpu:0",)
    ctx = mp.get_context("spawn")
    parent, child_end = ctx.Pipe(duplex=False)
    process = ctx.Process(
        target=run_process.main,
        args=(run_id, settings.model_dump_json(), Placement(devices), child_end, remote),
        name=f"nnx-ppo-run-{run_id}",
    )
    process.start()
    child_end.close()
    outcome: RunOutcome | None = None
    while process.is_alive() or parent.poll():
        try:
            if parent.poll(0.5):
                outcome = parent.recv()
        except (EOFError, OSError):
            process.join(5)
            break
    process.join()
    _upload_log(remote, run_id, settings.run_dir(run_id))
    if outcome is not None:
        return outcome
    return Failed(f"the run process on node {node} exited with code {process.exitcode}")


def _upload_log(remote: RemoteAccess, run_id: str, run_dir: Path) -> None:
    """The run process's output file, for ``GET /api/runs/{id}/logs`` (its lines were
    streamed as they came; this is the whole file, C libraries' output included)."""
    from server.store import artifacts
    from server.worker.http_reporter import HttpReporter

    reporter = HttpReporter(remote.api_url, run_id, remote.token, retry_for_s=30)
    try:
        reporter.upload_log(artifacts.logs_dir(run_dir) / artifacts.LOG_FILE)
    except Exception as error:  # the outcome matters more than the log
        log.warning("run %s: its log was not uploaded: %s", run_id, error)
    finally:
        reporter.close()


class RunActor:
    """A run's process on its node, as a detached actor: ``execute`` runs it and keeps its
    outcome; ``outcome`` (queued behind ``execute``: an actor takes one call at a time)
    returns it to whichever supervisor asks, the one that started it or one that adopted
    it."""

    def __init__(self, run_id: str, settings_json: str, remote: RemoteAccess):
        self.args = (run_id, settings_json, remote)
        self.result: RunOutcome | None = None

    def execute(self) -> RunOutcome:
        self.result = execute_on_node(*self.args)
        return self.result

    def outcome(self) -> RunOutcome | None:
        return self.result


def actor_name(run_id: str, attempt: int) -> str:
    return f"nnx-ppo-run-{run_id}-{attempt}"


class RayExecutor:
    """Runs as detached Ray actors, placed by Ray (see the module doc)."""

    def __init__(self, settings: Settings, store: RunStore):
        import ray

        self.settings = settings
        self.store = store
        self.ray: Any = ray
        self.tasks: dict[str, RayRun] = {}
        self._actor = ray.remote(max_restarts=0, max_task_retries=0)(RunActor)
        self._node_settings = settings.model_dump_json(exclude=set(NODE_SECRETS))

    def open(self) -> None:
        self.ray.init(
            address=self.settings.ray_address,
            namespace=NAMESPACE,
            log_to_driver=False,
            configure_logging=False,
        )

    def close(self) -> None:
        self.ray.shutdown()

    def device_names(self) -> list[str]:
        return ["ray:0"]

    # -- the cluster --------------------------------------------------------------------

    def cluster(self) -> list[dict[str, Any]]:
        """The cluster's nodes: id, address, alive, head, total and free resources."""
        from ray._private import state as ray_state

        state: Any = ray_state
        free: dict[str, dict[str, float]] = {}
        try:
            free = state.available_resources_per_node()
        except Exception:  # a private API: the totals still say what the cluster has
            log.debug("free resources per node unavailable", exc_info=True)
        nodes = []
        for node in self.ray.nodes():
            node_id = node["NodeID"]
            total = _public_resources(node.get("Resources") or {})
            available = _public_resources(free.get(node_id, {}))
            nodes.append(
                {
                    "node_id": node_id,
                    "address": node.get("NodeManagerAddress"),
                    "alive": bool(node.get("Alive")),
                    "head": "node:__internal_head__" in (node.get("Resources") or {}),
                    "total": total,
                    # Ray leaves out what is used up: 0, not absent
                    "free": {k: available.get(k, 0.0) for k in total},
                }
            )
        return nodes

    def _has_gpus(self) -> bool:
        return float(self.ray.cluster_resources().get("GPU", 0)) > 0

    def describe(self) -> dict[str, Any]:
        """The worker row names the executor; its devices are the cluster's nodes."""
        return {"executor": "ray", "backend": "ray", "cluster": self.cluster()}

    def usage(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        return [], self.cluster()

    # -- runs ---------------------------------------------------------------------------

    def free_slots(self) -> int:
        """1 when the cluster has a free slot for a run and the run submitted before has
        been placed (Ray queues what does not fit; claiming more would mark runs running
        that wait in Ray's queue), else 0."""
        now = time.monotonic()
        self._note_placed()
        if any(not t.placed and now - t.submitted < PLACING_S for t in self.tasks.values()):
            return 0
        free = self.ray.available_resources()
        return int(float(free.get("GPU" if self._has_gpus() else "CPU", 0)) >= 1)

    def total_slots(self) -> int | None:
        return None

    def start(self, run: RunRow) -> None:
        resources = run.spec.get("resources") or {}
        options: dict[str, Any] = {
            "num_cpus": resources.get("cpus") or 1,
            "num_gpus": resources.get("gpus") or (1 if self._has_gpus() else 0),
            "name": actor_name(run.id, run.attempts),
            "namespace": NAMESPACE,
            "lifetime": "detached",
        }
        if resources.get("node"):
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
                resources["node"], soft=True
            )
        token = run_reports.issue_token(self.store, run.id)
        access = RemoteAccess(
            self.settings.api_url, token, heartbeat_s=self.settings.heartbeat_seconds
        )
        actor: Any = self._actor.options(**options).remote(run.id, self._node_settings, access)
        self.tasks[run.id] = RayRun(run.id, actor.execute.remote(), time.monotonic(), actor=actor)
        log.info("run %s submitted to Ray (%s)", run.id, options)

    def _note_placed(self) -> None:
        for task in self.tasks.values():
            if not task.placed:
                try:
                    task.placed = self.store.get(task.run_id).node is not None
                except RunNotFound:
                    task.placed = True

    def poll(self) -> list[Ended]:
        if not self.tasks:
            return []
        refs = [t.ref for t in self.tasks.values()]
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        done = {id(ref) for ref in ready}
        ended: list[Ended] = []
        for run_id, task in list(self.tasks.items()):
            if id(task.ref) in done:
                del self.tasks[run_id]
                ended.append((run_id, self._outcome(task)))
            elif self._silent(task):
                del self.tasks[run_id]
                self._kill(task)
                ended.append((run_id, Lost("its run process on a Ray node stopped reporting")))
        return ended

    def running(self) -> int:
        return len(self.tasks)

    def _kill(self, task: RayRun) -> None:
        """Ends the run's actor (and so its run process), which frees its resources."""
        try:
            self.ray.kill(task.actor, no_restart=True)
        except Exception as error:  # already gone with its node
            log.debug("run %s: kill: %s", task.run_id, error)

    def adopt_orphans(self, worker_id: str) -> None:
        """Adopts the runs of dead workers whose actors are alive."""
        for run in self.store.orphans(self.settings.heartbeat_timeout, worker_id):
            try:
                actor = self.ray.get_actor(actor_name(run.id, run.attempts), namespace=NAMESPACE)
            except ValueError:  # no such actor: it died with its node, or never was
                continue
            if self.store.adopt(run.id, worker_id, run.worker_id):
                ref = actor.outcome.remote()
                self.tasks[run.id] = RayRun(run.id, ref, time.monotonic(), True, actor)
                log.info("run %s: adopted its Ray actor from worker %s", run.id, run.worker_id)

    def _silent(self, task: RayRun) -> bool:
        if not task.placed:
            return False
        try:
            reported = self.store.get(task.run_id).reported_at
        except RunNotFound:
            return False
        limit = max(30.0, 3 * self.settings.heartbeat_timeout)
        return reported is not None and time.time() - reported > limit

    def _outcome(self, task: RayRun) -> RunOutcome:
        """The run process's outcome, or what became of its Ray task."""
        from ray import exceptions

        try:
            outcome = self.ray.get(task.ref)
        except exceptions.RayTaskError as error:  # the task itself raised
            self._kill(task)
            return Failed(f"its Ray task failed: {error}")
        except exceptions.RayError as error:  # Ray lost it: node, worker or raylet died
            self._kill(task)
            reason = f"its Ray task was lost ({type(error).__name__})"
            log.info("run %s: %s: %s", task.run_id, reason, error)
            return Lost(reason)
        self._kill(task)  # detached: it would hold its resources until killed
        log.info("run %s ended on Ray: %s", task.run_id, outcome)
        if not isinstance(outcome, RunOutcome):  # an actor of an older version
            return Failed(f"its Ray actor returned {outcome!r}")
        return outcome

    def stop_warm(self) -> None:
        """The actors go on, for the next supervisor to adopt (their run processes report
        to the API meanwhile)."""
        log.info("leaving %d run(s) on Ray for the next supervisor", len(self.tasks))
        self.tasks.clear()

    def stop_cold(self) -> list[Ended]:
        """The actors are killed and their runs requeued (they resume from their newest
        uploaded checkpoint)."""
        ended: list[Ended] = []
        for run_id, task in list(self.tasks.items()):
            self._kill(task)
            ended.append((run_id, Lost("stopped with the worker")))
        self.tasks.clear()
        return ended


def _public_resources(resources: dict[str, Any]) -> dict[str, float]:
    """Resources without Ray's internal per-node markers (``node:...``) and memory noise."""
    return {
        k: round(float(v), 3)
        for k, v in resources.items()
        if not k.startswith("node:") and k not in ("object_store_memory",)
    }
