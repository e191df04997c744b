"""Where our cold start goes, up to the first training metric: one fresh process, empty cache.

::

    python -m bench.startup_split --env CartpoleSwingup            # as trained
    python -m bench.startup_split --env CartpoleSwingup --fresh-resets  # the reset in the step

Times, from before the networks are built (as ``bench.nnx_runner``'s ``t0``): building the
networks, ``check_compatible``, the initial ``TrainingState`` (compiling and running the
envs' reset), the host loop's set-up, lowering the training chunk and the evaluator
(``compile_ahead``), then the first jitted call (compiling the chunk, the evaluator beside it,
and one iteration) up to the first metric ``log_fn`` receives. The learning table's settings
(``bench.settings.learning_table_settings``), 768,000 steps, 3 evaluations.

``--fresh-resets`` compiles the step as it was before 2026-12-07 (later): each step resets
the envs that ended (``rollout.reset_done``) instead of restarting them from start states
reset once a rollout; a measure of what compiling the reset in the step costs. Results go to
``bench/results/startup-split-<time>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

from bench.runs import write_results


class _Marks:
    """``time.perf_counter()`` at each named point, from the first."""

    def __init__(self) -> None:
        self.points: list[tuple[str, float]] = [("start", time.perf_counter())]

    def __call__(self, name: str) -> None:
        self.points.append((name, time.perf_counter()))

    def phases(self) -> dict[str, float]:
        """Seconds of each phase, the time since the previous point."""
        return {name: t - before for (_, before), (name, t) in itertools.pairwise(self.points)}


def _after(fn: Callable[..., Any], mark: _Marks, name: str) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        jax.block_until_ready(jax.tree.leaves(out))
        mark(name)
        return out

    return wrapped


def split(env_name: str, fresh_resets: bool) -> dict[str, Any]:
    """Trains until the first metric, with marks at each phase; returns the phases' seconds."""
    jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="startup-split-"))
    from bench import nnx_runner
    from bench.settings import learning_table_settings
    from nnx_ppo import envs
    from nnx_ppo.algorithms import host_loop, step, training

    settings = {**learning_table_settings(env_name, 0), "total_steps": 768_000, "num_evals": 3}
    cfg = nnx_runner.nnx_settings(settings)
    config = nnx_runner.train_config(cfg, False, None)
    env = envs.load(cfg.env, {"impl": cfg.physics_impl, "episode_length": cfg.episode_length})
    if fresh_resets:  # no start states: ``unroll_env`` then resets in the step
        step.rollout_start_states = lambda env, states, key: None  # type: ignore[assignment]
    mark = _Marks()
    networks = nnx_runner.make_networks(cfg, env, "float32", "composed")
    mark("networks")
    checked = _after(training.check_compatible, mark, "check_compatible")
    training.check_compatible = checked
    initial = "initial state (reset compiled and run)"
    training.training_state_for = _after(training.training_state_for, mark, initial)
    loop = host_loop._HostLoop
    lower = loop.compile_ahead

    def compile_ahead(self: Any) -> None:
        mark("host loop set-up")
        lower(self)
        mark("chunk and evaluator lowered")

    loop.compile_ahead = compile_ahead  # type: ignore[method-assign]

    class FirstMetric(Exception):
        pass

    def log_fn(metrics: dict[str, Any], step: int) -> None:
        mark("first call: compiles, one iteration")
        raise FirstMetric

    with contextlib.suppress(FirstMetric):
        training.train_ppo(env, networks, config, log_fn=log_fn)
    phases = mark.phases()
    return {
        "kind": "startup-split",
        "env": env_name,
        "fresh_resets": fresh_resets,
        "phases_seconds": phases,
        "first_metric_seconds": sum(phases.values()),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartpoleSwingup")
    parser.add_argument("--fresh-resets", action="store_true", help="the reset in the step")
    args = parser.parse_args(argv)
    result = split(args.env, args.fresh_resets)
    for name, seconds in result["phases_seconds"].items():
        print(f"{name:40s} {seconds:6.1f} s")
    print(f"{'first metric':40s} {result['first_metric_seconds']:6.1f} s")
    print(f"results: {write_results('startup-split', result)}")


if __name__ == "__main__":
    main()
