"""Recording the composable toolkit's networks: one entry per population for a graph, one per
leaf module path for containers."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms.rollout import record_activations_rollout
from nnx_ppo.networks.adapter import PPOAdapter
from nnx_ppo.networks.containers import Sequential
from nnx_ppo.networks.feedforward import Dense
from nnx_ppo.networks.normalizer import Normalizer
from nnx_ppo.networks.recording import activations_from_metrics, with_recording
from nnx_ppo.networks.sampling_layers import NormalTanhSampler
from tests.networks.test_graph import graph_network


def test_a_graph_network_records_one_entry_per_population():
    env = envs.load("PointReachDict")
    net = graph_network("target")
    activations, dones = record_activations_rollout(env, net, 3, 5, jax.random.key(0))
    sizes = {name: a.shape for name, a in activations.items()}
    assert sizes == {
        "in_state": (5, 3, 4),
        "in_target": (5, 3, 2),
        "hidden": (5, 3, 8),
        "arm": (5, 3, 4),
        "critic": (5, 3, 1),
    }
    assert dones.shape == (5, 3)
    assert net.layers[0].record_populations is False  # the original is left as it was
    # hidden is tanh'd: its recorded values are post-activation.
    assert float(jnp.max(jnp.abs(activations["hidden"]))) <= 1.0


def test_a_container_network_records_each_leaf_layer_by_path():
    rngs = nnx.Rngs(0)
    net = Sequential(
        [
            Normalizer(3),
            PPOAdapter(
                action=Sequential(
                    [
                        Dense(3, 5, rngs, activation="relu"),
                        Dense(5, 2, rngs),
                        NormalTanhSampler(rngs, 0.0),
                    ]
                ),
                value=Dense(3, 1, rngs),
            ),
        ]
    )
    net.eval()
    recorder = with_recording(net)
    x = jnp.array([[1.0, -2.0, 0.5]])
    out = recorder(recorder.initialize_state(1), x)
    acts = activations_from_metrics(out.metrics)
    assert {k: v.shape for k, v in acts.items()} == {
        "layers/1/action/layers/0": (1, 5),
        "layers/1/action/layers/1": (1, 2),
        "layers/1/value": (1, 1),
    }
    assert float(jnp.min(acts["layers/1/action/layers/0"])) >= 0.0  # after the relu
    plain = net(net.initialize_state(1), x)
    np.testing.assert_array_equal(out.output.actions, plain.output.actions)
