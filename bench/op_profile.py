"""Where a PPO iteration's time goes, op by op: XLA's own trace of each executed thunk
(issue 27).

::

    python -m bench.op_profile                   # settings.SPEED
    python -m bench.op_profile --learning-table FingerSpin --calls 2 --profiled-iterations 2
    python -m bench.op_profile --library brax    # Brax's training epoch, the same way
    python -m bench.op_profile --json '{"precision": "bfloat16"}'   # bfloat16 networks

One process. The iteration is compiled in the library's chunk driver
(``bench.flops.chunk_program``: 32 iterations a call, as ``train_ppo`` runs them) and
warmed up; ``--calls`` calls are timed, then one call of ``--profiled-iterations``
iterations runs under ``jax.profiler.trace``. XLA:CPU records one
event per thunk it executes, named by the HLO instruction of the optimized module (a fusion,
a product, a copy, a loop). Each instruction is looked up in the compiled module's text
(opcode, the computations a fusion calls, the source location of the JAX operation it came
from), and its *exclusive* time (its event minus the events nested in it on the same
thread, such as a loop's body) is put in one category, the first that matches:

* ``env``: what MuJoCo MJX's or Playground's source made (physics, observations, rewards;
  their products too), loops excepted;
* ``products``: a ``dot`` or ``convolution``, a fusion whose computation holds one, or a
  matmul custom call (the networks' products, forward and backward);
* ``loops and control``: ``while``, ``conditional``, ``call`` (their own time: the
  condition, the bookkeeping between body thunks);
* ``optimizer``: from Optax's;
* ``losses and GAE``: from ``nnx_ppo/algorithms/losses.py`` or ``gae``;
* ``network, not products``: from ``nnx_ppo/networks`` or Flax (activations, biases, the
  normalizer, the action distribution);
* ``rollout and minibatches``: from the rollout, step, carry or host-loop modules (env
  restarts, the minibatch shuffle, stacking);
* ``other library code``: elsewhere in ``nnx_ppo``, JAX or the env wrappers;
* ``no source``: what XLA made without a source location (copies, layout changes).

Writes ``bench/results/op-profile-<time>.json`` (per category: ms per iteration, share of
the thunks' summed time, thunks run; the 30 costliest instructions) and prints the tables.
The profiler keeps a bounded number of events, hence one short traced call. Tracing
slows the run several-fold (a few microseconds per event), so shares are the figures to
read; and XLA runs independent thunks at once on the cores, so their summed time may exceed
the wall time.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from bench.flops import CHUNK, chunk_program
from bench.jax_setup import enable_compilation_cache
from bench.runs import write_results
from bench.settings import LEARNING_TABLE_ENVS, PRESETS, learning_table_settings

PRODUCT_OPCODES = frozenset({"dot", "convolution"})
CONTROL_OPCODES = frozenset({"while", "conditional", "call"})
ENV_SOURCES = ("/mujoco/", "/mujoco_playground/")
SOURCE_CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("optimizer", ("/optax/",)),
    ("losses and GAE", ("nnx_ppo/algorithms/losses.py", "gae", "/agents/ppo/losses.py")),
    (
        "network, not products",
        (
            "nnx_ppo/networks/",
            "/flax/",
            "/brax/training/networks.py",
            "/brax/training/distribution.py",
            "/running_statistics.py",
        ),
    ),
    (
        "rollout and minibatches",
        (
            "nnx_ppo/algorithms/rollout.py",
            "nnx_ppo/algorithms/step.py",
            "nnx_ppo/algorithms/carry.py",
            "nnx_ppo/algorithms/host_loop.py",
            "/brax/training/acting.py",
            "/brax/training/agents/ppo/train.py",
        ),
    ),
)
CATEGORIES = (
    "env",
    "products",
    "loops and control",
    *(name for name, _ in SOURCE_CATEGORIES),
    "other library code",
    "no source",
)

_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+) = (?P<rest>.*)$")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s.*\{\s*$")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_CUSTOM_TARGET = re.compile(r'custom_call_target="([^"]+)"')
_OP_NAME = re.compile(r'op_name="([^"]+)"')
_STACK_FRAME = re.compile(r"stack_frame_id=(\d+)")
_TABLE_ROW = re.compile(r"^(\d+) (.*)$")
_FIELD = re.compile(r"(\w+)=(\d+)")


@dataclasses.dataclass(frozen=True)
class Instruction:
    """What the compiled module's text says of one HLO instruction."""

    name: str
    opcode: str
    calls: tuple[str, ...]
    custom_target: str
    sources: tuple[str, ...]
    """``file:line`` of the Python frames it came from, innermost first."""
    op_name: str

    @property
    def source(self) -> str:
        return self.sources[0] if self.sources else ""


