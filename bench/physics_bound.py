"""Training against stepping the same envs alone: how close a physics-bound env's training
comes to its physics.

::

    python -m bench.physics_bound --env WalkerWalk --rounds 2
    python -m bench.physics_bound --env WalkerWalk --variant gpu --iterations 8 --rounds 1
    python -m bench.physics_bound --env WalkerWalk --settings '{"precision": "bfloat16"}'

Issue 27 asks WalkerWalk's training to run at >= 0.95 of env-only stepping with the same envs.
Each round, one after the other:

* **env only**, in a fresh process: ``vmap(env.step)`` of the bare Playground env (``impl="jax"``)
  over the training's ``n_envs`` (``env_step_chunk`` envs at a time where the settings have
  one, as the training steps them: ``nnx_ppo.envs.chunked``), ``rollout_length`` steps a
  jitted call (a ``scan``), with actions drawn uniformly from [-1, 1] each step (what an
  untrained policy does); the median of ``--repeats`` calls after the compiling one, as env
  steps/s.
* **training**: ``bench.nnx_runner`` in a fresh process at the learning table's settings
  (``bench.settings.LEARNING_TABLE``: 256 envs x 30 steps, 8 minibatches x 4 passes, policy
  4x32, value 2x256) for ``--env``, or Playground's own with ``--variant gpu`` (2048 envs,
  32 minibatches x 16 passes, value 5x256), ``--iterations`` PPO iterations; its steady env
  steps/s (compile and evaluations left out).

With ``env_step_chunk`` in ``--settings``, each round also steps the envs as one batch alone
(``env_only_one_batch``). It prints each round's ratio training / env only and writes
``bench/results/physics-bound-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from typing import Any

import jax

from bench.nnx_runner import run_nnx_ppo_subprocess
from bench.runs import run_runner_subprocess, write_results
from bench.settings import LEARNING_TABLE

RATIO_KEYS = {"env_only": "median_ratio", "env_only_one_batch": "median_ratio_one_batch"}
"""The results' key of the median training / env-only ratio, for each env-only stepping."""


def training_settings(env: str, iterations: int, variant: str) -> dict[str, Any]:
    """``env`` at the learning table's settings (``variant`` ``"table"``) or Playground's own
    (``"gpu"``), about ``iterations`` PPO iterations and 3 evaluations."""
    if variant == "gpu":
        from bench.learning_envs import playground_settings

        batch = playground_settings(env, 1, 3, variant="gpu")
        update = batch["n_minibatches"] * batch["batch_size"] * batch["rollout_length"]
        return {**playground_settings(env, iterations * update, 3, variant="gpu"), "seed": 0}
    steps = LEARNING_TABLE["n_envs"] * LEARNING_TABLE["rollout_length"] * iterations
    return {**LEARNING_TABLE, "env": env, "seed": 0, "total_steps": steps, "num_evals": 3}


def env_only_steps_per_second(
    env: str, n_envs: int, steps: int, repeats: int, chunk: int | None = None
) -> float:
    """Steady env steps/s of ``steps`` batched random-action steps a call (compile excluded),
    ``chunk`` envs at a time where given."""
    from mujoco_playground import registry

    from nnx_ppo.envs.chunked import step_envs, step_in_chunks

    bare = registry.load(env, config_overrides={"impl": "jax"})
    stepped = step_in_chunks(bare, chunk)

    @jax.jit
    def roll(state: Any, key: jax.Array) -> tuple[Any, jax.Array]:
        def body(s: Any, k: jax.Array) -> tuple[Any, None]:
            actions = jax.random.uniform(k, (n_envs, bare.action_size), minval=-1.0, maxval=1.0)
            return step_envs(stepped, s, actions), None

        key, next_key = jax.random.split(key)
        return jax.lax.scan(body, state, jax.random.split(key, steps))[0], next_key

    states = jax.jit(jax.vmap(bare.reset))(jax.random.split(jax.random.key(0), n_envs))
    carry = jax.block_until_ready(roll(states, jax.random.key(1)))  # the compiling call
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        carry = jax.block_until_ready(roll(*carry))
        seconds.append(time.perf_counter() - start)
    return n_envs * steps / statistics.median(seconds)


def env_only_subprocess(
    env: str, n_envs: int, steps: int, repeats: int, chunk: int | None = None
) -> float:
    """:func:`env_only_steps_per_second` in a fresh process (an accelerator takes one
    process at a time, and the training runs in its own)."""
    settings = {"env": env, "n_envs": n_envs, "steps": steps, "repeats": repeats, "chunk": chunk}
    return float(run_runner_subprocess("bench.physics_bound", settings)["env_steps_per_second"])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--json", help="one env-only measurement (env, n_envs, steps, repeats, chunk)"
    )
    parser.add_argument(
        "--settings", default="{}", help="training settings overriding the variant's (JSON)"
    )
    parser.add_argument("--env", default="WalkerWalk")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=40, help="PPO iterations a training")
    parser.add_argument("--repeats", type=int, default=20, help="timed env-only calls")
    parser.add_argument(
        "--variant", choices=("table", "gpu"), default="table", help="gpu: Playground's settings"
    )
    args = parser.parse_args(argv)
    if args.json:
        sps = env_only_steps_per_second(**json.loads(args.json))
        print(json.dumps({"env_steps_per_second": sps}), flush=True)
        return
    settings = {
        **training_settings(args.env, args.iterations, args.variant),
        **json.loads(args.settings),
    }
    out: dict[str, Any] = {"kind": "physics-bound", "settings": settings, "rounds": []}
    path = None
    chunk = settings.get("env_step_chunk")
    shape = (args.env, settings["n_envs"], settings["rollout_length"], args.repeats)
    for _ in range(args.rounds):
        env_only = env_only_subprocess(*shape, chunk)
        print(f"env only {env_only:,.0f} env steps/s", flush=True)
        entry = {"env_only": env_only}
        if chunk is not None:  # the plain batch too: what training in chunks is up against
            entry["env_only_one_batch"] = env_only_subprocess(*shape)
            print(f"env only, one batch {entry['env_only_one_batch']:,.0f} env steps/s", flush=True)
        training = run_nnx_ppo_subprocess(settings)["env_steps_per_second"]
        out["rounds"].append({**entry, "training": training})
        for key, value in entry.items():
            print(f"training {training:,.0f} env steps/s: {training / value:.3f} of {key}")
            ratios = [r["training"] / r[key] for r in out["rounds"]]
            out[RATIO_KEYS[key]] = statistics.median(ratios)
        path = write_results("physics-bound", out, path)
    print(f"median training / env only: {out['median_ratio']:.3f}; results: {path}")


if __name__ == "__main__":
    main()
