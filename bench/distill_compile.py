"""How long one distillation iteration takes to lower and compile, for an env (issue 27).

::

    python -m bench.distill_compile --env CartpoleSwingup

One process, the compilation cache off: a student and a teacher (swish MLPs 2x32 on each
side), 64 envs x 30 steps, 2 epochs x 4 minibatches; ``distillation_iteration`` jitted,
lowered and compiled, each timed. Run it from two trees (``PYTHONPATH`` and the working
directory at each) to compare their compiles. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

import jax
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms.config import DistillationConfig
from nnx_ppo.algorithms.distillation_step import distillation_iteration, new_distillation_state
from nnx_ppo.networks.factories import make_mlp_actor_critic


def compile_seconds(env_name: str) -> dict[str, Any]:
    """Seconds to lower and to compile one distillation iteration on ``env_name``."""
    env = envs.load(env_name, {"impl": "jax"})

    def mlp(seed: int) -> Any:
        sizes = [32, 32]
        return make_mlp_actor_critic(
            env.observation_size, env.action_size, sizes, sizes, nnx.Rngs(seed)
        )

    student, teacher = mlp(0), mlp(1)
    state = new_distillation_state(env, student, teacher, 64, seed=0)
    jax.block_until_ready(state.env_states)
    config = DistillationConfig(n_envs=64, rollout_length=30, n_epochs=2, n_minibatches=4)
    iteration = jax.jit(lambda s: distillation_iteration(env, teacher, s, config))
    start = time.perf_counter()
    lowered = iteration.lower(state)
    lowered_at = time.perf_counter()
    lowered.compile()
    done = time.perf_counter()
    return {
        "env": env_name,
        "lower_seconds": lowered_at - start,
        "compile_seconds": done - lowered_at,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.distill_compile")
    parser.add_argument("--env", default="CartpoleSwingup")
    args = parser.parse_args(argv)
    print(json.dumps(compile_seconds(args.env)), flush=True)


if __name__ == "__main__":
    main()