def _opcode(rest: str) -> str:
    """The opcode of an instruction's right-hand side (``TYPE opcode(operands), ...``)."""
    if rest.startswith("("):  # a tuple type: skip to its closing parenthesis
        depth = 0
        for i, char in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0:
                rest = rest[i + 1 :]
                break
    else:
        rest = rest.split(" ", 1)[1] if " " in rest else ""
    return rest.strip().split("(", 1)[0].strip()


def stack_frames(text: str) -> dict[int, tuple[str, ...]]:
    """``file:line`` of each stack frame of the module's tables (``FileNames``,
    ``FileLocations``, ``StackFrames``), innermost first, by frame id."""
    tables: dict[str, dict[int, str]] = defaultdict(dict)
    section = ""
    for line in text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = line
            continue
        row = _TABLE_ROW.match(line) if section else None
        if row is None:
            section = "" if line.startswith(("%", " ", "HloModule", "ENTRY")) else section
            continue
        tables[section][int(row[1])] = row[2]
    files = {k: v.strip('"') for k, v in tables["FileNames"].items()}

    def fields(row: str) -> dict[str, int]:
        return {name: int(n) for name, n in _FIELD.findall(row)}

    locations = {}
    for key, location in tables["FileLocations"].items():
        at = fields(location)
        locations[key] = f"{files.get(at.get('file_name_id', 0), '?')}:{at.get('line', 0)}"
    frames: dict[int, tuple[str, ...]] = {}
    for key in tables["StackFrames"]:
        chain, frame, seen = [], key, set()
        while frame in tables["StackFrames"] and frame not in seen:  # innermost first
            seen.add(frame)
            at = fields(tables["StackFrames"][frame])
            chain.append(locations.get(at.get("file_location_id", 0), "?"))
            frame = at.get("parent_frame_id", 0)
        frames[key] = tuple(chain)
    return frames


def parse_module(text: str) -> tuple[dict[str, Instruction], dict[str, list[str]]]:
    """Instructions by name, and each computation's instruction names, from HLO text."""
    frames = stack_frames(text)
    instructions: dict[str, Instruction] = {}
    computations: dict[str, list[str]] = defaultdict(list)
    current = ""
    for line in text.splitlines():
        match = _INSTRUCTION.match(line)
        if match is None:
            header = _COMPUTATION.match(line)
            if header is not None:
                current = header["name"]
            continue
        rest = match["rest"]
        calls = list(_CALLS.findall(rest))
        for group in _BRANCHES.findall(rest):
            calls += [c.strip().lstrip("%") for c in group.split(",") if c.strip()]
        target = _CUSTOM_TARGET.search(rest)
        frame = _STACK_FRAME.search(rest)
        op_name = _OP_NAME.search(rest)
        instruction = Instruction(
            name=match["name"],
            opcode=_opcode(rest),
            calls=tuple(calls),
            custom_target=target[1] if target else "",
            sources=frames.get(int(frame[1]), ()) if frame else (),
            op_name=op_name[1] if op_name else "",
        )
        instructions[instruction.name] = instruction
        computations[current].append(instruction.name)
    return instructions, dict(computations)


def _holds_product(
    name: str,
    instructions: Mapping[str, Instruction],
    computations: Mapping[str, list[str]],
    seen: set[str],
) -> bool:
    """Whether computation ``name`` (or one it calls, loops excepted) holds a product."""
    if name in seen:
        return False
    seen.add(name)
    for member in computations.get(name, ()):
        inner = instructions[member]
        if inner.opcode in PRODUCT_OPCODES or _is_matmul_call(inner):
            return True
        if inner.opcode == "fusion" and any(
            _holds_product(c, instructions, computations, seen) for c in inner.calls
        ):
            return True
    return False


