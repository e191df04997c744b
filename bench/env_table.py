"""Every env, from its preset: load it on the CPU (``impl="jax"``), build the preset's
network, run one tiny PPO iteration, checkpoint and restore it, render one frame.

    python -m bench.env_table                      # every env; writes bench/results/envs.{md,json}
    python -m bench.env_table CartpoleBalance ...  # some envs

``make test-envs`` runs the same check as a test for every available env
(``tests/envs/test_every_env.py --every-env``). The table's columns: the env, whether it is
available here (and why not), its preset's source, the observation and action sizes, and
the wall time of the one iteration (compiling included: on a CPU that is nearly all of it),
then whether restore and render worked.
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
RESULTS = Path(__file__).parent / "results"


def tiny_preset(name: str) -> Any:
    """``name``'s CPU preset, cut to one iteration of ``TINY_N_ENVS`` x ``TINY_ROLLOUT``
    steps, no evaluation (the preset's network is kept as it is)."""
    from nnx_ppo import presets

    preset = presets.preset(name, "cpu").with_overrides(
        n_envs=TINY_N_ENVS,
        rollout_length=TINY_ROLLOUT,
        total_steps=TINY_N_ENVS * TINY_ROLLOUT,
    )
    config = preset.config
    config = dataclasses.replace(
        config,
        eval=dataclasses.replace(config.eval, enabled=False),
        checkpoint_every_steps=TINY_N_ENVS * TINY_ROLLOUT,
    )
    return dataclasses.replace(preset, config=config)


def check_env(name: str, *, render: bool = True) -> dict[str, Any]:
    """Loads ``name``, trains one tiny iteration from its preset, checkpoints, restores
    the network from the checkpoint and (where the env renders) renders one frame.

    Returns:
        ``{"env", "available", "reason", "source", "observation_size", "action_size",
        "iteration_s", "restored", "render"}``.

    Raises:
        Whatever loading, training or restoring raises (``run_all`` records it).
    """
    import jax
    import numpy as np
    from flax import nnx

    from nnx_ppo import catalogue, envs
    from nnx_ppo.algorithms.checkpointing import load_networks, make_checkpoint_fn
    from nnx_ppo.algorithms.ppo import train_ppo

    row: dict[str, Any] = {"env": name, "reason": catalogue.missing_assets(name)}
    row["available"] = row["reason"] is None
    if not row["available"]:
        return row
    preset = tiny_preset(name)
    row["source"] = preset.source
    overrides = dict(preset.env_overrides)
    if catalogue.source_of(name) == "playground":
        overrides["impl"] = "jax"  # on the CPU (warp is ~30x slower there)
    env = envs.load(name, overrides)
    size = env.observation_size
    row["observation_size"] = (
        {k: list(v) for k, v in size.items()} if isinstance(size, dict) else int(size)
    )
    row["action_size"] = int(env.action_size)
    networks = preset.make_networks(env.observation_size, env.action_size, 0)
    with tempfile.TemporaryDirectory() as directory:
        start = time.perf_counter()
        result = train_ppo(
            env,
            networks,
            preset.config,
            seed=0,
            checkpoint_fn=make_checkpoint_fn(directory, preset.config),
        )
        jax.block_until_ready(nnx.state(result.training_state.networks, nnx.Param))
        row["iteration_s"] = round(time.perf_counter() - start, 2)
        (step_dir,) = sorted(Path(directory).glob("step_*"))
        restored = preset.make_networks(env.observation_size, env.action_size, 1)
        load_networks(str(step_dir), restored)
        trained = jax.tree.leaves(nnx.state(result.training_state.networks, nnx.Param))
        again = jax.tree.leaves(nnx.state(restored, nnx.Param))
        pairs = zip(trained, again, strict=False)
        same = [np.array_equal(np.asarray(a), np.asarray(b)) for a, b in pairs]
        row["restored"] = len(trained) == len(again) and all(same)
    row["render"] = _render(env) if render else "not tried"
    return row


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


def run_all(names: list[str], render: bool = True, write: Any = None) -> list[dict[str, Any]]:
    """``check_env`` of each name (a failure is recorded as the row's ``error``);
    ``write(rows)`` after each, so that an interrupted run leaves its table so far."""
    rows: list[dict[str, Any]] = []
    for name in names:
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
        f"Command: `{command}` ({TINY_N_ENVS} envs x {TINY_ROLLOUT} steps, one PPO iteration, "
        "the preset's own network; iteration time includes compiling).",
        "",
        "| env | available | preset | observation | action | 1 iteration (s) | restore | render |",
        "| --- | --- | --- | --- | --- | ---: | --- | --- |",
    ]
    for r in rows:
        if not r["available"]:
            where = r["reason"].split("missing: ", 1)[-1].split(". Fix", 1)[0]
            folders = ", ".join(Path(f).name for f in where.split(", "))
            lines.append(f"| {r['env']} | no: Menagerie missing ({folders}) | | | | | | |")
        elif "error" in r:
            lines.append(f"| {r['env']} | yes | FAILS: {r['error'][:160]} | | | | | |")
        else:
            obs = json.dumps(r["observation_size"]).replace("|", "/")
            restore = "ok" if r["restored"] else "MISMATCH"
            lines.append(
                f"| {r['env']} | yes | {r['source']} | {obs} | {r['action_size']} | "
                f"{r['iteration_s']:.1f} | {restore} | {r['render']} |"
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
    args = parser.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    names = args.envs or default_order()
    command = "python -m bench.env_table" + "".join(f" {a}" for a in (argv or sys.argv[1:]))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def write(rows: list[dict[str, Any]]) -> None:
        out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
        out.with_suffix(".md").write_text(markdown(rows, command))

    rows = run_all(names, render=not args.no_render, write=write)
    print(markdown(rows, command))
    return 1 if any("error" in r or r.get("restored") is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
