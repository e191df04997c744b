"""The LSTM actor-critic the factory builds from the toolkit's parts
(``composed.compose_lstm_actor_critic``) against the ``PPONetwork`` it built before
(``legacy.ppo_network_lstm_actor_critic``): for the same seed, equal parameters, equal
outputs and carries step by step (episode ends included), equal training losses; and the
toolkit ``LSTM``'s ``concat_inputs`` option that makes it so."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import config as C
from nnx_ppo.algorithms.ppo import train_ppo
from nnx_ppo.networks import factories, legacy
from nnx_ppo.networks.adapter import PPOAdapter
from nnx_ppo.networks.containers import Sequential
from nnx_ppo.networks.recurrent import LSTM, ConcatLSTMCell, forget_bias_init

OBS, ACTIONS, BATCH = 5, 2, 6
SIZES = {"lstm_size": 8, "actor_hidden_sizes": (8,), "critic_hidden_sizes": (4, 4)}


def both(seed: int = 0, **kw: Any) -> tuple[Any, Any]:
    """(old PPONetwork build, composed factory network) for the same seed and arguments."""
    args = {**SIZES, **kw}
    old = legacy.ppo_network_lstm_actor_critic(OBS, ACTIONS, rngs=nnx.Rngs(seed), **args)
    new = factories.make_lstm_actor_critic(OBS, ACTIONS, rngs=nnx.Rngs(seed), **args)
    return old, new


def variables(module: Any, renames: Any = None) -> dict[tuple[str, ...], np.ndarray]:
    out = {}
    for path, variable in nnx.to_flat_state(nnx.state(module)):
        value = variable.get_value()
        if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            value = jax.random.key_data(value)
        if renames is not None:
            path = legacy.rename_path(tuple(path), renames, to_old=False)
        out[tuple(map(str, path))] = np.asarray(value)
    return out


def ended(done: np.ndarray, reset: Any, carry: Any) -> Any:
    """``carry`` with the envs whose episode ended (``done``, ``[B]``) at ``reset``."""
    return jax.tree.map(lambda r, s: jnp.where(done[:, None], r, s), reset, carry)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"normalize_obs": False},
        {"reward_streams": ("a", "b")},
        {"precision": "bfloat16", "activation": "tanh"},
    ],
)
def test_the_factory_network_equals_the_old_build_step_by_step(options) -> None:
    old, new = both(3, **options)
    assert isinstance(new, Sequential) and isinstance(new.layers[-1], PPOAdapter)
    assert isinstance(new.layers[-1].action.layers[0], LSTM)
    assert factories.recipe_of(new) == factories.recipe_of(old)
    # Same parameters (and sampler RNG) under the renames that translate old checkpoints.
    renames = legacy.legacy_renames(new)
    expected, got = variables(old, renames), variables(new)
    assert set(expected) == set(got)
    for path, value in expected.items():
        np.testing.assert_array_equal(got[path], value, err_msg="/".join(path))

    # Same outputs and carries over steps, with some envs' episodes ending at steps 2 and 4.
    xs = jax.random.normal(jax.random.key(1), (6, BATCH, OBS)) * 2
    done = np.zeros((6, BATCH), bool)
    done[2, :3] = done[4, 1::2] = True
    old_s, new_s = old.initialize_state(BATCH), new.initialize_state(BATCH)
    for t in range(6):
        out_old, out_new = old(old_s, xs[t]), new(new_s, xs[t])
        for field in ("actions", "loglikelihoods", "value_estimates", "regularization_loss"):
            a, b = getattr(out_old.output, field, None), getattr(out_new.output, field, None)
            if a is None:  # regularization_loss is the StatefulOutput's
                a, b = out_old.regularization_loss, out_new.regularization_loss
            jax.tree.map(np.testing.assert_array_equal, b, a)
        old_s, new_s = out_old.next_state, out_new.next_state
        (h, c), _ = old_s["actor"]
        assert not np.allclose(h, 0) and not np.allclose(c, 0)
        # The old carry (h, c) per side is the new LSTMs' (c, h).
        jax.tree.map(np.testing.assert_array_equal, new_s, legacy.legacy_carry(new, old_s))
        old_s = ended(done[t], old.reset_state(old_s), old_s)
        new_s = ended(done[t], new.reset_state(new_s), new_s)
    reset = new.reset_state(new_s)
    assert all(np.all(np.asarray(x) == 0) for x in jax.tree.leaves(reset))


def test_both_train_identically_on_memory_cue() -> None:
    env = envs.load("MemoryCue", {})
    ppo = C.PPOConfig(n_envs=8, rollout_length=8, total_steps=3 * 64, n_minibatches=2)
    config = C.TrainConfig(ppo=ppo, eval=C.EvalConfig(enabled=False), seed=2)

    def losses(network: nnx.Module) -> list[dict[str, float]]:
        logged: list[dict[str, float]] = []
        log = lambda m, _s: logged.append({k: float(v) for k, v in m.items() if "loss" in k})  # noqa: E731
        train_ppo(env, network, config, log_fn=log)
        return logged

    args = (env.observation_size, env.action_size)
    fixed = losses(legacy.ppo_network_lstm_actor_critic(*args, rngs=nnx.Rngs(0), **SIZES))
    parts = losses(factories.make_lstm_actor_critic(*args, rngs=nnx.Rngs(0), **SIZES))
    assert len(fixed) == 3 and fixed[0]
    assert parts == fixed


def test_concat_inputs_is_one_kernel_over_x_and_h() -> None:
    lstm = LSTM(3, 4, nnx.Rngs(0), bias_init=forget_bias_init(1.0), concat_inputs=True)
    assert isinstance(lstm.cell, ConcatLSTMCell)
    kernel, bias = lstm.cell.gates.kernel[...], lstm.cell.gates.bias[...]
    assert kernel.shape == (3 + 4, 16)
    np.testing.assert_array_equal(bias, np.repeat([0.0, 1.0, 0.0, 0.0], 4))  # (i, f, g, o)
    c0 = jnp.full((2, 4), 0.5)
    h0 = jnp.linspace(-1, 1, 8).reshape(2, 4)
    x = jnp.arange(6.0).reshape(2, 3) / 6
    out = lstm((c0, h0), x)
    # By hand: z = [x, h] W + b, split into (i, f, g, o); c' = σ(f)c + σ(i)tanh(g),
    # h' = σ(o)tanh(c'). The carry is (c', h'), the output h'.
    z = np.concatenate([x, h0], axis=-1) @ np.asarray(kernel) + np.asarray(bias)
    i, f, g, o = np.split(z, 4, axis=-1)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    c1 = sig(f) * np.asarray(c0) + sig(i) * np.tanh(g)
    h1 = sig(o) * np.tanh(c1)
    np.testing.assert_allclose(out.next_state[0], c1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.next_state[1], h1, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out.output, out.next_state[1])


def test_lstm_options_that_do_not_apply_are_refused() -> None:
    with pytest.raises(ValueError, match="recurrent_kernel_init"):
        LSTM(
            3,
            4,
            nnx.Rngs(0),
            recurrent_kernel_init=nnx.initializers.zeros_init(),
            concat_inputs=True,
        )
    with pytest.raises(ValueError, match="concat_inputs"):
        LSTM(3, 4, nnx.Rngs(0), precision="bfloat16")
    with pytest.raises(ValueError, match="precision"):
        LSTM(3, 4, nnx.Rngs(0), concat_inputs=True, precision="float16")
    assert isinstance(LSTM(3, 4, nnx.Rngs(0)).cell, nnx.OptimizedLSTMCell)  # the default
