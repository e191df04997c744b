"""The rollout alone, ours against Brax's, at one env and batch: milliseconds per batched step.

::

    python -m bench.rollout_split --env CartpoleSwingup            # Playground's GPU batch
    python -m bench.rollout_split --env CartpoleSwingup --n-envs 64 --steps 60 --repeats 2

Why: on a TPU, at Playground's settings, ours spends ~1.9x Brax's time per update outside the
SGD passes (``bench/RESULTS.md``, "On a TPU"). This times, in one process, each jitted
rollout of ``--steps`` batched steps (``--unroll`` at a time for Brax, as its training step
scans ``generate_unroll``), compile excluded, the median of ``--repeats`` calls:

* ``physics``: ``vmap(env.step)`` of the bare Playground env with zero actions: the floor.
* ``brax``: Brax 0.14.2's rollout (Playground's ``wrap_for_brax_training``: finished envs go
  back to a cached first state; its tanh-normal policy with observation normalisation).
* ``nnx_ppo``: our ``unroll_env`` from ``new_training_state`` as ``train_ppo`` builds it
  (episodes staggered: time limits at random offsets, so some env ends on most steps; each
  such step puts the envs that ended into start states reset once a rollout,
  ``rollout_start_states`` and ``restart_done``, as ``ppo_iteration`` does, and computes the
  value of the truncated obs).
* ``nnx_ppo_unstaggered``: the same with ``stagger_episodes=False`` (all envs end together,
  as Brax's do), which isolates what the staggered restarts cost.
* ``nnx_ppo_fresh``: staggered, with each step resetting the envs that ended
  (``reset_done``, what training did before 2026-12-07, later).

Both networks from the same settings (``bench.learning_envs.playground_settings(env, ...,
"gpu")``). Run it under the matmul precision to compare (``JAX_DEFAULT_MATMUL_PRECISION``).
Results go to ``bench/results/rollout-split-<time>.json``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from bench.runs import write_results

EPISODE_LENGTH = 1000


def time_calls(fn: Callable[[Any], Any], arg: Any, repeats: int) -> dict[str, float]:
    """Seconds of the first call (compile) and the median of ``repeats`` more; ``fn`` maps
    its output to its next input (a rollout's final state), so every call does fresh work."""
    start = time.perf_counter()
    arg = jax.block_until_ready(fn(arg))
    first = time.perf_counter() - start
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        arg = jax.block_until_ready(fn(arg))
        seconds.append(time.perf_counter() - start)
    return {"first_call_seconds": first, "seconds": statistics.median(seconds)}


def physics_rollout(env_name: str, n_envs: int, steps: int) -> Callable[[Any], Any]:
    """``state -> state`` after ``steps`` of ``vmap(env.step)`` with zero actions."""
    from mujoco_playground import registry

    env = registry.load(env_name, config_overrides={"impl": "jax"})
    zeros = jnp.zeros((n_envs, env.action_size))

    @jax.jit
    def roll(state: Any) -> Any:
        body = lambda s, _: (jax.vmap(env.step)(s, zeros), None)  # noqa: E731
        return jax.lax.scan(body, state, None, length=steps)[0]

    state = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(0), n_envs))
    return lambda s: roll(state if s is None else s)


