"""A ``Policy`` as a program that runs without nnx-ppo: StableHLO (``jax.export``) or ONNX.

Both take and give flat arrays, with any batch size ``B``:

* inputs: the policy's observation first (one array ``[B, *shape]``; for a dict
  observation, one per key in sorted order), then the policy state's leaves in the order of
  ``jax.tree.leaves(policy.initial_state(B))`` (none for a feed-forward policy; ``c`` and
  ``h`` of the policy's LSTM for the recurrent factory's);
* outputs: the action ``[B, action_size]`` (for several action heads, one ``[B, size]``
  per head in sorted order, named ``action/<head>``), then the next state's leaves in the
  same order.

The parameters and normalizer statistics are constants of the program. The ONNX model names
its inputs ``obs`` (``obs/<key>`` for a dict), ``state_0``, ``state_1``, ... and its outputs
``action``, ``next_state_0``, ...; the StableHLO program is ``jax.export``'s serialization, for CPUs
and CUDA GPUs (``jax.export.deserialize(data).call(obs, *state)`` runs it).

ONNX needs the ``export`` extra (``pip install 'nnx-ppo[export]'``, then
``pip install --no-deps jax2onnx==0.17.1``); it is imported only here, when asked for.
"""

from __future__ import annotations

import importlib
import logging
import os
import tempfile
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from nnx_ppo.policy.policy import Policy

FORMATS = ("onnx", "stablehlo")
"""The formats ``export`` writes."""
SUFFIXES = {"onnx": ".onnx", "stablehlo": ".stablehlo"}
"""The usual file name ending of each format."""
ONNX_OPSET = 23
STABLEHLO_PLATFORMS = ("cpu", "cuda")
"""The StableHLO program runs on these (a robot's CPU, a GPU), wherever it was exported."""
EXTRA_HINT = (
    "pip install 'nnx-ppo[export]' && pip install --no-deps jax2onnx==0.17.1 "
    "(jax2onnx's own orbax pin conflicts with nnx-ppo's, hence --no-deps)"
)


class MissingExtra(ImportError):
    """A package of the ``export`` extra is not installed; the message says how to."""


class UnsupportedExport(ValueError):
    """The network uses an operation the ONNX converter cannot express."""


