"""``bench.op_profile``: XLA's per-thunk trace, mapped to HLO instructions and categories."""

from __future__ import annotations

import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from bench import op_profile


def _layer(x: jax.Array, w: jax.Array) -> jax.Array:
    def body(carry: jax.Array, _: None) -> tuple[jax.Array, None]:
        return jnp.tanh(carry @ w) + 1.0, None

    return jax.lax.scan(body, x, None, length=3)[0].sum()


@pytest.fixture(scope="module")
def compiled() -> jax.stages.Compiled:
    x, w = jnp.ones((64, 32)), jnp.full((32, 32), 0.01)
    return jax.jit(_layer).lower(x, w).compile()


def test_the_module_text_names_each_instructions_opcode_and_source(compiled):
    instructions, computations = op_profile.parse_module(compiled.as_text())
    kinds = {
        op_profile.category(i, instructions, computations)
        for i in instructions.values()
        if i.opcode in ("dot", "fusion", "while")
    }
    assert "products" in kinds  # the product, alone or in a fusion
    assert "loops and control" in kinds  # the scan's while
    sources = [s for i in instructions.values() for s in i.sources]
    assert any("test_op_profile.py:" in s for s in sources)  # the function's own lines


def test_exclusive_time_leaves_out_what_is_nested_on_the_same_thread():
    def event(name: str, ts: float, dur: float, tid: int = 1) -> dict:
        return {"ph": "X", "pid": 0, "tid": tid, "ts": ts, "dur": dur, "args": {"hlo_op": name}}

    events = [
        event("while.1", 0, 100),
        event("fusion.1", 10, 30),
        event("dot.1", 50, 40),
        event("copy.1", 120, 5),
        event("dot.1", 0, 7, tid=2),  # another thread: nothing nests across threads
    ]
    assert op_profile.exclusive_times(events) == {
        "while.1": 30.0,
        "fusion.1": 30.0,
        "dot.1": 47.0,
        "copy.1": 5.0,
    }


def test_a_trace_of_a_compiled_call_has_its_thunks(compiled):
    x, w = jnp.ones((64, 32)), jnp.full((32, 32), 0.01)
    compiled(x, w).block_until_ready()
    instructions, _ = op_profile.parse_module(compiled.as_text())
    module = compiled.as_text().split(",", 1)[0].removeprefix("HloModule ")
    with tempfile.TemporaryDirectory() as trace_dir:
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            compiled(x, w).block_until_ready()
        events = op_profile.thunk_events(Path(trace_dir), module)
    names = {e["args"]["hlo_op"] for e in events}
    assert names and names <= set(instructions)
    assert any(instructions[n].opcode == "while" for n in names)
    result = op_profile.account(events, compiled.as_text(), iterations=1)
    shares = {name: row["share"] for name, row in result["categories"].items()}
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["products"] > 0
    assert result["categories"]["loops and control"]["runs_per_iteration"] == 1  # one scan
    assert "| products |" in op_profile.report({**result, "profiled_wall_ms_per_iteration": 1.0})
