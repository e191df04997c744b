"""The arithmetic of a network's matrix products: ``float32`` or ``bfloat16``.

``float32`` (the default) leaves the products as ``nnx.Linear`` computes them. ``bfloat16``
rounds both operands of each product to bfloat16 and accumulates in float32
(``preferred_element_type=float32``): the product's result, the bias added to it, the
parameters (stored in float32; their gradients come back in float32 through the casts),
activations, the optimizer state, the normalizer's statistics, the losses and GAE all stay
float32. Only the layers' products change; a layer takes its precision when it is built.
"""

from __future__ import annotations

from typing import Any, Literal

import jax
import jax.numpy as jnp

Precision = Literal["float32", "bfloat16"]

PRECISIONS: tuple[Precision, ...] = ("float32", "bfloat16")
"""The precisions a network's matrix products can run in; the first is the default."""

DEFAULT_PRECISION: Precision = "float32"


def check_precision(value: Any, field: str = "precision") -> Precision:
    """``value`` if it is one of ``PRECISIONS``; ValueError naming ``field`` otherwise."""
    if not isinstance(value, str) or value not in PRECISIONS:
        raise ValueError(f"{field} must be one of {list(PRECISIONS)}, got {value!r}")
    return value


def bfloat16_dot_general(
    lhs: jax.Array,
    rhs: jax.Array,
    dimension_numbers: Any,
    precision: Any = None,
    preferred_element_type: Any = None,
    **kwargs: Any,
) -> jax.Array:
    """``jax.lax.dot_general`` of the operands rounded to bfloat16, accumulated and returned
    in float32 (``preferred_element_type`` is always float32: the argument is accepted so
    that this stands in for ``lax.dot_general`` wherever that is called)."""
    del preferred_element_type
    return jax.lax.dot_general(
        lhs.astype(jnp.bfloat16),
        rhs.astype(jnp.bfloat16),
        dimension_numbers,
        precision=precision,
        preferred_element_type=jnp.float32,
        **kwargs,
    )


def linear_kwargs(precision: Any) -> dict[str, Any]:
    """The ``nnx.Linear`` keyword arguments of a layer whose products run in ``precision``:
    none for ``float32`` (the layer is exactly what it was without a precision), a
    ``dot_general`` for ``bfloat16``.

    Raises:
        ValueError: If ``precision`` is not one of ``PRECISIONS``.
    """
    if check_precision(precision) == "bfloat16":
        return {"dot_general": bfloat16_dot_general}
    return {}
