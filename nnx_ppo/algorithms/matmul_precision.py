"""The matmul precision training runs under: explicit, whatever the device.

Left unset, JAX picks a device-dependent default for float32 matrix products, which on
recent NVIDIA GPUs is TF32 (10-bit mantissas): MuJoCo Playground's issue 86 shows PPO
collapsing on RTX 40-series cards until ``JAX_DEFAULT_MATMUL_PRECISION=highest``. So
``train_ppo`` and ``train_distillation`` run (trace, compile and execute) under
``jax.default_matmul_precision(training_matmul_precision())``: ``"highest"`` (true float32
products) unless the caller set a precision of their own (``jax.config``'s
``jax_default_matmul_precision``, e.g. through ``JAX_DEFAULT_MATMUL_PRECISION``), which is
then kept. On CPU, float32 products are float32 at every setting: numerics do not change.

A network's own ``precision`` (``nnx_ppo.networks.precision``, ``bfloat16``) is separate:
it rounds the operands of its products to bfloat16 on purpose, whatever this setting.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax

MATMUL_PRECISION = "highest"
"""What training runs under when the caller set no matmul precision."""


def training_matmul_precision() -> str:
    """The matmul precision training runs under: the caller's setting, else ``"highest"``."""
    current = getattr(jax.config, "jax_default_matmul_precision")  # noqa: B009 (not typed)
    return MATMUL_PRECISION if current is None else str(current)


@contextlib.contextmanager
def explicit_matmul_precision() -> Iterator[str]:
    """Runs the block under ``training_matmul_precision()`` (which it yields)."""
    precision = training_matmul_precision()
    with jax.default_matmul_precision(precision):
        yield precision


def describe_precision(network_precision: str = "float32") -> str:
    """The run log's line, e.g. ``precision: float32, matmul precision highest, device cpu``
    (the network's precision, the matmul precision training runs under, JAX's backend)."""
    return (
        f"precision: {network_precision}, matmul precision {training_matmul_precision()}, "
        f"device {jax.default_backend()}"
    )
