"""What a run process does, once JAX is imported: build the env, networks and config from
the run's spec, resume from a checkpoint when there is one, train with the reporter's
callbacks, and decide the outcome.

The checkpoint to start from: the run's own newest complete checkpoint (a run that was
interrupted and requeued), else the spec's ``resume_from``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from nnx_ppo import catalogue, envs
from nnx_ppo.algorithms.config import DistillationTrainConfig, TrainConfig, VideoData
from nnx_ppo.algorithms.matmul_precision import describe_precision, explicit_matmul_precision
from nnx_ppo.algorithms.program_cache import ProgramCache
from nnx_ppo.algorithms.registry import algorithm_for
from nnx_ppo.algorithms.teacher import load_teacher
from nnx_ppo.algorithms.training import NonFiniteError
from nnx_ppo.algorithms.video import encode_mp4
from nnx_ppo.envs.randomization import randomizer
from nnx_ppo.networks.precision import DEFAULT_PRECISION
from nnx_ppo.presets import make_networks
from nnx_ppo.utils import enable_compilation_cache
from server.schemas import NetworkSpec
from server.settings import Settings
from server.spec.spec_check import make_config, network_fields
from server.store import artifacts
from server.worker.compile_clock import CompileClock
from server.worker.devices import Placement
from server.worker.executor import Failed, RunOutcome, Stopped, StopReason, Succeeded
from server.worker.reporter import Reporter
from server.worker.run_progress import RunProgress
from server.worker.stop_signal import StopSignal
from server.worker.system_metrics import SystemMetricsThread

PLACEMENT_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "XLA_FLAGS",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
)
"""The variables that place a run process, named in its log."""


class RunExecution:
    def __init__(
        self,
        settings: Settings,
        run_id: str,
        reporter: Reporter,
        stop: StopSignal,
        placement: Placement | None = None,
    ):
        self.settings = settings
        self.placement = placement or Placement(("cpu:0",))
        self.run_id = run_id
        self.reporter = reporter
        self.stop = stop
        self.spec: dict[str, Any] = reporter.run_spec(run_id)
        self.run_dir = settings.run_dir(run_id)
        self.checkpoints = artifacts.checkpoints_dir(self.run_dir)
        self._save_now: Callable[[Any, int], None] = lambda _state, _step: None
        self.stop_reason: StopReason | None = None

    # -- the run ------------------------------------------------------------------------

    def execute(self) -> RunOutcome:
        system = SystemMetricsThread(self.reporter.attach, self.settings.system_metrics_seconds)
        system.start()
        try:
            with explicit_matmul_precision():  # everything the run compiles, whatever the device
                return self._execute()
        finally:
            system.stop()

    def _execute(self) -> RunOutcome:
        enable_compilation_cache(str(self.settings.compile_cache))
        self.compile_clock = CompileClock()
        self.first_logged = False
        log = self.reporter.log
        log(
            f"run {self.run_id}: {self.spec['kind']} on {self.spec['env']['name']}, "
            f"JAX {jax.__version__} on {jax.default_backend()} ({jax.devices()[0]})"
        )
        self._log_placement()
        log(describe_precision(self.spec["network"].get("precision") or DEFAULT_PRECISION))
        config = self._with_devices(make_config(self.spec["kind"], self.spec.get("config") or {}))
        algorithm = algorithm_for(config)
        loop = algorithm.loop_config(config)
        progress = RunProgress(self.reporter.phase, log, loop.total_steps)
        self.progress = progress
        progress.phase("compiling")
        env_spec = self.spec["env"]
        env = envs.load(env_spec["name"], env_spec.get("overrides") or {})
        randomization_fn = self._randomizer()
        network_spec = network_fields(NetworkSpec(**self.spec["network"]).factory_fields(), env)
        networks = make_networks(network_spec, env.observation_size, env.action_size, config.seed)
        start = self._start_checkpoint()
        callbacks = {
            "randomization_fn": randomization_fn,
            "log_fn": self._log_fn,
            "checkpoint_fn": self._checkpoint_fn(config),
            "should_stop": self._should_stop,
            "phase_fn": progress.phase,
        }
        if config.video.enabled:
            callbacks["video_fn"] = self._video_fn
        started = time.monotonic()
        initial: Any = None
        try:
            teacher, teacher_network = (
                self._teacher(env) if algorithm.needs_teacher else (None, None)
            )
            if start is not None:
                initial = algorithm.load_state(str(start), env, networks, config, teacher)
                self._resuming(start, int(initial.steps_taken))
            # Metrics stored after the start by an earlier attempt are of a lost state.
            self.reporter.rewind(0 if initial is None else int(initial.steps_taken))
            log("compiling and training (the first iteration includes the compile)")
            algorithm.train(
                env,
                networks,
                config,
                teacher=teacher,
                initial_state=initial,
                program_cache=self._program_cache(network_spec, teacher_network),
                **callbacks,
            )
        except NonFiniteError as error:  # the library's guard: metrics up to it are logged
            self.reporter.flush()
            log(f"stopped: diverged: {error}")
            return Failed(f"diverged: {error}")
        progress.chunk_done()  # the last chunk's line (should_stop is not asked after it)
        seconds = time.monotonic() - started
        self.reporter.flush()  # everything reported is stored before the outcome
        if self.stop_reason is not None:
            log(f"stopped ({self.stop_reason.value}) after {seconds:.1f} s")
            return Stopped(self.stop_reason)
        log(f"finished in {seconds:.1f} s")
        return Succeeded()

    def _resuming(self, start: Path, step: int) -> None:
        self.reporter.log(f"resuming from {start} (step {step})")
        self.progress.resume(step)

    def _log_placement(self) -> None:
        """One log line with the run's devices and the environment that pins them, as this
        process sees it (the line tests and users read)."""
        env = " ".join(f"{k}={os.environ[k]}" for k in PLACEMENT_VARIABLES if k in os.environ)
        self.reporter.log(
            f"placement: devices {','.join(self.placement.devices)}; JAX sees "
            f"{jax.device_count()} device(s); {env or 'no placement variables'}"
        )
        self.reporter.log(f"priority: niceness {os.getpriority(os.PRIO_PROCESS, 0)}")

    def _with_devices(self, config: Any) -> Any:
        """The config with ``devices`` set to the run's device count, where the library's
        config has that field (data-parallel training over a mesh of the devices)."""
        names = {f.name for f in dataclasses.fields(config)}
        if "devices" not in names:
            if self.placement.count > 1:
                self.reporter.log(
                    f"this library version trains on one device; {self.placement.count} "
                    "are assigned"
                )
            return config
        return dataclasses.replace(config, devices=self.placement.count)

    def _program_cache(
        self, network_spec: dict[str, Any], teacher_network: dict[str, Any] | None = None
    ) -> ProgramCache:
        """The lowered programs of this run's configuration, stored next to JAX's compilation
        cache: keyed by the env (name, overrides, Menagerie folder), the network spec and a
        distillation's teacher network spec here, by the config, shapes and versions in the
        library (a teacher's weights are an argument of the program, not part of it)."""
        env_spec = self.spec["env"]
        identity: dict[str, Any] = {
            "env": {"name": env_spec["name"], "overrides": env_spec.get("overrides") or {}},
            "menagerie": str(catalogue.menagerie_root(env_spec["name"])),
            "network": network_spec,
        }
        if env_spec.get("randomize"):  # absent otherwise: earlier runs' programs still serve
            identity["env"]["randomize"] = True
        if teacher_network is not None:
            identity["teacher_network"] = teacher_network
        directory = self.settings.compile_cache / "programs"
        return ProgramCache(directory, identity, log=self.reporter.log)

    def _randomizer(self) -> Any:
        """MuJoCo Playground's domain randomizer for the env with ``env.randomize``, else
        None."""
        name = self.spec["env"]["name"]
        if not self.spec["env"].get("randomize"):
            return None
        fn = randomizer(name)
        if fn is None:  # the spec check refuses this; a stored spec may predate it
            raise ValueError(f"env.randomize: {name!r} has no domain randomizer")
        self.reporter.log(f"domain randomization: MuJoCo Playground's randomizer for {name}")
        return fn

    def _start_checkpoint(self) -> Path | None:
        own = self.reporter.checkpoint_input(self.run_id, None, self.run_dir)
        if own is not None:
            return own.path
        ref = self.spec.get("resume_from")
        if ref is None:
            return None
        source = self.reporter.checkpoint_input(
            ref["run_id"], ref.get("step"), self.settings.run_dir(ref["run_id"])
        )
        if source is None:
            raise ValueError(f"resume_from: run {ref['run_id']} has no such checkpoint any more")
        return source.path

    def _teacher(self, env: Any) -> tuple[Any, dict[str, Any]]:
        """The teacher network, loaded from its checkpoint, and its network spec."""
        ref = self.spec["teacher"]
        teacher_id = ref["run_id"]
        teacher_spec = self.reporter.run_spec(teacher_id)
        checkpoint = self.reporter.checkpoint_input(
            teacher_id, ref.get("step"), self.settings.run_dir(teacher_id)
        )
        if checkpoint is None:
            raise ValueError(f"teacher: run {teacher_id} has no such checkpoint any more")
        network = network_fields(NetworkSpec(**teacher_spec["network"]).factory_fields(), env)
        self.reporter.log(f"teacher: run {teacher_id}, checkpoint step {checkpoint.step}")
        teacher = load_teacher(str(checkpoint.path), network, env.observation_size, env.action_size)
        return teacher, network

    # -- callbacks ----------------------------------------------------------------------

    def _log_fn(self, metrics: dict[str, Any], step: int) -> None:
        if not self.first_logged:  # the first jitted call has run: start-up is over
            self.first_logged = True
            self.reporter.log(self.compile_clock.summary())
        values = {key: float(value) for key, value in metrics.items()}
        self.reporter.metrics(step, values)
        self.progress.metrics(step, values)

    def _should_stop(self) -> bool:
        self.progress.chunk_done()  # asked once after each chunk
        if self.stop.requested:
            self.stop_reason = StopReason.SHUTDOWN
        elif self.reporter.cancel_requested():
            self.stop_reason = StopReason.CANCEL
        return self.stop_reason is not None

    def _checkpoint_fn(self, config: TrainConfig | DistillationTrainConfig) -> Any:
        self._save_now = algorithm_for(config).checkpoint_fn(str(self.checkpoints), config)
        return self._save

    def _save(self, state: Any, step: int) -> None:
        """The library logs an iteration's metrics before it checkpoints that iteration (and
        refuses non-finite parameters), so a checkpoint is never ahead of the stored metrics:
        a run resumed from it has no hole in its history."""
        self.reporter.flush()  # the metrics up to this step are durable before it is
        self._save_now(state, step)
        found = artifacts.find_checkpoint(self.run_dir, step)
        if found is not None:
            self.reporter.checkpoint(found)

    def _video_fn(self, video: VideoData) -> None:
        directory = artifacts.videos_dir(self.run_dir)
        directory.mkdir(parents=True, exist_ok=True)
        filename = f"step_{video.step:010d}.mp4"
        encode_mp4(video, directory / filename)
        self.reporter.video(
            video.step, directory / filename, float(video.episode_reward), int(video.episode_length)
        )
