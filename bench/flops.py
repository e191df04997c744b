"""How close a PPO iteration comes to this CPU's limit on its matrix products (issue 17).

::

    python -m bench.flops                  # settings.SPEED
    python -m bench.flops --preset learning --repeats 5

Three measurements, in one process, written to ``bench/results/flops-<time>.json``:

1. **The iteration's FLOP count**, from the network's own kernels (every 2-D ``nnx.Param``
   of the policy and the value network) and the PPO sizes: acting runs the policy on
   ``T x B`` observations; each of the ``n_epochs x n_minibatches`` SGD steps replays both
   networks on ``(T + 1) x B / n_minibatches`` rows (the bootstrap observation included),
   forward (``2 rows k n`` per ``[k, n]`` kernel), backward to the weights (the same) and
   backward to each layer's input except the first (the observations get no gradient).
   Only products are counted: activations, biases, Adam, GAE and physics are the rest.
2. **The limit**: each distinct product shape of those, jitted alone and timed over many
   calls (the median of ``--repeats`` batches, minus the dispatch time of a trivial jitted
   call), as GFLOP/s. ``limit_ms`` is the iteration's products at those rates, one after
   another: what an iteration would take if everything but its products were free.
3. **The iteration**: ``ppo_iteration`` jitted in the library's own chunk driver (32
   iterations per call, as ``train_ppo`` runs them), timed over whole calls after a warm-up
   call, as ms per iteration and GFLOP/s of products.

``fraction_of_limit = limit_ms / iteration_ms``. The machine's load is recorded around each
part: on this shared 2-core machine every figure moves with it.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from bench.jax_setup import enable_compilation_cache
from bench.nnx_runner import nnx_settings, settings_networks, settings_train_config
from bench.runs import write_results
from bench.settings import PRESETS
from nnx_ppo import envs
from nnx_ppo.algorithms.carry import split_state, traced_step
from nnx_ppo.algorithms.host_loop import scan_iterations
from nnx_ppo.algorithms.step import ppo_iteration
from nnx_ppo.algorithms.training import training_state_for

CHUNK = 32
"""Iterations per jitted call, as ``train_ppo`` runs them."""

Shape = tuple[int, int, int]
"""``(rows, k, n)`` of a ``[rows, k] @ [k, n]`` product."""


def kernels(module: nnx.Module, branch: str) -> list[tuple[int, int]]:
    """``[k, n]`` of every 2-D parameter under ``module.<branch>`` (``actor``, ``critic``),
    in layer order."""
    params = nnx.state(getattr(module, branch), nnx.Param)
    return [tuple(leaf.shape) for leaf in jax.tree.leaves(params) if leaf.ndim == 2]


def iteration_products(
    policy: Sequence[tuple[int, int]],
    value: Sequence[tuple[int, int]],
    n_envs: int,
    rollout_length: int,
    n_epochs: int,
    n_minibatches: int,
) -> Counter[Shape]:
    """How many products of each shape one PPO iteration computes (see the module doc)."""
    products: Counter[Shape] = Counter()
    for k, n in policy:  # acting: one [B, k] @ [k, n] per step
        products[(n_envs, k, n)] += rollout_length
    rows = (rollout_length + 1) * n_envs // n_minibatches
    steps = n_epochs * n_minibatches
    for net in (policy, value):
        for i, (k, n) in enumerate(net):
            products[(rows, k, n)] += steps  # forward
            products[(k, rows, n)] += steps  # weight gradient: [k, rows] @ [rows, n]
            if i > 0:
                products[(rows, n, k)] += steps  # input gradient: [rows, n] @ [n, k]
    return products


def flops(shape: Shape) -> int:
    rows, k, n = shape
    return 2 * rows * k * n


def _median_seconds(call: Callable[[], Any], calls: int, repeats: int) -> float:
    """Median over ``repeats`` batches of the mean seconds of one ``call()``."""
    jax.block_until_ready(call())
    batches = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            out = call()
        jax.block_until_ready(out)
        batches.append((time.perf_counter() - start) / calls)
    return statistics.median(batches)


def product_rates(shapes: Sequence[Shape], repeats: int) -> dict[Shape, float]:
    """GFLOP/s of each product shape alone (dispatch time subtracted)."""
    key = jax.random.key(0)
    tiny = jnp.ones((8,), jnp.float32)
    plus_one = jax.jit(lambda x: x + 1.0)
    dispatch = _median_seconds(lambda: plus_one(tiny), 200, repeats)
    dot = jax.jit(jnp.matmul)
    rates = {}
    for shape in shapes:
        rows, k, n = shape
        a = jax.random.normal(key, (rows, k), jnp.float32)
        b = jax.random.normal(key, (k, n), jnp.float32)
        calls = max(20, min(2000, int(2e9 / max(flops(shape), 1))))
        alone = _median_seconds(functools.partial(dot, a, b), calls, repeats)
        seconds = max(alone - dispatch, 1e-7)
        rates[shape] = flops(shape) / seconds / 1e9
    return rates


def chunk_program(settings: Mapping[str, Any]) -> tuple[Callable[..., Any], Any, nnx.Module]:
    """``settings``' PPO iteration in the library's chunk driver (``CHUNK`` iterations a
    call): ``(run, carry, networks)``, ``run(carry, None, n_active)`` jitted."""
    cfg = nnx_settings(settings)
    config = settings_train_config(settings, cfg)
    env = envs.load(cfg.env, {"impl": cfg.physics_impl, "episode_length": cfg.episode_length})
    networks = settings_networks(settings, cfg, env)
    state = training_state_for(env, networks, config)
    graphdef, carry = split_state(state)
    step = traced_step(graphdef, lambda s, _extra: ppo_iteration(env, s, config.ppo))
    return scan_iterations(step, CHUNK), carry, networks


def iteration_seconds(settings: Mapping[str, Any], calls: int) -> tuple[float, nnx.Module]:
    """Seconds per PPO iteration of ``settings`` in the chunk driver, and the network."""
    run, carry, networks = chunk_program(settings)
    n_active = jnp.asarray(CHUNK, jnp.int32)
    carry, metrics = run(carry, None, n_active)  # compile and warm up
    jax.block_until_ready((carry, metrics))
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        carry, metrics = run(carry, None, n_active)
        jax.block_until_ready((carry, metrics))
        seconds.append((time.perf_counter() - start) / CHUNK)
    return statistics.median(seconds), networks


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(settings: Mapping[str, Any], calls: int, repeats: int) -> dict[str, Any]:
    load_before = _load()
    per_iteration, networks = iteration_seconds(settings, calls)
    load_mid = _load()
    cfg = nnx_settings(settings)
    config = settings_train_config(settings, cfg).ppo
    products = iteration_products(
        kernels(networks, "actor"),
        kernels(networks, "critic"),
        config.n_envs,
        config.rollout_length,
        config.n_epochs,
        config.n_minibatches,
    )
    rates = product_rates(sorted(products), repeats)
    total_flops = sum(flops(s) * c for s, c in products.items())
    limit = sum(flops(s) * c / (rates[s] * 1e9) for s, c in products.items())
    return {
        "settings": dict(settings),
        "iteration": {
            "env_steps": config.n_envs * config.rollout_length,
            "product_gflop": total_flops / 1e9,
            "ms": per_iteration * 1e3,
            "gflops": total_flops / per_iteration / 1e9,
            "env_steps_per_second": config.n_envs * config.rollout_length / per_iteration,
        },
        "products": [
            {
                "rows": s[0],
                "k": s[1],
                "n": s[2],
                "count": c,
                "gflop": flops(s) * c / 1e9,
                "alone_gflops": rates[s],
            }
            for s, c in sorted(products.items(), key=lambda sc: -flops(sc[0]) * sc[1])
        ],
        "limit_ms": limit * 1e3,
        "limit_gflops": total_flops / limit / 1e9,
        "fraction_of_limit": limit / per_iteration,
        "load": {"before": load_before, "between": load_mid, "after": _load()},
        "jax": jax.__version__,
        "cpu_count": os.cpu_count(),
    }


def report(result: Mapping[str, Any]) -> str:
    it = result["iteration"]
    lines = [
        f"iteration: {it['env_steps']:,} env steps, {it['product_gflop']:.2f} GFLOP of products, "
        f"{it['ms']:.1f} ms ({it['env_steps_per_second']:,.0f} env steps/s), "
        f"{it['gflops']:.0f} GFLOP/s",
        f"limit (products alone at their own rates): {result['limit_ms']:.1f} ms "
        f"({result['limit_gflops']:.0f} GFLOP/s); fraction reached "
        f"{result['fraction_of_limit']:.2f}",
        "products (rows x k x n, count, GFLOP, GFLOP/s alone):",
    ]
    for p in result["products"]:
        lines.append(
            f"  {p['rows']:>6} x {p['k']:>5} x {p['n']:>4}  x{p['count']:<5} "
            f"{p['gflop']:8.3f}  {p['alone_gflops']:7.1f}"
        )
    lines.append(f"load: {result['load']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.flops")
    parser.add_argument("--preset", default="speed", choices=sorted(PRESETS))
    parser.add_argument("--calls", type=int, default=5, help="timed chunks of 32 iterations")
    parser.add_argument("--repeats", type=int, default=7, help="timed batches per product")
    args = parser.parse_args(argv)
    enable_compilation_cache()
    result = measure(PRESETS[args.preset], args.calls, args.repeats)
    print(report(result))
    path = write_results("flops", result)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