def _require(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtra(
            f"ONNX export needs {module}, of the nnx-ppo 'export' extra: {EXTRA_HINT}"
        ) from error


def signature(policy: Policy) -> tuple[list[str], list[str]]:
    """The (input, output) names of the exported programs, in order."""
    shapes = policy.obs_shapes
    obs = [f"obs/{k}" for k in sorted(shapes)] if isinstance(shapes, dict) else ["obs"]
    n_state = len(jax.tree.leaves(policy.initial_state(1)))
    size = policy.action_size
    action = [f"action/{h}" for h in sorted(size)] if isinstance(size, dict) else ["action"]
    return (
        [*obs, *(f"state_{i}" for i in range(n_state))],
        [*action, *(f"next_state_{i}" for i in range(n_state))],
    )


def flat_program(policy: Policy) -> tuple[Callable[..., tuple[jax.Array, ...]], list[Any]]:
    """``(fn, shapes)``: ``fn(*obs_leaves, *state_leaves) -> (*action_leaves,
    *next_state_leaves)`` (one action leaf per head, in sorted order),
    the parameters as constants, and each input's shape with ``None`` for the batch axis
    (``input_specs`` gives their dtypes too)."""
    obs_shapes = policy.obs_shapes
    obs_leaves, obs_def = jax.tree.flatten(
        obs_shapes, is_leaf=lambda x: isinstance(x, tuple) and all(isinstance(d, int) for d in x)
    )
    state_leaves, state_def = jax.tree.flatten(policy.initial_state(1))
    step = policy.step_fn()
    n_obs = len(obs_leaves)

    def fn(*args: jax.Array) -> tuple[jax.Array, ...]:
        obs = jax.tree.unflatten(obs_def, args[:n_obs])
        state = jax.tree.unflatten(state_def, args[n_obs:])
        next_state, action = step(state, obs)
        return (*jax.tree.leaves(action), *jax.tree.leaves(next_state))

    shapes = [(None, *s) for s in obs_leaves] + [(None, *x.shape[1:]) for x in state_leaves]
    return fn, shapes


def input_specs(policy: Policy, shapes: list[Any]) -> list[jax.ShapeDtypeStruct]:
    """``flat_program``'s inputs with a symbolic batch axis ``B``: the observations in
    float32, the state leaves in their own dtypes (a population graph's step counter is
    an int32)."""
    (batch,) = jax.export.symbolic_shape("B")
    n_state = len(jax.tree.leaves(policy.initial_state(1)))
    dtypes = [jnp.dtype(jnp.float32)] * (len(shapes) - n_state)
    dtypes += [x.dtype for x in jax.tree.leaves(policy.initial_state(1))]
    return [jax.ShapeDtypeStruct((batch, *s[1:]), d) for s, d in zip(shapes, dtypes, strict=True)]


def to_stablehlo(policy: Policy) -> bytes:
    """The policy as a serialized ``jax.export.Exported`` with a symbolic batch axis,
    lowered for ``STABLEHLO_PLATFORMS`` whatever the machine that exports it."""
    fn, shapes = flat_program(policy)
    specs = input_specs(policy, shapes)
    exported = jax.export.export(jax.jit(fn), platforms=STABLEHLO_PLATFORMS)(*specs)
    return bytes(exported.serialize())


def to_onnx(policy: Policy) -> bytes:
    """The policy as a serialized ONNX model (opset ``ONNX_OPSET``) with a dynamic batch
    axis ``B``, converted by ``jax2onnx``.

    Raises:
        MissingExtra: If ``jax2onnx`` or ``onnx`` is not installed.
        UnsupportedExport: If ``jax2onnx`` cannot convert an operation the network uses
            (a population graph's delayed reads: a batched gather and an integer
            remainder); ``to_stablehlo`` exports every network.
    """
    # jax2onnx logs a traceback for each of its optional plugins whose package is missing
    # (equinox, dm-pix: not installed with --no-deps, and not what a policy uses).
    logging.getLogger("jax2onnx.plugins.plugin_system").setLevel(logging.ERROR)
    jax2onnx = _require("jax2onnx")
    _require("onnx")
    fn, shapes = flat_program(policy)
    inputs, outputs = signature(policy)
    try:
        model = jax2onnx.to_onnx(
            fn,
            inputs=input_specs(policy, shapes),  # a dynamic batch axis
            model_name="nnx_ppo_policy",
            opset=ONNX_OPSET,
            input_names=inputs,
            output_names=outputs,
        )
    except Exception as error:  # jax2onnx raises RuntimeError, NotImplementedError, shape errors
        raise UnsupportedExport(
            f"jax2onnx cannot convert this network to ONNX ({type(error).__name__}: "
            f"{str(error).splitlines()[0][:200]}); the 'stablehlo' format exports every network"
        ) from error
    model.doc_string = (
        f"nnx-ppo policy (checkpoint step {policy.step}): inputs {inputs}, outputs {outputs}; "
        "the action is in [-1, 1]; feed each next_state_i back as state_i, zeros at an "
        "episode's start"
    )
    return bytes(model.SerializeToString())


def export(policy: Policy, path: str | os.PathLike[str], format: str) -> str:
    """Writes the policy to ``path`` in ``format`` (one of ``FORMATS``), atomically.

    Raises:
        ValueError: If ``format`` is unknown.
        MissingExtra: For ONNX without the ``export`` extra.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {list(FORMATS)}, got {format!r}")
    data = to_onnx(policy) if format == "onnx" else to_stablehlo(policy)
    path = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would follow the file to the robot
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path
