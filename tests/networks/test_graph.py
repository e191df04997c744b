"""PopulationGraph: topological order, delayed reads from the circular buffers, reciprocal
edges, resets in the loss replay, and the errors a user meets."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import config as C
from nnx_ppo.algorithms.losses import replay_scan
from nnx_ppo.algorithms.ppo import train_ppo
from nnx_ppo.algorithms.rollout import unroll_env
from nnx_ppo.networks.adapter import PPOAdapter
from nnx_ppo.networks.containers import Sequential
from nnx_ppo.networks.feedforward import Dense
from nnx_ppo.networks.graph import PopulationGraph
from nnx_ppo.networks.sampling_layers import NormalTanhSampler
from nnx_ppo.networks.utils import Filter, Flattener, Scale


def run(graph, xs, key="out"):
    """Outputs ``key`` for each ``[B, ...]`` input of ``xs``, from a fresh carry."""
    state = graph.initialize_state(xs[0].shape[0])
    outputs = []
    for x in xs:
        out = graph(state, {"obs": x})
        state = out.next_state
        outputs.append(out.output[key])
    return outputs, state


def delay_line(k: int) -> PopulationGraph:
    """obs -> in --(identity, delay k)--> out."""
    g = PopulationGraph(nnx.Rngs(0))
    g.add_input("in", 1, input_from="obs")
    g.add_output("out", 1)
    g.connect("in", "out", transform=Scale(1.0), delay=k)
    return g.finalize()


def steps(n: int) -> list[jax.Array]:
    return [jnp.array([[float(t + 1)]]) for t in range(n)]


def test_a_delay_k_edge_reads_the_source_k_steps_ago():
    outputs, _ = run(delay_line(3), steps(6))
    # inputs 1..6; out_t = in_{t-3}, zeros until the buffer has filled.
    assert [float(o[0, 0]) for o in outputs] == [0.0, 0.0, 0.0, 1.0, 2.0, 3.0]


def test_populations_run_in_topological_order_whatever_the_insertion_order():
    g = PopulationGraph(nnx.Rngs(0))
    g.add_output("c", 1)
    g.add_population("b", 1)
    g.add_input("a", 1, input_from="obs")
    g.connect("b", "c", transform=Scale(2.0))
    g.connect("a", "b", transform=Scale(3.0))
    g.finalize()
    assert g.order == ["a", "b", "c"]
    outputs, _ = run(g, [jnp.array([[1.0]])], key="c")
    assert float(outputs[0][0, 0]) == 6.0  # c = 2 * (3 * a), all in one step


def test_a_delayed_recurrent_population_equals_the_hand_unrolled_computation():
    g = PopulationGraph(nnx.Rngs(4))
    g.add_input("x", 2, input_from="obs")
    g.add_population("h", 3, activation="tanh")
    g.add_output("y", 1, output_to="out")
    g.connect("x", "h")
    g.connect("h", "h", delay=1)
    g.connect("h", "y")
    g.finalize()
    xs = [jnp.array([[0.5, -1.0]]), jnp.array([[1.0, 0.2]]), jnp.array([[-0.3, 0.7]])]
    outputs, _ = run(g, xs)
    wx, wh, wy = (g.transforms[i].linear for i in range(3))  # in connect order
    h = jnp.zeros(
        (1, 3)
    )  # the delayed read is zero at the first step (the transform adds its bias)
    for x, out in zip(xs, outputs, strict=True):
        h = jnp.tanh(wx(x) + wh(h))  # h_t = tanh(Wx x_t + bx + Wh h_{t-1} + bh)
        np.testing.assert_allclose(out, wy(h), rtol=1e-5, atol=1e-6)


def test_reciprocal_edges_go_both_ways_with_their_own_transforms_and_the_same_delay():
    g = PopulationGraph(nnx.Rngs(0))
    g.add_input("a", 1, input_from="obs")
    g.add_output("b", 1, output_to="out")
    g.connect("a", "b", transform=Scale(2.0), delay=1, reciprocal=True)
    g.finalize()
    assert [(e.src, e.dst, e.delay) for e in g.edges] == [("a", "b", 1), ("b", "a", 1)]
    assert g.transforms[0] is not g.transforms[1]
    outputs, _ = run(g, [jnp.array([[1.0]])] * 5)
    # a_t = 1 + 2 b_{t-1}, b_t = 2 a_{t-1}: a = 1, 1, 5, 5, 21 and b = 0, 2, 2, 10, 10.
    assert [float(o[0, 0]) for o in outputs] == [0.0, 2.0, 2.0, 10.0, 10.0]
    dense = PopulationGraph(nnx.Rngs(0))
    dense.add_input("a", 2, input_from="obs")
    dense.add_output("b", 3)
    dense.connect("a", "b", reciprocal=True, delay=1)
    shapes = [t.linear.kernel.shape for t in dense.finalize().transforms]
    assert shapes == [(2, 3), (3, 2)]


def test_buffers_clear_where_an_episode_ended_in_the_loss_replay():
    g = delay_line(3)
    obs = {"obs": jnp.arange(1.0, 7.0).reshape(6, 1, 1)}  # [T=6, B=1, 1]
    done = jnp.array([[False], [True], [False], [False], [False], [False]])
    extras = [None]
    outputs, _, _ = replay_scan(
        g, g.initialize_state(1), obs, extras, done, lambda out: out.output["out"]
    )
    # The episode ends after step 1: from step 2 the buffer starts empty again, so the
    # first non-zero read is step 5's, of step 2's input (3); without the reset step 3
    # would read step 0's input (1).
    np.testing.assert_array_equal(outputs[:, 0, 0], [0.0, 0.0, 0.0, 0.0, 0.0, 3.0])
    reset = g.reset_state(run(g, steps(4))[1])
    np.testing.assert_array_equal(reset["buffers"]["in"], 0.0)
    np.testing.assert_array_equal(reset["step"], 0)


def small_graph() -> PopulationGraph:
    g = PopulationGraph(nnx.Rngs(0))
    g.add_input("a", 2, input_from="obs")
    g.add_population("b", 3)
    g.add_population("c", 3)
    g.add_output("d", 1)
    return g


def test_a_zero_delay_cycle_names_its_populations():
    g = small_graph()
    g.connect("a", "b")
    g.connect("b", "c")
    g.connect("c", "b")
    g.connect("c", "d")
    with pytest.raises(ValueError, match="zero-delay cycle through populations 'b' -> 'c' -> 'b'"):
        g.finalize()


def test_the_same_cycle_with_a_delay_is_fine():
    g = small_graph()
    g.connect("a", "b")
    g.connect("b", "c")
    g.connect("c", "b", delay=1)
    g.connect("c", "d")
    g.finalize()
    assert g.order == ["a", "b", "c", "d"]
    assert g.buffer_depth == {"c": 1}


def test_a_size_mismatch_names_the_edge_and_both_sizes():
    g = small_graph()
    with pytest.raises(
        ValueError,
        match=r"'a' -> 'b': its transform maps \[B, 2\] \(size of 'a'\) to \(1, 5\), "
        r"but 'b' has size 3",
    ):
        g.connect("a", "b", transform=Dense(2, 5, nnx.Rngs(0)))


def test_unknown_names_and_misuse_are_refused():
    g = small_graph()
    with pytest.raises(
        ValueError, match=r"unknown destination population 'e'; populations: \['a', 'b', 'c', 'd'\]"
    ):
        g.connect("a", "e")
    with pytest.raises(ValueError, match="population 'b' is already in the graph"):
        g.add_population("b", 1)
    with pytest.raises(ValueError, match="delay must be an int >= 0"):
        g.connect("a", "b", delay=-1)
    with pytest.raises(ValueError, match="must be finalized"):
        g.initialize_state(1)
    g.connect("a", "d")
    with pytest.raises(ValueError, match="population 'b' has no incoming connection"):
        g.finalize()


def test_an_input_size_that_does_not_match_the_obs_is_named():
    g = delay_line(1)
    with pytest.raises(ValueError, match=r"'in' has size 1, but obs\['obs'\] has 3 features"):
        g(g.initialize_state(2), {"obs": jnp.zeros((2, 3))})


def graph_network(input_key: str) -> Sequential:
    rngs = nnx.Rngs(0)
    g = PopulationGraph(rngs)
    g.add_input("in_state", 4, input_from="state")
    g.add_input("in_target", 2, input_from=input_key)
    g.add_population("hidden", 8, activation="tanh")
    g.add_output("arm", 4)
    g.add_output("critic", 1, output_to="value")
    g.connect("in_state", "hidden")
    g.connect("in_target", "hidden")
    g.connect("hidden", "hidden", delay=1)
    g.connect("hidden", "arm")
    g.connect("hidden", "critic")
    g.finalize()
    return Sequential(
        [
            g,
            PPOAdapter(
                action=Sequential(
                    [Filter({"a": "arm"}), Flattener(), NormalTanhSampler(rngs, 0.01)]
                ),
                value=Sequential([Filter({"v": "value"}), Flattener()]),
            ),
        ]
    )


def test_an_obs_key_the_env_lacks_is_named_before_training_starts():
    env = envs.load("PointReachDict")
    config = C.TrainConfig(ppo=C.PPOConfig(n_envs=4, rollout_length=2, total_steps=8))
    with pytest.raises(
        ValueError,
        match=r"reads obs\['targets'\], but the observation has no key 'targets'; "
        r"its keys: \['state', 'target'\]",
    ):
        train_ppo(env, graph_network("targets"), config)


def test_buffers_clear_where_an_episode_ended_in_the_rollout():
    # MemoryCue(delay=0): 2-step episodes, obs [cue, 0] then [0, 1] (done). The graph passes
    # the obs through a delay-1 edge to the sampler's parameters [loc, raw std]: at each
    # episode's first step the buffer is empty (raw std 0: scale ln 2 + 0.001); without the
    # reset it would hold the last decision obs (raw std 1: scale softplus(1) + 0.001).
    env = envs.load("MemoryCue", {"delay": 0})
    rngs = nnx.Rngs(0)
    g = PopulationGraph(rngs)
    g.add_input("in", 2, input_from="obs")
    g.add_output("out", 2)
    g.connect("in", "out", transform=Scale(1.0), delay=1)
    g.finalize()
    net = Sequential(
        [
            Filter({"obs": lambda x: x}),
            g,
            PPOAdapter(
                action=Sequential(
                    [Filter({"o": "out"}), Flattener(), NormalTanhSampler(rngs, 0.0)]
                ),
                value=Sequential([Filter({"o": "out"}), Flattener(), Dense(2, 1, rngs)]),
            ),
        ]
    )
    env_state = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 2))
    _, _, tr = unroll_env(env, env_state, net, net.initialize_state(2), 6, jax.random.key(1))
    params = tr.network_output.distribution_params
    np.testing.assert_allclose(params["scale"], np.log(2.0) + 0.001, rtol=1e-5)
    # At each decision step (odd t) the delayed read is the cue shown one step before.
    np.testing.assert_array_equal(params["loc"][1::2, :, 0], tr.obs[0::2, :, 0])
    np.testing.assert_array_equal(tr.done[1::2], True)