def brax_rollout(settings: dict[str, Any], steps: int, unroll: int) -> Callable[[Any], Any]:
    """``(state, key) -> (state, key)`` after Brax's rollout of ``steps`` (``steps //
    unroll`` scanned ``generate_unroll`` calls, with Brax's training step's extra fields)."""
    from bench.jax_setup import install_jax_shims

    install_jax_shims()
    from brax.training import acting
    from brax.training.acme import running_statistics, specs
    from brax.training.agents.ppo import networks as ppo_networks
    from mujoco_playground import registry, wrapper

    env = wrapper.wrap_for_brax_training(
        registry.load(settings["env"], config_overrides={"impl": "jax"}),
        episode_length=EPISODE_LENGTH,
        action_repeat=1,
    )
    key = jax.random.key(0)
    keys = jax.random.split(key, settings["n_envs"])
    state = jax.jit(env.reset)(jax.random.key_data(keys))
    obs_size = state.obs.shape[-1]
    network = ppo_networks.make_ppo_networks(
        obs_size,
        env.action_size,
        preprocess_observations_fn=running_statistics.normalize,
        policy_hidden_layer_sizes=tuple(settings["policy_hidden"]),
        value_hidden_layer_sizes=tuple(settings["value_hidden"]),
    )
    params = (
        running_statistics.init_state(specs.Array((obs_size,), jnp.dtype("float32"))),
        network.policy_network.init(jax.random.key_data(key)),
        network.value_network.init(jax.random.key_data(key)),
    )
    policy = ppo_networks.make_inference_fn(network)(params)
    fields = ("truncation", "episode_metrics", "episode_done")

    @jax.jit
    def roll(carry: tuple[Any, jax.Array]) -> tuple[Any, jax.Array, Any]:
        def body(c: tuple[Any, jax.Array], _: None) -> tuple[tuple[Any, jax.Array], Any]:
            current, k = c
            k, next_k = jax.random.split(k)
            current, data = acting.generate_unroll(env, current, policy, k, unroll, fields)
            return (current, next_k), data

        (final, k), data = jax.lax.scan(body, carry, None, length=steps // unroll)
        return final, k, jnp.sum(data.reward)

    start = (state, jax.random.key_data(key))
    return lambda c: roll(start if c is None else c[:2])


def nnx_rollout(
    settings: dict[str, Any], steps: int, stagger: bool, fresh: bool = False
) -> Callable[[Any], Any]:
    """``(env_states, network_states, key) -> (...)`` after our ``unroll_env`` of ``steps``."""
    from flax import nnx

    from bench.nnx_runner import make_networks, nnx_settings
    from nnx_ppo import envs
    from nnx_ppo.algorithms.rollout import rollout_start_states, unroll_env
    from nnx_ppo.algorithms.step import new_training_state

    cfg = nnx_settings(settings)
    env = envs.load(cfg.env, {"impl": "jax", "episode_length": EPISODE_LENGTH})
    networks = make_networks(cfg, env)
    state = new_training_state(env, networks, cfg.n_envs, cfg.seed, stagger_episodes=stagger)

    @nnx.jit
    def roll(module: Any, env_states: Any, network_states: Any, key: jax.Array) -> Any:
        key, next_key = jax.random.split(key)
        starts = None if fresh else rollout_start_states(env, env_states, key)
        env_states, network_states, rollout = unroll_env(
            env, env_states, module, network_states, steps, key, starts
        )
        return env_states, network_states, next_key, jnp.sum(rollout.rewards)

    start = (state.env_states, state.network_states, state.rng_key)
    return lambda c: roll(networks, *(start if c is None else c[:3]))


def main(argv: Sequence[str] | None = None) -> None:
    from bench.learning_envs import playground_settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartpoleSwingup")
    parser.add_argument("--n-envs", type=int, help="default: Playground's (2048)")
    parser.add_argument("--steps", type=int, default=480, help="batched steps a rollout")
    parser.add_argument("--unroll", type=int, default=30, help="Brax's unroll_length")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--only", default="physics,brax,nnx_ppo,nnx_ppo_unstaggered", help="comma-separated"
    )
    args = parser.parse_args(argv)
    settings = playground_settings(args.env, 1, 3, variant="gpu")
    if args.n_envs:
        settings |= {"n_envs": args.n_envs, "n_minibatches": 1, "batch_size": args.n_envs}
    makers: dict[str, Callable[[], Callable[[Any], Any]]] = {
        "physics": lambda: physics_rollout(args.env, settings["n_envs"], args.steps),
        "brax": lambda: brax_rollout(settings, args.steps, args.unroll),
        "nnx_ppo": lambda: nnx_rollout(settings, args.steps, stagger=True),
        "nnx_ppo_unstaggered": lambda: nnx_rollout(settings, args.steps, stagger=False),
        "nnx_ppo_fresh": lambda: nnx_rollout(settings, args.steps, stagger=True, fresh=True),
    }
    out: dict[str, Any] = {
        "kind": "rollout-split",
        "backend": jax.default_backend(),
        "matmul_precision": str(getattr(jax.config, "jax_default_matmul_precision")),  # noqa: B009
        "env": args.env,
        "n_envs": settings["n_envs"],
        "steps": args.steps,
        "results": {},
    }
    path = None
    for name in args.only.split(","):
        timing = time_calls(makers[name](), None, args.repeats)
        timing["ms_per_step"] = 1000 * timing["seconds"] / args.steps
        out["results"][name] = timing
        print(f"{name:20} {timing['ms_per_step']:.3f} ms a batched step", flush=True)
        path = write_results("rollout-split", out, path)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