def _is_matmul_call(instruction: Instruction) -> bool:
    target = instruction.custom_target.lower()
    return instruction.opcode == "custom-call" and any(
        word in target for word in ("matmul", "gemm", "dot")
    )


def category(
    instruction: Instruction,
    instructions: Mapping[str, Instruction],
    computations: Mapping[str, list[str]],
) -> str:
    """The category (``CATEGORIES``) of one executed instruction; see the module docstring."""
    if instruction.opcode not in CONTROL_OPCODES and any(
        needle in instruction.source for needle in ENV_SOURCES
    ):
        return "env"
    if instruction.opcode in PRODUCT_OPCODES or _is_matmul_call(instruction):
        return "products"
    if instruction.opcode == "fusion" and any(
        _holds_product(c, instructions, computations, set()) for c in instruction.calls
    ):
        return "products"
    if instruction.opcode in CONTROL_OPCODES:
        return "loops and control"
    if not instruction.sources:
        return "no source"
    for source in instruction.sources:  # the innermost frame that names a category
        for name, needles in SOURCE_CATEGORIES:
            if any(needle in source for needle in needles):
                return name
    return "other library code"


def exclusive_times(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Microseconds per HLO instruction, each event minus the events nested in it on its
    thread; ``events`` are the trace's complete events that name an ``hlo_op``."""
    by_thread: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for event in events:
        by_thread[(event.get("pid"), event.get("tid"))].append(event)
    totals: dict[str, float] = defaultdict(float)
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[tuple[float, str]] = []  # (end, name) of the open events
        for event in thread_events:
            start, duration = float(event["ts"]), float(event["dur"])
            while stack and stack[-1][0] <= start:
                stack.pop()
            name = event["args"]["hlo_op"]
            totals[name] += duration
            if stack:
                totals[stack[-1][1]] -= duration
            stack.append((start + duration, name))
    return dict(totals)


def thunk_events(trace_dir: Path, module_name: str) -> list[dict[str, Any]]:
    """The complete events of ``module_name``'s thunks (every module's for ``""``) in the
    Perfetto trace under ``trace_dir``."""
    paths = sorted(trace_dir.rglob("perfetto_trace.json.gz"))
    if not paths:
        raise RuntimeError(f"no perfetto_trace.json.gz under {trace_dir}")
    with gzip.open(paths[-1], "rt") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [
        e
        for e in events
        if e.get("ph") == "X"
        and isinstance(e.get("args"), dict)
        and e["args"].get("hlo_op")
        and (not module_name or e["args"].get("hlo_module") == module_name)
    ]


def profile(settings: Mapping[str, Any], calls: int, profiled: int) -> dict[str, Any]:
    """Times ``calls`` chunk calls of ``settings``' iteration, then profiles one call of
    ``profiled`` iterations; see the module docstring."""
    run, carry, _ = chunk_program(settings)
    n_active = jnp.asarray(CHUNK, jnp.int32)
    compiled = run.lower(carry, None, n_active).compile()  # type: ignore[attr-defined]
    text = compiled.as_text()
    carry, metrics = compiled(carry, None, n_active)  # warm up
    jax.block_until_ready((carry, metrics))
    start = time.perf_counter()
    for _ in range(calls):  # the same calls without the profiler, for the wall time
        carry, metrics = compiled(carry, None, n_active)
        jax.block_until_ready((carry, metrics))
    plain_ms = (time.perf_counter() - start) * 1e3 / (calls * CHUNK)
    # The profiler keeps a bounded number of events: profile one call of a few iterations.
    with tempfile.TemporaryDirectory() as trace_dir:
        start = time.perf_counter()
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            carry, metrics = compiled(carry, None, jnp.asarray(profiled, jnp.int32))
            jax.block_until_ready((carry, metrics))
        profiled_ms = (time.perf_counter() - start) * 1e3 / profiled
        events = thunk_events(Path(trace_dir), _module_name(text))
    result = account(events, text, profiled)
    result.update(
        library="nnx_ppo",
        settings=dict(settings),
        timed_calls=calls,
        wall_ms_per_iteration=plain_ms,
        profiled_wall_ms_per_iteration=profiled_ms,
    )
    return result


def profile_brax(settings: Mapping[str, Any], updates: int, dump_dir: Path) -> dict[str, Any]:
    """Brax's PPO at ``settings`` with epochs of ``updates`` updates: the third epoch
    profiled, its training program's text from XLA's dump in ``dump_dir`` (this process must
    have started with ``--xla_dump_to=dump_dir --xla_dump_hlo_as_text`` in ``XLA_FLAGS``)."""
    from bench.brax_runner import brax_train_kwargs

    cfg_total = updates * 3 * _steps_per_update(settings)
    kwargs = brax_train_kwargs({**settings, "total_steps": cfg_total, "num_evals": 4})
    from brax.training.agents.ppo import train as ppo

    marks: list[float] = []
    with tempfile.TemporaryDirectory() as trace_dir:

        def on_progress(_step: int, _metrics: Mapping[str, Any]) -> None:
            marks.append(time.perf_counter())
            if len(marks) == 3:  # the step-0 eval, then two epochs: profile the third
                jax.profiler.start_trace(trace_dir, create_perfetto_trace=True)
            elif len(marks) == 4:
                jax.profiler.stop_trace()

        ppo.train(**kwargs, progress_fn=on_progress)
        events = thunk_events(Path(trace_dir), "")  # every module's; filtered below
    # On JAX 0.10 Brax's pmapped training epoch compiles as ``jit(_fun)``; its program is
    # the largest of that name.
    dumps = [
        p for p in dump_dir.glob("*.cpu_after_optimizations.txt") if _BRAX_EPOCH.search(p.name)
    ]
    if not dumps:
        raise RuntimeError(f"no training epoch module in XLA's dump at {dump_dir}")
    text = max(dumps, key=lambda p: p.stat().st_size).read_text()
    module = _module_name(text)
    result = account([e for e in events if e["args"]["hlo_module"] == module], text, updates)
    epoch_ms = (marks[3] - marks[2]) * 1e3 / updates  # traced, evaluation included
    result.update(
        library="brax",
        settings={**settings, "total_steps": cfg_total, "num_evals": 4},
        profiled_wall_ms_per_iteration=epoch_ms,
    )
    return result


_BRAX_EPOCH = re.compile(r"\.(jit__fun|\w*training_epoch)\.cpu_after_optimizations\.txt$")
BRAX_DUMP_FILTER = ".*(_fun|training_epoch).*"


def _steps_per_update(settings: Mapping[str, Any]) -> int:
    return (
        int(settings["batch_size"])
        * int(settings["n_minibatches"])
        * int(settings["rollout_length"])
    )


def _module_name(text: str) -> str:
    match = re.search(r"^HloModule ([\w.\-]+)", text, re.MULTILINE)
    if match is None:
        raise RuntimeError("the compiled module's text names no HloModule")
    return match[1]


def account(events: Sequence[Mapping[str, Any]], text: str, iterations: int) -> dict[str, Any]:
    """Per category and per instruction, the exclusive time of ``events`` (one program's
    thunks over ``iterations`` iterations), by the instructions of its HLO ``text``."""
    if not events:
        raise RuntimeError("the trace holds no thunk events of the training program")
    instructions, computations = parse_module(text)
    times = exclusive_times(events)
    executions = Counter(e["args"]["hlo_op"] for e in events)
    per_category: dict[str, float] = dict.fromkeys(CATEGORIES, 0.0)
    runs_per_category: Counter[str] = Counter()
    rows = []
    for name, micros in times.items():
        instruction = instructions.get(name)
        kind = category(instruction, instructions, computations) if instruction else "no source"
        per_category[kind] += micros
        runs_per_category[kind] += executions[name]
        rows.append(
            {
                "instruction": name,
                "category": kind,
                "opcode": instruction.opcode if instruction else "",
                "source": instruction.source if instruction else "",
                "op_name": instruction.op_name[-160:] if instruction else "",
                "ms_per_iteration": micros / 1e3 / iterations,
                "runs_per_iteration": executions[name] / iterations,
            }
        )
    busy = sum(per_category.values())
    rows.sort(key=lambda r: -float(r["ms_per_iteration"]))  # type: ignore[arg-type]
    return {
        "profiled_iterations": iterations,
        "thunk_ms_per_iteration": busy / 1e3 / iterations,
        "thunk_runs_per_iteration": len(events) / iterations,
        "categories": {
            name: {
                "ms_per_iteration": micros / 1e3 / iterations,
                "share": micros / busy,
                "runs_per_iteration": runs_per_category[name] / iterations,
            }
            for name, micros in per_category.items()
        },
        "top_instructions": rows[:30],
    }


def report(result: Mapping[str, Any]) -> str:
    """A Markdown table of the categories, then the costliest instructions."""
    plain = result.get("wall_ms_per_iteration")
    lines = [
        (f"{plain:.2f} ms per iteration without the profiler " if plain else "")
        + f"({result['profiled_wall_ms_per_iteration']:.2f} with it); the thunks' exclusive "
        f"times sum to {result['thunk_ms_per_iteration']:.2f} ms "
        f"({result['thunk_runs_per_iteration']:.0f} thunks run per iteration)",
        "",
        "| category | ms per iteration | share of the thunks' time | thunks run per iteration |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, row in result["categories"].items():
        lines.append(
            f"| {name} | {row['ms_per_iteration']:.2f} | {row['share']:.1%} | "
            f"{row['runs_per_iteration']:.0f} |"
        )
    lines += ["", "| instruction | category | opcode | ms per iteration | runs | source |"]
    lines.append("| --- | --- | --- | ---: | ---: | --- |")
    for row in result["top_instructions"][:15]:
        source = row["source"].rsplit("site-packages/", 1)[-1].replace("/work/main/", "")
        lines.append(
            f"| {row['instruction']} | {row['category']} | {row['opcode']} | "
            f"{row['ms_per_iteration']:.3f} | {row['runs_per_iteration']:.0f} | {source} |"
        )
    return "\n".join(lines)


DUMP_DIR_ENV = "NNX_PPO_OP_PROFILE_DUMP"
"""Where the child process of ``--library brax`` has XLA dump its programs' text."""


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.op_profile")
    parser.add_argument("--library", default="nnx_ppo", choices=("nnx_ppo", "brax"))
    parser.add_argument("--preset", default="speed", choices=sorted(PRESETS))
    parser.add_argument(
        "--learning-table",
        metavar="ENV",
        choices=LEARNING_TABLE_ENVS,
        help="the learning table's settings for ENV (seed 0) instead of --preset",
    )
    parser.add_argument("--calls", type=int, default=3, help="timed calls of 32 iterations")
    parser.add_argument(
        "--json", default="{}", help='settings overriding those, e.g. \'{"precision": "bfloat16"}\''
    )
    parser.add_argument(
        "--profiled-iterations", type=int, default=4, help="iterations (updates) profiled"
    )
    args = parser.parse_args(argv)
    settings: Mapping[str, Any] = PRESETS[args.preset]
    if args.learning_table:
        settings = learning_table_settings(args.learning_table, 0)
    settings = {**settings, **json.loads(args.json)}
    if args.library == "brax":
        dump_dir = os.environ.get(DUMP_DIR_ENV)
        if dump_dir is None:  # XLA reads its flags once: run again with the dump turned on
            with tempfile.TemporaryDirectory() as fresh:
                flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={fresh} "
                flags += f"--xla_dump_hlo_as_text --xla_dump_hlo_module_re={BRAX_DUMP_FILTER}"
                env = {**os.environ, "XLA_FLAGS": flags, DUMP_DIR_ENV: fresh}
                command = [sys.executable, "-m", "bench.op_profile", *sys.argv[1:]]
                subprocess.run(command, env=env, check=True)
            return {}
        # No compilation cache: a program loaded from it is not compiled, so not dumped.
        result = profile_brax(settings, args.profiled_iterations, Path(dump_dir))
    else:
        enable_compilation_cache()
        result = profile(settings, args.calls, args.profiled_iterations)
    print(report(result))
    path = write_results(f"op-profile-{args.library}", result)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
