"""Every toolkit layer through the existing trainer: rollout, loss replay, statistics, eval,
recording and a checkpoint (a few PPO iterations; learning is tested elsewhere)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import config as C
from nnx_ppo.algorithms.checkpointing import load_networks, make_checkpoint_fn
from nnx_ppo.algorithms.ppo import train_ppo
from nnx_ppo.algorithms.rollout import record_activations_rollout
from nnx_ppo.networks.adapter import PPOAdapter
from nnx_ppo.networks.containers import Concat, Sequential
from nnx_ppo.networks.delay import Delay
from nnx_ppo.networks.feedforward import Dense
from nnx_ppo.networks.graph import PopulationGraph
from nnx_ppo.networks.normalizer import Normalizer, NormalizerStatistics
from nnx_ppo.networks.recurrent import LSTM
from nnx_ppo.networks.sampling_layers import NormalTanhSampler
from nnx_ppo.networks.utils import Filter, Flattener, Scale
from nnx_ppo.networks.variational import AR1VariationalBottleneck

pytestmark = pytest.mark.slow


def kitchen_sink(seed: int) -> Sequential:
    """Normalizer -> graph (an LSTM edge, a delay-2 reciprocal pair) -> PPOAdapter whose
    action port runs a noisy AR(1) bottleneck and a delay line."""
    rngs = nnx.Rngs(seed)
    g = PopulationGraph(rngs)
    g.add_input("in_state", 4, input_from="state")
    g.add_input("in_target", 2, input_from="target")
    g.add_population("hidden", 8, activation="tanh")
    g.add_population("memory", 8, activation="tanh")
    g.add_output("latent", 6)
    g.add_output("critic", 1, output_to="value")
    g.connect("in_state", "hidden", transform=LSTM(4, 8, rngs))
    g.connect("in_target", "hidden")
    g.connect("hidden", "memory", delay=2, reciprocal=True)
    g.connect("hidden", "latent")
    g.connect("memory", "critic")
    g.finalize()
    action = Sequential(
        [
            Concat(latent=Scale(1.0)),
            AR1VariationalBottleneck(3, rngs, kl_weight=0.1, ar1_weight=0.1),
            Delay(jnp.zeros((3,)), 1),
            Dense(3, 4, rngs),
            NormalTanhSampler(rngs, entropy_weight=0.01),
        ]
    )
    value = Sequential([Filter({"v": "value"}), Flattener()])
    return Sequential(
        [Normalizer({"state": (4,), "target": (2,)}), g, PPOAdapter(action=action, value=value)]
    )


def test_every_layer_trains_records_and_checkpoints(tmp_path):
    env = envs.load("PointReachDict")
    net = kitchen_sink(0)
    config = C.TrainConfig(
        ppo=C.PPOConfig(n_envs=8, rollout_length=8, total_steps=3 * 64, n_minibatches=2),
        eval=C.EvalConfig(every_steps=3 * 64, n_envs=4, max_episode_length=10),
        checkpoint_every_steps=3 * 64,
        seed=0,
    )
    result = train_ppo(env, net, config, checkpoint_fn=make_checkpoint_fn(str(tmp_path)))
    assert result.total_iterations == 3  # no NonFiniteError on the way
    assert np.isfinite(result.eval_history[-1]["eval/episode_reward"])
    # The normalizer saw 3 rollouts of 8 x 8 observations.
    assert float(net.layers[0].count[...]) == 3 * 64
    activations, _ = record_activations_rollout(env, net, 2, 4, jax.random.key(1))
    # One entry per population, and the action port's bottleneck and Dense by their paths.
    populations = {"in_state", "in_target", "hidden", "memory", "latent", "critic"}
    leaves = {"layers/2/action/layers/1": (4, 2, 3), "layers/2/action/layers/3": (4, 2, 4)}
    assert set(activations) == populations | set(leaves)
    assert {k: activations[k].shape for k in leaves} == leaves

    fresh = kitchen_sink(1)
    load_networks(str(next(tmp_path.glob("step_*"))), fresh)
    for kind in (nnx.Param, NormalizerStatistics):
        for a, b in zip(
            jax.tree.leaves(nnx.state(net, kind)),
            jax.tree.leaves(nnx.state(fresh, kind)),
            strict=True,
        ):
            np.testing.assert_array_equal(a, b)
    obs = jax.vmap(env.reset)(jax.random.split(jax.random.key(2), 3)).obs
    for module in (net, fresh):
        module.eval()
    expected = net(net.initialize_state(3), obs).output.actions
    np.testing.assert_array_equal(fresh(fresh.initialize_state(3), obs).output.actions, expected)
