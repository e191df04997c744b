"""``module_scan``: a scan over live modules against a plain Python loop, the rollout driver's
keys, and the eval-mode copy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nnx_ppo.algorithms.module_scan import eval_copy, scan_with_modules, unroll


class Noisy(nnx.Module):
    """``x * w + noise``, the noise from its own ``nnx.Rngs`` (a counter each call
    advances), none in eval mode."""

    def __init__(self, seed: int):
        self.w = nnx.Param(jnp.float32(2.0))
        self.rngs = nnx.Rngs(noise=seed)
        self.deterministic = False

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.deterministic:
            return x * self.w
        return x * self.w + jax.random.normal(self.rngs.noise())


def counter(module: Noisy) -> int:
    return int(module.rngs.noise.count.value)


def test_scan_with_modules_matches_a_python_loop_and_leaves_the_modules_alone():
    xs = jnp.arange(4.0)

    def body(modules, total, x):
        a, b = modules
        y = a(x) + b(x)
        return total + y, y

    a, b = Noisy(0), Noisy(1)
    total, ys, state = jax.jit(lambda xs: scan_with_modules(body, (a, b), jnp.float32(0), xs))(xs)
    assert counter(a) == counter(b) == 0  # not updated by the scan
    nnx.update((a, b), state)
    assert counter(a) == counter(b) == 4  # four calls each, carried through the scan

    la, lb = Noisy(0), Noisy(1)  # the same loop in Python
    expected = [la(x) + lb(x) for x in xs]
    np.testing.assert_allclose(ys, np.array(expected), rtol=1e-6)
    np.testing.assert_allclose(total, sum(expected), rtol=1e-6)


def test_unroll_gives_each_step_its_own_key_split_from_the_key():
    def step(module, carry, key):
        return carry + 1, jax.random.key_data(key)

    key = jax.random.key(7)
    carry, keys, _ = unroll(step, Noisy(0), jnp.int32(0), 3, key)
    assert int(carry) == 3
    np.testing.assert_array_equal(keys, jax.random.key_data(jax.random.split(key, 3)))


def test_eval_copy_is_a_copy_in_eval_mode():
    module = Noisy(0)
    copy = eval_copy(module)
    assert copy is not module and copy.deterministic and not module.deterministic
    assert float(copy(jnp.float32(3.0))) == 6.0
    assert counter(module) == 0
