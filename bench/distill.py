"""Distillation on CartpoleBalance: a student against a PPO teacher, in env steps and seconds.

::

    python -m bench.distill                               # teacher (preset, 10M steps), student
    python -m bench.distill --teacher-checkpoint DIR      # reuse a teacher's checkpoints
    python -m bench.distill --student-actor-hidden 16 16  # a smaller student
    python -m bench.distill --teacher-steps 32768 --student-steps 32768 --eval-every 16384 \\
        --teacher-threshold 0 --eval-length 100           # smoke run: the code paths, minutes

1. Teacher: ``nnx_ppo.presets.PRESETS["CartpoleBalance"]`` (its network and ``TrainConfig``,
   ``--teacher-steps`` env steps, 10M by default), checkpointed with ``make_checkpoint_fn``
   into ``<--work-dir>/teacher`` (default ``bench/.cache/distill/teacher``, git-ignored).
   Skipped with ``--teacher-checkpoint``.
2. The teacher is rebuilt from its newest checkpoint with ``load_teacher`` and evaluated;
   below ``--teacher-threshold`` (900) the script stops: distilling a poor teacher measures
   nothing.
3. Student: the preset's network (or ``--student-actor-hidden``) from another seed, trained
   with ``train_distillation`` for ``--student-steps`` env steps on the preset's batch shape
   (512 envs x 32 steps, 8 minibatches, 4 epochs) at ``--learning-rate``, evaluated every
   ``--eval-every`` steps.

Both are evaluated the same way: the deterministic policy on ``--eval-envs`` fresh episodes
of ``--eval-length`` steps, with the same key for the final comparison. The budget printed is
the student's env steps and wall seconds (compile included, from the start of
``train_distillation``) to its first eval at or above ``--fraction`` (0.9) of the teacher's
reward, and its final reward. The run's curve and settings go to
``bench/results/distill-<time>.json``. Like every benchmark here, it is CPU-bound: use the
machine for nothing else while measuring.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from collections.abc import Sequence
from typing import Any

import jax
from flax import nnx

from bench.jax_setup import enable_compilation_cache
from bench.runs import write_results
from nnx_ppo import envs
from nnx_ppo.algorithms import config as C
from nnx_ppo.algorithms.checkpointing import make_checkpoint_fn
from nnx_ppo.algorithms.distillation import train_distillation
from nnx_ppo.algorithms.ppo import train_ppo
from nnx_ppo.algorithms.rollout import eval_rollout
from nnx_ppo.algorithms.teacher import latest_checkpoint, load_teacher
from nnx_ppo.presets import PRESETS, make_networks

PRESET = PRESETS["CartpoleBalance"]
REWARD = "eval/episode_reward"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher-checkpoint", help="a checkpoint or run directory to reuse")
    parser.add_argument("--teacher-steps", type=int, default=PRESET.config.ppo.total_steps)
    parser.add_argument("--teacher-threshold", type=float, default=900.0)
    parser.add_argument("--student-steps", type=int, default=2_000_000)
    parser.add_argument("--student-actor-hidden", type=int, nargs="+")
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--eval-every", type=int, default=131_072)
    parser.add_argument("--eval-envs", type=int, default=PRESET.config.eval.n_envs)
    parser.add_argument("--eval-length", type=int, default=PRESET.config.eval.max_episode_length)
    parser.add_argument("--fraction", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", default=os.path.join("bench", ".cache", "distill"))
    return parser.parse_args(argv)


def train_teacher(env: Any, args: argparse.Namespace, eval_cfg: C.EvalConfig) -> dict[str, Any]:
    """Trains the preset's teacher and checkpoints it; returns where and how it went."""
    directory = os.path.abspath(os.path.join(args.work_dir, "teacher"))
    ppo = dataclasses.replace(PRESET.config.ppo, total_steps=args.teacher_steps)
    config = dataclasses.replace(
        PRESET.config,
        ppo=ppo,
        eval=dataclasses.replace(eval_cfg, every_steps=PRESET.config.eval.every_steps),
        seed=args.seed,
        checkpoint_every_steps=args.teacher_steps,  # and at the end
    )
    networks = PRESET.make_networks(env.observation_size, env.action_size, args.seed)
    start = time.perf_counter()
    result = train_ppo(env, networks, config, checkpoint_fn=make_checkpoint_fn(directory, config))
    curve = [(e["step"], e[REWARD]) for e in result.eval_history]
    print(
        f"teacher: {curve[-1][1]:.1f} after {result.total_steps:,} steps, "
        f"{time.perf_counter() - start:.0f} s; evals {curve}",
        flush=True,
    )
    return {"directory": directory, "steps": result.total_steps, "curve": curve}


