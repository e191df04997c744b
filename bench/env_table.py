"""Every env, from its preset: load it on the CPU (``impl="jax"``), build the preset's
network, run two tiny PPO iterations with a checkpoint after each, restore the first
checkpoint, train on from it and checkpoint again (a resumed run's round trip), render one
frame.

    python -m bench.env_table                      # every env; writes bench/results/envs.{md,json}
    python -m bench.env_table CartpoleBalance ...  # some envs

``make test-envs`` runs the same check as a test for every available env
(``tests/envs/test_every_env.py --every-env``). The table's columns: the env, whether it is
available here (and why not), its preset's source, the observation and action sizes, the
load, compile and steady iteration times, then whether the round trip and render worked.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

TINY_N_ENVS = 4
TINY_ROLLOUT = 8
TINY_ITERATIONS = 2
ITERATION_STEPS = TINY_N_ENVS * TINY_ROLLOUT
RESULTS = Path(__file__).parent / "results"


def tiny_preset(name: str) -> Any:
    """``name``'s CPU preset, cut to ``TINY_ITERATIONS`` iterations of ``TINY_N_ENVS`` x
    ``TINY_ROLLOUT`` steps, a checkpoint after each, no evaluation (the preset's network is
    kept as it is)."""
    from nnx_ppo import presets

    preset = presets.preset(name, "cpu").with_overrides(
        n_envs=TINY_N_ENVS,
        rollout_length=TINY_ROLLOUT,
        total_steps=TINY_ITERATIONS * ITERATION_STEPS,
    )
    config = preset.config
    config = dataclasses.replace(
        config,
        eval=dataclasses.replace(config.eval, enabled=False),
        checkpoint_every_steps=ITERATION_STEPS,
    )
    return dataclasses.replace(preset, config=config)


def check_env(name: str, *, render: bool = True) -> dict[str, Any]:
    """Loads ``name`` and trains ``TINY_ITERATIONS`` tiny iterations from its preset (with
    its domain randomization, where it has one; a checkpoint after each); restores the first
    checkpoint, trains on from it to the same step and checkpoints again, as a resumed run
    does, and reads that checkpoint back; then (where the env renders) renders one frame.

    Timing: ``compile_s`` is the first iteration's wall time less a steady one
    (``iteration_s``, the second iteration's, its checkpoint included).

    Returns:
        ``{"env", "available", "reason", "source", "observation_size", "action_size",
        "load_s", "compile_s", "iteration_s", "restored", "render"}``; ``restored`` is
        whether the resumed run's final checkpoint holds exactly the parameters the
        uninterrupted run ended with (bitwise, on the CPU).

    Raises:
        Whatever loading, training or restoring raises (``run_all`` records it).
    """
    import jax
    from flax import nnx

    from nnx_ppo import catalogue, envs
    from nnx_ppo.algorithms.checkpointing import load_checkpoint, make_checkpoint_fn
    from nnx_ppo.algorithms.training import train_ppo, training_state_for

    row: dict[str, Any] = {"env": name, "reason": catalogue.missing_assets(name)}
    row["available"] = row["reason"] is None
    if not row["available"]:
        return row
    preset = tiny_preset(name)
    row["source"] = preset.source
    overrides = dict(preset.env_overrides)  # envs.load picks impl="jax" on the CPU itself.
    start = time.perf_counter()
    env = envs.load(name, overrides)
    row["load_s"] = round(time.perf_counter() - start, 2)
    size = env.observation_size
    row["observation_size"] = (
        {k: list(v) for k, v in size.items()} if isinstance(size, dict) else int(size)
    )
    row["action_size"] = int(env.action_size)

    def networks(seed: int) -> Any:
        return preset.make_networks(env.observation_size, env.action_size, seed)

    randomization_fn = preset.randomization_fn()  # Playground's randomizer, where it has one
    with tempfile.TemporaryDirectory() as first_dir, tempfile.TemporaryDirectory() as again_dir:
        logged: list[float] = []
        start = time.perf_counter()
        result = train_ppo(
            env,
            networks(0),
            preset.config,
            seed=0,
            log_fn=lambda metrics, step: logged.append(time.perf_counter()),
            checkpoint_fn=make_checkpoint_fn(first_dir, preset.config),
            randomization_fn=randomization_fn,
        )
        final = nnx.state(result.training_state.networks, nnx.Param)
        jax.block_until_ready(final)
        row["iteration_s"] = round(logged[1] - logged[0], 2)
        row["compile_s"] = round(logged[0] - start - row["iteration_s"], 2)
        # The round trip of a resumed run: restore the first checkpoint, train on from it,
        # checkpoint again, read that back.
        first_step = sorted(Path(first_dir).glob("step_*"))[0]
        template = training_state_for(env, networks(1), preset.config)
        restored = load_checkpoint(str(first_step), template.networks, template.optimizer)
        train_ppo(
            env,
            restored["training_state"].networks,
            preset.config,
            seed=0,
            initial_state=restored["training_state"],
            checkpoint_fn=make_checkpoint_fn(again_dir, preset.config),
            randomization_fn=randomization_fn,
        )
        last_step = sorted(Path(again_dir).glob("step_*"))[-1]
        template = training_state_for(env, networks(2), preset.config)
        again = load_checkpoint(str(last_step), template.networks, template.optimizer)
        resumed = nnx.state(again["training_state"].networks, nnx.Param)
        row["restored"] = again["step"] == result.total_steps and _same(final, resumed)
    row["render"] = _render(env) if render else "not tried"
    return row


def _same(a: Any, b: Any) -> bool:
    """Whether two pytrees of arrays are equal leaf by leaf, bit for bit."""
    import jax
    import numpy as np

    left, right = jax.tree.leaves(a), jax.tree.leaves(b)
    pairs = zip(left, right, strict=False)
    return len(left) == len(right) and all(np.array_equal(x, y) for x, y in pairs)


def _render(env: Any) -> str:
    import jax
    import numpy as np

    if not callable(getattr(env, "render", None)):
        return "no render method"
    try:
        state = jax.jit(env.reset)(jax.random.key(0))
        (frame,) = env.render([state], height=48, width=64)
        shape = np.asarray(frame).shape
    except Exception as error:  # a missing GL backend, say: reported, not fatal
        return f"failed: {type(error).__name__}: {str(error).splitlines()[0][:120]}"
    return f"ok {shape[1]}x{shape[0]}"


def run_all(
    names: list[str], render: bool = True, write: Any = None, done: Any = ()
) -> list[dict[str, Any]]:
    """``check_env`` of each name (a failure is recorded as the row's ``error``);
    ``write(rows)`` after each, so that an interrupted run leaves its table so far. Rows in
    ``done`` (an earlier run's, by env) are kept, not run again."""
    kept = {r["env"]: r for r in done}
    rows: list[dict[str, Any]] = []
    for name in names:
        if name in kept:
            rows.append(kept[name])
            continue
        try:
            row = check_env(name, render=render)
        except Exception as error:
            traceback.print_exc()
            row = {"env": name, "available": True, "error": f"{type(error).__name__}: {error}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
        if write is not None:
            write(rows)
    return rows


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    lines = [
        f"Command: `{command}` ({TINY_N_ENVS} envs x {TINY_ROLLOUT} steps per iteration, "
        f"{TINY_ITERATIONS} PPO iterations with a checkpoint after each, the preset's own "
        "network, on the CPU). Compile: the first iteration's wall time less a steady one "
        "(tracing, lowering and XLA; a warm JAX compilation cache shortens it). Iteration: "
        "the second one, its checkpoint included. Round trip: the first checkpoint restored, "
        "trained on to the same step, checkpointed again and read back, with exactly the "
        "uninterrupted run's parameters.",
        "",
        "| env | available | preset | observation | action | load (s) | compile (s) "
        "| iteration (s) | round trip | render |",
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        if r.get("pending"):
            lines.append(f"| {r['env']} | pending: not run yet | | | | | | | | |")
        elif not r["available"]:
            lines.append(f"| {r['env']} | no: {r['reason'][:160]} | | | | | | | | |")
        elif "error" in r:
            lines.append(f"| {r['env']} | yes | FAILS: {r['error'][:160]} | | | | | | | |")
        else:
            obs = json.dumps(r["observation_size"]).replace("|", "/")
            restore = "ok" if r["restored"] else "MISMATCH"
            lines.append(
                f"| {r['env']} | yes | {r['source']} | {obs} | {r['action_size']} | "
                f"{r['load_s']:.1f} | {r['compile_s']:.1f} | {r['iteration_s']:.2f} | "
                f"{restore} | {r['render']} |"
            )
    return "\n".join(lines) + "\n"


def default_order() -> list[str]:
    """Every env: the built-in ones, MuJoCo Playground's without Menagerie (the Humanoids,
    slowest to compile, last), then those that need Menagerie."""
    from nnx_ppo import catalogue

    names = catalogue.env_names()
    needs = [n for n in names if n in catalogue.MENAGERIE_ASSETS]
    humanoid = [n for n in names if n.startswith("Humanoid")]
    first = [n for n in names if n not in needs and n not in humanoid]
    return first + humanoid + needs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("envs", nargs="*", help="default: every env")
    parser.add_argument("--no-render", action="store_true")
    parser.add_argument("--out", default=str(RESULTS / "envs"), help="writes OUT.md, OUT.json")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="run every env again (default: keep OUT.json's finished rows and run the rest, "
        "so that an interrupted table resumes)",
    )
    parser.add_argument(
        "--retry-failed", action="store_true", help="run again the envs whose row is an error"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    names = args.envs or default_order()
    command = "python -m bench.env_table" + "".join(f" {a}" for a in (argv or sys.argv[1:]))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def write(rows: list[dict[str, Any]]) -> None:
        done = {r["env"] for r in rows}
        rows = rows + [{"env": n, "pending": True} for n in names if n not in done]
        out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
        out.with_suffix(".md").write_text(markdown(rows, command))

    earlier = out.with_suffix(".json")
    done = []
    if earlier.exists() and not args.fresh:
        done = [
            r
            for r in json.loads(earlier.read_text())
            if not r.get("pending") and not (args.retry_failed and "error" in r)
        ]
    rows = run_all(names, render=not args.no_render, write=write, done=done)
    print(markdown(rows, command))
    return 1 if any("error" in r or r.get("restored") is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
