"""A network's ``precision``: bfloat16 products with float32 parameters, outputs and gradients
close to float32's; float32 exactly as before; bad values refused, naming the field."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo.networks import factories
from nnx_ppo.networks.layers import LSTM, MLP, Dense
from nnx_ppo.networks.precision import bfloat16_dot_general, check_precision, linear_kwargs

IN, OUT, BATCH = 24, 16, 8


def inputs(shape: tuple[int, ...], seed: int = 0) -> jax.Array:
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32)


def param_dtypes(module: nnx.Module) -> set[str]:
    return {str(x.dtype) for x in jax.tree.leaves(nnx.state(module, nnx.Param))}


def test_bfloat16_dense_is_close_to_float32_and_keeps_float32_parameters():
    f32 = Dense(IN, OUT, rngs=nnx.Rngs(0))
    bf16 = Dense(IN, OUT, rngs=nnx.Rngs(0), precision="bfloat16")
    np.testing.assert_array_equal(f32.linear.kernel[...], bf16.linear.kernel[...])  # same init
    x = inputs((BATCH, IN))
    y32 = f32(None, x).output
    y16 = bf16(None, x).output
    assert y16.dtype == jnp.float32 and param_dtypes(bf16) == {"float32"}
    # bfloat16 keeps 8 significant bits (relative rounding <= 2**-9 per operand), so each of
    # the 24 products is within ~2**-8 of its float32 value; float32 sums of 24 such terms:
    # errors well under 2% of the output's scale.
    scale = float(jnp.max(jnp.abs(y32)))
    np.testing.assert_allclose(y16, y32, atol=0.02 * scale)
    assert not np.array_equal(y16, y32)  # the products really were rounded


def test_bfloat16_rounds_the_operands_and_accumulates_in_float32():
    # 1 + 2**-10 is not a bfloat16 (8 significant bits): it rounds to 1. The 257 products
    # 1 * 1 accumulated in float32 make exactly 257, which a bfloat16 accumulator could not
    # hold (between 256 and 512 its step is 2); in float32 the sum is 257 * (1 + 2**-10).
    lhs = jnp.full((1, 257), 1 + 2**-10, jnp.float32)
    rhs = jnp.ones((257, 1), jnp.float32)
    out = bfloat16_dot_general(lhs, rhs, (((1,), (0,)), ((), ())))
    assert out.dtype == jnp.float32
    assert float(out[0, 0]) == 257.0
    exact = jax.lax.dot_general(lhs, rhs, (((1,), (0,)), ((), ())))
    assert float(exact[0, 0]) > 257.0


def test_the_bfloat16_program_multiplies_bfloat16_and_float32_does_not():
    def hlo(precision: str) -> str:
        mlp = MLP((IN, 32, OUT), rngs=nnx.Rngs(0), precision=precision)
        graphdef, state = nnx.split(mlp)

        def forward(state, x):
            return nnx.merge(graphdef, state)(None, x).output

        return jax.jit(forward).lower(state, inputs((BATCH, IN))).as_text()

    assert "bf16" in hlo("bfloat16")
    assert "bf16" not in hlo("float32")


def test_bfloat16_gradients_are_float32_and_close():
    def grads(precision: str):
        mlp = MLP((IN, 32, OUT), rngs=nnx.Rngs(1), precision=precision)

        def loss(module: MLP) -> jax.Array:
            return jnp.mean(module(None, inputs((BATCH, IN)), None).output ** 2)

        return nnx.grad(loss)(mlp)

    g32, g16 = jax.tree.leaves(grads("float32")), jax.tree.leaves(grads("bfloat16"))
    assert {str(g.dtype) for g in g16} == {"float32"}
    for a, b in zip(g32, g16, strict=True):
        np.testing.assert_allclose(b, a, atol=0.03 * float(jnp.max(jnp.abs(a))) + 1e-6)


def rounded(x: jax.Array) -> jax.Array:
    """``x`` rounded to bfloat16, held in float32."""
    return x.astype(jnp.bfloat16).astype(jnp.float32)


@pytest.mark.parametrize(
    ("lhs_shape", "rhs_shape", "dimension_numbers"),
    [
        ((8, 24), (24, 16), (((1,), (0,)), ((), ()))),  # a layer: nnx.Linear's product
        ((3, 8, 24), (24, 16), (((2,), (0,)), ((), ()))),  # the same over a leading axis
        ((5, 6, 7), (7, 6, 4), (((2, 1), (0, 1)), ((), ()))),  # two contracted axes
        ((2, 5, 6), (6, 2, 4), (((2,), (0,)), ((0,), (1,)))),  # a batch axis
    ],
)
def test_bfloat16_gradients_multiply_rounded_values_in_float32(
    lhs_shape, rhs_shape, dimension_numbers
):
    # The gradient's products take the operands and the incoming gradient rounded to
    # bfloat16, and accumulate and return in float32. Reference: float32 products of the
    # rounded values at the highest precision (a product of two bfloat16 values is exact in
    # float32, so the two differ by the order of float32 sums only). The incoming gradient
    # is not a bfloat16 value: rounding it is part of what is checked.
    lhs, rhs = inputs(lhs_shape, 0), inputs(rhs_shape, 1)
    out_shape = jax.eval_shape(
        lambda a, b: jax.lax.dot_general(a, b, dimension_numbers), lhs, rhs
    ).shape
    weights = inputs(out_shape, 2)

    def loss(product, a, b):
        return jnp.sum(product(a, b) * weights)

    got = jax.grad(
        lambda a, b: loss(lambda x, y: bfloat16_dot_general(x, y, dimension_numbers), a, b),
        argnums=(0, 1),
    )(lhs, rhs)
    _, pullback = jax.vjp(
        lambda a, b: jax.lax.dot_general(
            a, b, dimension_numbers, precision=jax.lax.Precision.HIGHEST
        ),
        rounded(lhs),
        rounded(rhs),
    )
    want = pullback(rounded(weights))
    for g, w in zip(got, want, strict=True):
        assert g.dtype == jnp.float32 and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        # Gradients rounded to bfloat16 (what differentiating the casts gave) miss this.
        assert not np.array_equal(g, rounded(g))


def test_the_bfloat16_gradient_multiplies_bfloat16_only():
    mlp = MLP((IN, 32, OUT), rngs=nnx.Rngs(0), precision="bfloat16")
    graphdef, state = nnx.split(mlp)

    def loss(state, x):
        return jnp.sum(nnx.merge(graphdef, state)(None, x).output ** 2)

    text = jax.jit(jax.grad(loss)).lower(state, inputs((BATCH, IN))).as_text()
    products = [line for line in text.splitlines() if "stablehlo.dot_general" in line]
    # Two layers: each one's forward product and its kernel's gradient, and the gradient
    # into the second layer's input (the network input's own is not computed).
    assert len(products) == 5
    for line in products:
        operand_types = line.rsplit(":", 1)[1].split("->")[0]
        assert "f32" not in operand_types and operand_types.count("bf16") == 2, line


def compiled_products(text: str) -> list[tuple[str, str]]:
    """The operand dtypes of every matrix product in a compiled (optimized) HLO module's
    text, wherever XLA put it (at top level, or inside a fusion)."""
    dtypes = {}
    for line in text.splitlines():
        defined = re.match(r"\s*(?:ROOT )?%(\S+) = (\w+)\[", line)
        if defined:
            dtypes[defined[1]] = defined[2]
    products = re.findall(r" dot\(%([^,\s]+), %([^,\s)]+)\)", text)
    return [(dtypes[lhs], dtypes[rhs]) for lhs, rhs in products]


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's compiled program")
@pytest.mark.parametrize("precision", ["bfloat16", "float32"])
def test_the_compiled_gradient_program_multiplies_in_its_precision(precision):
    # What XLA:CPU runs, not what JAX lowers: a product contracting its left operand's rows
    # (a kernel's gradient) is one XLA:CPU would convert to float32 and run at float32's rate.
    mlp = MLP((IN, 32, OUT), rngs=nnx.Rngs(0), precision=precision)
    graphdef, state = nnx.split(mlp)

    def forward(state, x):
        return nnx.merge(graphdef, state)(None, x).output

    def loss(state, x):
        return jnp.sum(forward(state, x) ** 2)

    def products_of(f):
        return compiled_products(jax.jit(f).lower(state, inputs((BATCH, IN))).compile().as_text())

    want = "bf16" if precision == "bfloat16" else "f32"
    if products_of(forward) != [(want, want)] * 2:
        pytest.skip("XLA:CPU runs no bfloat16 products on this machine's CPU, forward included")
    assert products_of(jax.grad(loss)) == [(want, want)] * 5


def test_bfloat16_lstm_is_close_to_float32():
    x = inputs((BATCH, IN))
    outputs = {}
    for precision in ("float32", "bfloat16"):
        lstm = LSTM(IN, OUT, rngs=nnx.Rngs(2), precision=precision)
        state = lstm.initialize_state(BATCH)
        for _ in range(3):
            out = lstm(state, x)
            state = out.next_state
        assert all(s.dtype == jnp.float32 for s in state)
        outputs[precision] = out.output
    np.testing.assert_allclose(outputs["bfloat16"], outputs["float32"], atol=0.03)


def test_float32_layers_are_built_as_without_a_precision():
    assert linear_kwargs("float32") == {}
    default, explicit = (
        Dense(IN, OUT, rngs=nnx.Rngs(0)),
        Dense(IN, OUT, rngs=nnx.Rngs(0), precision="float32"),
    )
    assert nnx.graphdef(default) == nnx.graphdef(explicit)


@pytest.mark.parametrize("bad", ["float16", "bf16", None, 32])
def test_other_precisions_are_refused_naming_the_field(bad):
    with pytest.raises(ValueError, match=r"precision must be one of \['float32', 'bfloat16'\]"):
        check_precision(bad)
    with pytest.raises(ValueError, match="precision must be one of"):
        factories.make_mlp_actor_critic(4, 2, rngs=nnx.Rngs(0), precision=bad)


@pytest.mark.parametrize("kind", ["mlp", "lstm"])
def test_factories_build_bfloat16_networks_with_float32_parameters(kind):
    make = factories.FACTORIES[kind]
    network = make(5, 2, rngs=nnx.Rngs(0), precision="bfloat16")
    assert param_dtypes(network) == {"float32"}
    recipe = factories.recipe_of(network)
    assert recipe is not None and recipe["fields"]["precision"] == "bfloat16"
    rebuilt = factories.rebuild(recipe)
    assert nnx.graphdef(rebuilt) == nnx.graphdef(network)
    graphdef, state = nnx.split(network)

    def forward(state, obs):
        module = nnx.merge(graphdef, state)
        return module(module.initialize_state(BATCH), obs).output

    out = jax.eval_shape(forward, state, jax.ShapeDtypeStruct((BATCH, 5), jnp.float32))
    assert out.value_estimates.dtype == jnp.float32 and out.actions.dtype == jnp.float32


def test_float32_products_do_not_change_under_the_highest_matmul_precision_on_cpu():
    # What training's explicit matmul precision must not do on CPU: change a bit.
    if jax.default_backend() != "cpu":
        pytest.skip("on GPUs the default precision may be TF32: that is why it is explicit")
    mlp = MLP((IN, 64, OUT), rngs=nnx.Rngs(3))
    graphdef, state = nnx.split(mlp)

    def loss(state, x):
        return jnp.mean(jnp.tanh(nnx.merge(graphdef, state)(None, x).output))

    x = inputs((BATCH, IN))
    plain = jax.jit(jax.value_and_grad(loss))(state, x)
    with jax.default_matmul_precision("highest"):
        highest = jax.jit(jax.value_and_grad(loss))(state, x)
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(highest), strict=True):
        np.testing.assert_array_equal(a, b)
