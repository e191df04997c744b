"""The arithmetic of a network's matrix products: ``float32`` or ``bfloat16``.

``float32`` (the default) leaves the products as ``nnx.Linear`` computes them. ``bfloat16``
rounds both operands of each product to bfloat16 and accumulates in float32
(``preferred_element_type=float32``); the gradient's products do the same, with the incoming
gradient rounded to bfloat16. The product's result, the bias added to it, the parameters and
their gradients, the activations, the optimizer state, the normalizer's statistics, the
losses and GAE all stay float32. Only the layers' products change; a layer takes its
precision when it is built.
"""

from __future__ import annotations

import functools
import math
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
    that this stands in for ``lax.dot_general`` wherever that is called).

    The gradient's products run the same way: the incoming gradient is rounded to bfloat16
    and multiplied by the rounded operands, accumulating in float32, and the gradients come
    back unrounded in the operands' dtypes. (Differentiating the plain cast-then-multiply
    instead would multiply a float32 gradient by a bfloat16 operand, which XLA runs as a
    float32 product, and then round the gradient to bfloat16.)

    Raises:
        ValueError: If a keyword argument other than ``precision`` and
            ``preferred_element_type`` is given a value (``out_sharding``, say).
    """
    del preferred_element_type
    given = sorted(name for name, value in kwargs.items() if value is not None)
    if given:
        raise ValueError(f"bfloat16 products take no {', '.join(given)}")
    dtypes = (jnp.dtype(lhs.dtype), jnp.dtype(rhs.dtype))
    return _bfloat16_product(lhs, rhs, _as_tuples(dimension_numbers), precision, dtypes)


def _as_tuples(dimension_numbers: Any) -> Any:
    """``dimension_numbers`` as nested tuples of ints (hashable, for a static argument)."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    return (
        (tuple(map(int, lhs_contract)), tuple(map(int, rhs_contract))),
        (tuple(map(int, lhs_batch)), tuple(map(int, rhs_batch))),
    )


def _as_matrices(x: jax.Array, batch: Any, rows: Any, columns: Any) -> jax.Array:
    """``x`` with its axes ``batch``, ``rows``, ``columns`` (in that order) merged into a
    batch of matrices (no batch axis when ``batch`` is empty)."""
    shape = x.shape
    size = lambda axes: math.prod(shape[a] for a in axes)  # noqa: E731
    matrices = (size(rows), size(columns))
    x = jnp.transpose(x, (*batch, *rows, *columns))
    return x.reshape((size(batch), *matrices) if batch else matrices)


def _from_matrices(x: jax.Array, shape: Any, batch: Any, rows: Any, columns: Any) -> jax.Array:
    """The inverse of :func:`_as_matrices` for an array of ``shape``."""
    order = (*batch, *rows, *columns)
    x = x.reshape(tuple(shape[a] for a in order))
    return jnp.transpose(x, tuple(order.index(a) for a in range(len(shape))))


def _transposed(x: jax.Array) -> jax.Array:
    """``x`` with its last two axes swapped, written out as an array of its own (for CPUs).

    A product that contracts its left operand's rows (``lhs.T @ out``, a kernel's gradient)
    is one XLA:CPU does not run in bfloat16: it converts both operands to float32 first, so
    the product runs at float32's rate, after two conversions. A plain ``x.T`` does not help,
    since XLA folds a transpose into the product's dimension numbers; swapped through a unit
    axis, the transpose stays a copy (a fraction of the product's time) and the product
    contracts the copy's columns, in bfloat16. ``test_precision`` checks the compiled program.
    Only CPUs take this path; other devices get the product as it was (a TPU, which tiles
    an array's last axes, might pad the unit axis).
    """
    rows, columns = x.shape[-2:]
    swapped = jnp.swapaxes(x[..., None], -3, -1)  # [batch,] 1 x columns x rows
    return swapped.reshape((*x.shape[:-2], columns, rows))


def _matrix_product(
    a: jax.Array, b: jax.Array, a_axis: int, b_axis: int, batched: bool
) -> jax.Array:
    """Batched (when ``batched``) products of matrices contracting axis ``a_axis`` of ``a``'s
    and ``b_axis`` of ``b``'s (0 or 1, counted within each matrix), in float32."""
    offset = 1 if batched else 0
    batch = ((0,), (0,)) if batched else ((), ())
    return jax.lax.dot_general(
        a, b, (((a_axis + offset,), (b_axis + offset,)), batch), preferred_element_type=jnp.float32
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _bfloat16_product(
    lhs: jax.Array, rhs: jax.Array, dimension_numbers: Any, precision: Any, dtypes: Any
) -> jax.Array:
    del dtypes
    return jax.lax.dot_general(
        lhs.astype(jnp.bfloat16),
        rhs.astype(jnp.bfloat16),
        dimension_numbers,
        precision=precision,
        preferred_element_type=jnp.float32,
    )


def _bfloat16_product_forward(
    lhs: jax.Array, rhs: jax.Array, dimension_numbers: Any, precision: Any, dtypes: Any
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    lhs16, rhs16 = lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16)
    out = jax.lax.dot_general(
        lhs16, rhs16, dimension_numbers, precision=precision, preferred_element_type=jnp.float32
    )
    return out, (lhs16, rhs16)


def _bfloat16_product_backward(
    dimension_numbers: Any,
    precision: Any,
    dtypes: Any,
    operands: tuple[jax.Array, jax.Array],
    grad: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """The gradients through a batch of matrix products (``out = lhs @ rhs`` per batch
    element), each operand's axes merged into rows and columns first; XLA:CPU multiplies
    bfloat16 in that form whatever the dimension numbers were."""
    del precision
    lhs16, rhs16 = operands
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    lhs_free = tuple(a for a in range(lhs16.ndim) if a not in lhs_contract + lhs_batch)
    rhs_free = tuple(a for a in range(rhs16.ndim) if a not in rhs_contract + rhs_batch)
    batched = bool(lhs_batch)
    lhs = _as_matrices(lhs16, lhs_batch, lhs_free, lhs_contract)  # [batch,] m x k
    rhs = _as_matrices(rhs16, rhs_batch, rhs_contract, rhs_free)  # [batch,] k x n
    # [batch,] m x n: the result's axes are batch, lhs free, rhs free, in that order.
    out = grad.astype(jnp.bfloat16).reshape(lhs.shape[:-1] + rhs.shape[-1:])
    lhs_grad = _matrix_product(out, rhs, 1, 1, batched)  # m x k
    rhs_grad = jax.lax.platform_dependent(  # k x n
        lhs,
        out,
        cpu=lambda lhs, out: _matrix_product(_transposed(lhs), out, 1, 0, batched),
        default=lambda lhs, out: _matrix_product(lhs, out, 0, 0, batched),
    )
    return (
        _from_matrices(lhs_grad, lhs16.shape, lhs_batch, lhs_free, lhs_contract).astype(dtypes[0]),
        _from_matrices(rhs_grad, rhs16.shape, rhs_batch, rhs_contract, rhs_free).astype(dtypes[1]),
    )


_bfloat16_product.defvjp(_bfloat16_product_forward, _bfloat16_product_backward)


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