def evaluate(env: Any, network: Any, eval_cfg: C.EvalConfig, key: jax.Array) -> float:
    """Mean deterministic episode reward (``eval_rollout``, jitted)."""
    graphdef, state = nnx.split(network)

    def run(s: Any, k: jax.Array) -> dict[str, jax.Array]:
        n, length = eval_cfg.n_envs, eval_cfg.max_episode_length
        return eval_rollout(env, nnx.merge(graphdef, s), n, length, k)

    return float(jax.jit(run)(state, key)[REWARD])


def distill(
    env: Any, teacher: Any, teacher_reward: float, args: argparse.Namespace, eval_cfg: Any
) -> dict[str, Any]:
    """Trains the student; returns its curve and the budget to reach the target reward."""
    spec = dict(PRESET.network)
    if args.student_actor_hidden:
        spec["actor_hidden_sizes"] = tuple(args.student_actor_hidden)
    student = make_networks(spec, env.observation_size, env.action_size, args.seed + 1)
    p = PRESET.config.ppo
    config = C.DistillationTrainConfig(
        distillation=C.DistillationConfig(
            n_envs=p.n_envs,
            rollout_length=p.rollout_length,
            total_steps=args.student_steps,
            learning_rate=args.learning_rate,
            n_epochs=p.n_epochs,
            n_minibatches=p.n_minibatches,
        ),
        eval=dataclasses.replace(eval_cfg, every_steps=args.eval_every),
        seed=args.seed,
    )
    curve: list[dict[str, float]] = []
    start = time.perf_counter()

    def log_fn(metrics: dict[str, Any], step: int) -> None:
        if REWARD in metrics:
            point = {"step": step, "wall_seconds": time.perf_counter() - start}
            point.update(reward=metrics[REWARD], loss=metrics["losses/distillation"])
            curve.append(point)
            print(
                f"student: step {step:,} reward {point['reward']:.1f} "
                f"loss {point['loss']:.4f} at {point['wall_seconds']:.0f} s",
                flush=True,
            )

    result = train_distillation(env, student, teacher, config, log_fn=log_fn)
    target = args.fraction * teacher_reward
    reached = next((point for point in curve if point["reward"] >= target), None)
    return {
        "network": spec,
        "config": {
            k: v for k, v in dataclasses.asdict(config.distillation).items() if k != "logging_level"
        },
        "curve": curve,
        "total_steps": result.total_steps,
        "wall_seconds": time.perf_counter() - start,
        "target_reward": target,
        "reached": reached,
        "student": result.training_state.student,
    }


def main(argv: Sequence[str] | None = None) -> None:
    args = _parse(argv)
    enable_compilation_cache()
    env = envs.load(PRESET.env, PRESET.env_overrides)
    eval_cfg = C.EvalConfig(n_envs=args.eval_envs, max_episode_length=args.eval_length)
    teacher_run = None
    directory = args.teacher_checkpoint
    if directory is None:
        teacher_run = train_teacher(env, args, eval_cfg)
        directory = teacher_run["directory"]
    path = directory if os.path.exists(os.path.join(directory, "metadata.pkl")) else None
    path = path or latest_checkpoint(directory)
    teacher = load_teacher(directory, PRESET.network, env.observation_size, env.action_size)
    key = jax.random.key(args.seed + 1000)
    teacher_reward = evaluate(env, teacher, eval_cfg, key)
    print(f"teacher {path}: eval reward {teacher_reward:.1f}", flush=True)
    if teacher_reward < args.teacher_threshold:
        raise SystemExit(f"teacher reward {teacher_reward:.1f} < {args.teacher_threshold}")

    run = distill(env, teacher, teacher_reward, args, eval_cfg)
    student_reward = evaluate(env, run.pop("student"), eval_cfg, key)
    reached = run["reached"]
    budget = (
        f"reached {run['target_reward']:.1f} at {reached['step']:,} env steps, "
        f"{reached['wall_seconds']:.0f} s"
        if reached
        else f"never reached {run['target_reward']:.1f}"
    )
    print(
        f"teacher {teacher_reward:.1f}, student {student_reward:.1f} "
        f"({student_reward / max(teacher_reward, 1e-9):.0%}) after {run['total_steps']:,} env "
        f"steps, {run['wall_seconds']:.0f} s; {budget}"
    )
    payload = {
        "args": vars(args),
        "teacher": {"checkpoint": path, "reward": teacher_reward, "training": teacher_run},
        "student": {"reward": student_reward, **run},
    }
    print(f"results: {write_results('distill', payload)}")


if __name__ == "__main__":
    main()
