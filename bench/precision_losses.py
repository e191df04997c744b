"""The losses of a short seeded PPO run, printed exactly (float hex), to check that a change
leaves f32 numerics bit for bit as they were.

Run it before and after a change and compare the two outputs::

    python -m bench.precision_losses > before.json    # on the old tree
    python -m bench.precision_losses > after.json     # on the new tree
    cmp before.json after.json

It trains the built-in ``PointReach`` env (no MuJoCo: quick to compile) with a small MLP
(or LSTM) for a few iterations and prints every iteration's ``losses/*`` metrics. ``--precision``
picks the network's precision (``float32`` is the default, and the one to compare).
"""

from __future__ import annotations

import argparse
import json

from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import config as C
from nnx_ppo.algorithms.ppo import train_ppo
from nnx_ppo.networks import factories


def seeded_losses(
    seed: int, iterations: int, kind: str = "mlp", **network_fields: str
) -> list[dict[str, str]]:
    """Each iteration's ``losses/*`` metrics as float hex strings (``kind``: mlp or lstm)."""
    env = envs.load("PointReach")
    sizes = {"lstm_size": 16} if kind == "lstm" else {}
    networks = factories.FACTORIES[kind](
        env.observation_size,
        env.action_size,
        rngs=nnx.Rngs(seed),
        actor_hidden_sizes=(32, 32),
        critic_hidden_sizes=(32, 32),
        **sizes,
        **network_fields,
    )
    n_envs, rollout_length = 32, 10
    config = C.TrainConfig(
        ppo=C.PPOConfig(
            n_envs=n_envs,
            rollout_length=rollout_length,
            total_steps=iterations * n_envs * rollout_length,
            learning_rate=1e-3,
        ),
        eval=C.EvalConfig(enabled=False),
        seed=seed,
    )
    rows: list[dict[str, str]] = []

    def log_fn(metrics: dict, step: int) -> None:
        losses = {k: float(v).hex() for k, v in metrics.items() if k.startswith("losses/")}
        rows.append({"step": str(step), **dict(sorted(losses.items()))})

    train_ppo(env, networks, config, log_fn=log_fn)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--kind", default="mlp", choices=("mlp", "lstm"))
    parser.add_argument("--precision", default=None, help="float32 (default) or bfloat16")
    args = parser.parse_args()
    fields = {} if args.precision is None else {"precision": args.precision}
    print(json.dumps(seeded_losses(args.seed, args.iterations, args.kind, **fields), indent=1))


if __name__ == "__main__":
    main()
