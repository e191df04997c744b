"""Networks built from the toolkit's parts against the fixed ``PPONetwork`` that
``make_mlp_actor_critic`` built before them (issue 23).

    python -m bench.network_parts [--rounds 20] [--pairs 3] [--steps 2048000]

At ``bench.settings.SPEED`` (CartpoleBalance, 256 envs x 20 steps, 4 x 4 minibatches; the
total steps and evaluations set here), each run in a fresh process (``bench.nnx_runner``):

* **In one process**: the PPO iteration of each network jitted in the library's chunk driver
  (``CHUNK`` iterations per call, as ``train_ppo`` runs them), then ``--rounds`` rounds of
  one call each, the order alternating: ms per iteration and the ratio fixed/composed of the
  times (composed's speed relative to fixed's; target: median >= 0.98). The load of the
  machine moves both alike here, which separate processes cannot promise.
* ``--pairs`` interleaved pairs of ``network: "fixed"`` (the ``PPONetwork`` that
  ``make_mlp_actor_critic`` built before, ``legacy.ppo_network_mlp_actor_critic``) and
  ``network: "composed"`` (``make_mlp_actor_critic``'s now, from the toolkit's parts: the
  same sizes, the same parameters for the same seed), the order alternating from pair to
  pair. Reported: each pair's steady env steps/s and their ratio composed/fixed (target:
  median >= 0.98), and whether the two trained identically: the same ``losses/*`` for the
  first iterations and the same final eval reward.
* ``network: "graph6"`` (``nnx_runner.SIX_POPULATIONS``: six populations with delayed
  reciprocal edges): a short run that compiles and a timed one, in fresh processes (steady
  env steps/s, compile time), and ``--graph-rounds`` alternating calls against ``fixed`` in
  one process (ms per iteration).
* ``--lstm-rounds`` alternating calls in one process of ``make_lstm_actor_critic``'s network
  (``lstm``, from the toolkit's parts) against its old ``PPONetwork`` build
  (``lstm_fixed``): ms per iteration and their ratio.

A warm-up run of each network first fills the persistent compilation cache, so the timed
runs' compile times are the cache's. Writes ``bench/results/network-parts-<time>.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp

from bench.jax_setup import enable_compilation_cache
from bench.nnx_runner import (
    make_networks,
    nnx_settings,
    run_nnx_ppo_subprocess,
    train_config,
)
from bench.runs import write_results
from bench.service_harness import machine_facts
from bench.settings import SPEED
from nnx_ppo import envs
from nnx_ppo.algorithms.carry import split_state, traced_step
from nnx_ppo.algorithms.host_loop import scan_iterations
from nnx_ppo.algorithms.step import ppo_iteration
from nnx_ppo.algorithms.training import training_state_for

TARGET = 0.98

SUMMARY_KEYS = (
    "env_steps_per_second",
    "train_compile_seconds",
    "compile_seconds",
    "final_eval_reward",
    "total_seconds",
)


CHUNK = 8
"""PPO iterations per jitted call in the in-process comparison."""


def interleaved_iterations(networks: tuple[str, str], rounds: int) -> dict[str, Any]:
    """Seconds per PPO iteration of each of ``networks`` (names of ``nnx_runner.NETWORKS``) at
    ``SPEED``, timed in alternating calls in this process, and the per-round ratios of the
    first's time to the second's (the second's speed relative to the first's)."""
    config_settings = nnx_settings(SPEED)
    config = train_config(config_settings)
    env = envs.load(
        config_settings.env,
        {"impl": config_settings.physics_impl, "episode_length": config_settings.episode_length},
    )
    n_active = jnp.asarray(CHUNK, jnp.int32)
    runners: dict[str, list[Any]] = {}
    compile_seconds = {}
    for name in networks:
        state = training_state_for(env, make_networks(config_settings, env, network=name), config)
        graphdef, carry = split_state(state)
        step = traced_step(graphdef, lambda s, _extra: ppo_iteration(env, s, config.ppo))
        run = scan_iterations(step, CHUNK)
        start = time.perf_counter()
        carry, _ = jax.block_until_ready(run(carry, None, n_active))
        compile_seconds[name] = time.perf_counter() - start
        runners[name] = [run, carry]
    seconds: dict[str, list[float]] = {name: [] for name in networks}
    for i in range(rounds):
        for name in networks if i % 2 == 0 else networks[::-1]:
            run, carry = runners[name]
            start = time.perf_counter()
            carry, _ = jax.block_until_ready(run(carry, None, n_active))
            seconds[name].append((time.perf_counter() - start) / CHUNK)
            runners[name][1] = carry
    first, second = networks
    ratios = [a / b for a, b in zip(seconds[first], seconds[second], strict=True)]
    return {
        "ms_per_iteration": {k: 1000 * statistics.median(v) for k, v in seconds.items()},
        "first_call_seconds": compile_seconds,
        "ratios": ratios,
        "median_ratio": statistics.median(ratios),
        "seconds": seconds,
    }


def _run(network: str, steps: int, timeout_s: float) -> dict[str, Any]:
    settings = {**SPEED, "total_steps": steps, "num_evals": 3, "network": network}
    return run_nnx_ppo_subprocess(settings, timeout_s=timeout_s)


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    return {key: result[key] for key in SUMMARY_KEYS}


def separate_processes(pairs: int, steps: int, timeout_s: float) -> dict[str, Any]:
    """``pairs`` interleaved pairs of whole runs, fixed and composed, each in a fresh process
    (after one warm-up run of each): steps/s, their ratio, and whether they trained alike."""
    warm_up = {}
    for network in ("fixed", "composed"):
        warm_up[network] = _summary(_run(network, 256 * 20 * 8, timeout_s))
        print(f"warm-up {network}: {warm_up[network]}", flush=True)
    rows = []
    for i in range(pairs):
        order = ("fixed", "composed") if i % 2 == 0 else ("composed", "fixed")
        results = {network: _run(network, steps, timeout_s) for network in order}
        fixed, composed = results["fixed"], results["composed"]
        row = {
            "first": order[0],
            "fixed": _summary(fixed),
            "composed": _summary(composed),
            "ratio": composed["env_steps_per_second"] / fixed["env_steps_per_second"],
            "same_losses": fixed["loss_trace"] == composed["loss_trace"],
            "same_final_eval": fixed["final_eval_reward"] == composed["final_eval_reward"],
            "loss_iterations_compared": len(fixed["loss_trace"]),
        }
        rows.append(row)
        print(
            f"pair {i + 1}: fixed {row['fixed']['env_steps_per_second']:.0f} steps/s, composed "
            f"{row['composed']['env_steps_per_second']:.0f} steps/s, ratio {row['ratio']:.3f}; "
            f"same losses {row['same_losses']}, same final eval {row['same_final_eval']}",
            flush=True,
        )
    ratio = statistics.median(row["ratio"] for row in rows)
    print(f"separate processes: median ratio composed/fixed {ratio:.3f}", flush=True)
    return {"warm_up": warm_up, "pairs": rows, "median_ratio": ratio}


def graph_runs(steps: int, timeout_s: float) -> dict[str, Any]:
    """The 6-population graph: a short run that compiles (cold where the cache lacks its
    program), then one of ``steps``."""
    warm_up = _summary(_run("graph6", 256 * 20 * 8, timeout_s))
    print(f"warm-up graph6: {warm_up}", flush=True)
    timed = _summary(_run("graph6", steps, timeout_s))
    print(f"graph6: {timed}", flush=True)
    return {"warm_up": warm_up, "timed": timed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=3, help="0: no separate processes")
    parser.add_argument("--steps", type=int, default=2_048_000)
    parser.add_argument("--graph-steps", type=int, default=1_024_000, help="0: no graph runs")
    parser.add_argument(
        "--graph-rounds", type=int, default=16, help="rounds of fixed vs graph6 in one process"
    )
    parser.add_argument(
        "--lstm-rounds", type=int, default=16, help="rounds of lstm_fixed vs lstm in one process"
    )
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    args = parser.parse_args(argv)
    enable_compilation_cache()

    in_process = interleaved_iterations(("fixed", "composed"), args.rounds)
    ratio = in_process["median_ratio"]
    verdict = "meets" if ratio >= TARGET else "misses"
    print(
        f"in one process: {in_process['ms_per_iteration']} ms per iteration; median ratio "
        f"of times fixed/composed {ratio:.3f}: {verdict} the target {TARGET}",
        flush=True,
    )
    separate = separate_processes(args.pairs, args.steps, args.timeout_s) if args.pairs else None
    graph = graph_runs(args.graph_steps, args.timeout_s) if args.graph_steps else None
    graph_in_process = None
    if args.graph_rounds:
        graph_in_process = interleaved_iterations(("fixed", "graph6"), args.graph_rounds)
        print(f"graph6 in one process: {graph_in_process['ms_per_iteration']} ms", flush=True)
    lstm_in_process = None
    if args.lstm_rounds:
        lstm_in_process = interleaved_iterations(("lstm_fixed", "lstm"), args.lstm_rounds)
        print(
            f"LSTM in one process: {lstm_in_process['ms_per_iteration']} ms per iteration; "
            f"median ratio of times fixed/composed {lstm_in_process['median_ratio']:.3f}",
            flush=True,
        )
    path = write_results(
        "network-parts",
        {
            "args": vars(args),
            "settings": {**SPEED, "num_evals": 3},
            "in_process": in_process,
            "median_ratio": ratio,
            "target": TARGET,
            "separate_processes": separate,
            "graph6": graph,
            "graph6_in_process": graph_in_process,
            "lstm_in_process": lstm_in_process,
            "machine": machine_facts(),
            "time": time.time(),
        },
    )
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
