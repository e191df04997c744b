"""A trained policy outside training: ``nnx_ppo.policy.load`` from a checkpoint, ``act``, and
the exported ONNX and StableHLO programs, each checked against the training network.

The reference is the network as evaluation runs it: the whole network (critic included) in
eval mode, on observations recorded from a deterministic eval rollout of a built-in env.
Its parameters are perturbed away from the factory's initialization (whose policy layer is
scaled by 0.01: every action would be near 0 and any two programs would agree) and its
normalizer holds the statistics of a first rollout, so every part of the policy matters.
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest
from flax import nnx

from nnx_ppo import envs, policy
from nnx_ppo.algorithms.checkpointing import save_checkpoint
from nnx_ppo.algorithms.step import new_training_state
from nnx_ppo.networks import factories
from nnx_ppo.policy import exporting
from tests.networks.test_graph_spec import DESCRIPTION as GRAPH

T, B = 12, 8  # steps recorded, envs
TOLERANCE = 1e-5
CASES = {
    # name: (env, factory kind, factory fields)
    "mlp": ("PointReach", "mlp", {"actor_hidden_sizes": (16, 16), "critic_hidden_sizes": (8,)}),
    "lstm": (
        "MemoryCue",
        "lstm",
        {"lstm_size": 8, "actor_hidden_sizes": (8,), "critic_hidden_sizes": (8,)},
    ),
    "dict": ("PointReachDict", "mlp", {"actor_hidden_sizes": (16,), "critic_hidden_sizes": (8,)}),
    # PointReachDict observes {"state": (4,), "target": (2,)}. The policy reads the key that
    # comes second in the flattened observation (as Playground's "state" follows
    # "privileged_state"), so that its normalizer statistics are a slice at an offset.
    "asymmetric": (
        "PointReachDict",
        "mlp",
        {
            "actor_hidden_sizes": (16,),
            "critic_hidden_sizes": (8,),
            "policy_obs_key": "target",
            "value_obs_key": "state",  # here the privileged observation
        },
    ),
    # A population graph (tests/networks/test_graph_spec.py) with a delay-1 recurrent
    # population: its policy state is the delay buffers and an int32 step counter.
    "graph": (
        "PointReachDict",
        "graph",
        {k: v for k, v in GRAPH.items() if k != "kind"},
    ),
}
ONNX_CASES = [case for case in CASES if case != "graph"]  # see the graph's own test
NOISE = {"graph": 0.1}  # its Dense edges are lecun-initialized, not scaled: less saturates


def build(case: str, seed: int = 0) -> tuple[Any, Any]:
    name, kind, fields = CASES[case]
    env = envs.load(name)
    factory = factories.FACTORIES[kind]
    network = factory(env.observation_size, env.action_size, rngs=nnx.Rngs(seed), **fields)
    params = nnx.state(network, nnx.Param)
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(seed + 100), len(leaves))
    noise = NOISE.get(case, 0.4)
    noisy = [x + noise * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys, strict=True)]
    nnx.update(network, jax.tree.unflatten(treedef, noisy))
    return env, network


def eval_rollout(env: Any, network: Any, seed: int) -> tuple[Any, np.ndarray]:
    """``(observations [T, B, ...], actions [T, B, A])`` of the network in eval mode, which
    carries its state over the ``T`` steps (no episode ends inside them)."""
    module = nnx.clone(network)
    module.eval()
    graphdef, params = nnx.split(module)

    @jax.jit
    def rollout(params: Any, key: jax.Array) -> tuple[Any, jax.Array]:
        def body(carry: Any, _: Any) -> tuple[Any, tuple[Any, jax.Array]]:
            env_s, net_s = carry
            out = nnx.merge(graphdef, params)(net_s, env_s.obs)
            actions = out.output.actions
            return (jax.vmap(env.step)(env_s, actions), out.next_state), (env_s.obs, actions)

        env_state = jax.vmap(env.reset)(jax.random.split(key, B))
        carry = (env_state, module.initialize_state(B))
        _, (obs, actions) = jax.lax.scan(body, carry, None, length=T)
        return obs, actions

    obs, actions = rollout(params, jax.random.key(seed))
    return jax.tree.map(np.asarray, obs), np.asarray(actions)


def checkpointed(tmp_path: Any, case: str) -> tuple[Any, Any, Any]:
    """The env, the trained stand-in network and a checkpoint of it in ``tmp_path``."""
    env, network = build(case)
    first_obs, _ = eval_rollout(env, network, seed=1)
    network.update_statistics(first_obs)
    state = new_training_state(env, network, B, 0)
    save_checkpoint(str(tmp_path), state, 4096)
    return env, network, state


def run_policy(pi: policy.Policy, obs: Any) -> np.ndarray:
    state, actions = pi.initial_state(B), []
    for t in range(T):
        state, action = pi.act(state, jax.tree.map(lambda x, t=t: x[t], obs))
        actions.append(action)
    return np.stack(actions)


def run_stablehlo(data: bytes, obs: list[np.ndarray], state: list[np.ndarray]) -> np.ndarray:
    call = jax.jit(jax.export.deserialize(bytearray(data)).call)
    actions = []
    for t in range(T):
        action, *state = call(*(x[t] for x in obs), *state)
        actions.append(action)
    return np.stack(actions)


def run_onnx(
    data: bytes, obs: list[np.ndarray], state: list[np.ndarray], steps: int = T
) -> np.ndarray:
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    actions = []
    for t in range(steps):
        action, *state = session.run(
            None, dict(zip(names, [x[t] for x in obs] + state, strict=True))
        )
        actions.append(action)
    return np.stack(actions)


@pytest.mark.parametrize("case", ONNX_CASES)
def test_loaded_and_exported_policies_act_as_the_training_network(tmp_path, case):
    env, network, _ = checkpointed(tmp_path, case)
    obs, expected = eval_rollout(env, network, seed=2)
    # Actions spread over (-1, 1), neither all alike nor saturated: a comparison that can
    # fail (their differences are thousands of times the tolerance).
    assert np.ptp(expected) > 0.1 and np.mean(np.abs(expected) < 0.95) > 0.3, expected

    pi = policy.load(tmp_path)  # the run's directory: its newest (only) checkpoint
    assert pi.step == 4096
    np.testing.assert_allclose(run_policy(pi, obs), expected, rtol=0, atol=TOLERANCE)

    policy_obs = jax.tree.map(np.asarray, pi.observation(obs))  # [T, B, ...] leaves
    obs_leaves = jax.tree.leaves(policy_obs)
    zeros = [np.asarray(x) for x in jax.tree.leaves(pi.initial_state(B))]
    hlo = exporting.to_stablehlo(pi)
    assert jax.export.deserialize(bytearray(hlo)).platforms == ("cpu", "cuda")
    np.testing.assert_allclose(run_stablehlo(hlo, obs_leaves, zeros), expected, atol=TOLERANCE)
    onnx_model = exporting.to_onnx(pi)
    np.testing.assert_allclose(run_onnx(onnx_model, obs_leaves, zeros), expected, atol=TOLERANCE)

    # Any batch size: the first env alone gives its actions of the whole batch.
    one = [x[:, :1] for x in obs_leaves]
    np.testing.assert_allclose(
        run_onnx(onnx_model, one, [z[:1] for z in zeros], steps=3),
        expected[:3, :1],
        atol=TOLERANCE,
    )

    session = ort.InferenceSession(onnx_model, providers=["CPUExecutionProvider"])
    inputs = [(i.name, i.shape) for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs()]
    if case == "lstm":
        assert inputs == [("obs", ["B", 2]), ("state_0", ["B", 8]), ("state_1", ["B", 8])]
        assert outputs == ["action", "next_state_0", "next_state_1"]
        # The decision step's observation is the same in every env: only the carried
        # state (the cue seen at t=0) makes the actions there differ.
        cue = obs[0][:, 0]
        decision = env.unwrapped.decision_step
        assert np.all(obs[decision] == obs[decision][0])
        assert not np.allclose(expected[decision][cue > 0], expected[decision][cue < 0][0])
    elif case == "asymmetric":
        # The policy takes the policy key's observation alone, never the privileged one.
        assert inputs == [("obs", ["B", 2])] and outputs == ["action"]
        np.testing.assert_allclose(run_policy(pi, obs["target"]), expected, atol=TOLERANCE)
    elif case == "dict":  # a symmetric network reads every key: one input each, sorted
        assert inputs == [("obs/state", ["B", 4]), ("obs/target", ["B", 2])]
    else:
        assert inputs == [("obs", ["B", 6])] and outputs == ["action"]


def test_a_population_graph_acts_and_exports_to_stablehlo_not_onnx(tmp_path):
    env, network, _ = checkpointed(tmp_path, "graph")
    obs, expected = eval_rollout(env, network, seed=2)
    assert np.ptp(expected) > 0.1 and np.mean(np.abs(expected) < 0.95) > 0.3, expected
    pi = policy.load(tmp_path)  # rebuilt from the graph's recipe
    assert pi.obs_shapes == {"state": (4,), "target": (2,)} and pi.action_size == 2
    np.testing.assert_allclose(run_policy(pi, obs), expected, rtol=0, atol=TOLERANCE)
    obs_leaves = jax.tree.leaves(jax.tree.map(np.asarray, pi.observation(obs)))
    initial = [np.asarray(x) for x in jax.tree.leaves(pi.initial_state(B))]
    assert np.int32 in [x.dtype for x in initial]  # the step counter keeps its dtype
    hlo = exporting.to_stablehlo(pi)
    np.testing.assert_allclose(run_stablehlo(hlo, obs_leaves, initial), expected, atol=TOLERANCE)
    # jax2onnx 0.17 has no batched gather or integer remainder (the delayed reads): a clear
    # error that names the format that works.
    with pytest.raises(exporting.UnsupportedExport, match="stablehlo"):
        exporting.to_onnx(pi)


def test_a_checkpoint_without_a_recipe_loads_with_a_template(tmp_path):
    env, network, _ = checkpointed(tmp_path, "mlp")
    checkpoint = policy.find_checkpoint(tmp_path)
    # As a checkpoint written before the recipe was recorded: no network_recipe at all.
    with open(f"{checkpoint}/metadata.pkl", "rb") as f:
        metadata = pickle.load(f)
    del metadata["network_recipe"]
    with open(f"{checkpoint}/metadata.pkl", "wb") as f:
        pickle.dump(metadata, f)
    with pytest.raises(ValueError, match="pass networks="):
        policy.load(tmp_path)

    _, template = build("mlp", seed=5)  # the same architecture, other values
    before = jax.tree.map(np.asarray, nnx.state(template, nnx.Param))
    pi = policy.load(checkpoint, networks=template)
    obs, expected = eval_rollout(env, network, seed=3)
    np.testing.assert_allclose(run_policy(pi, obs), expected, atol=TOLERANCE)
    after = jax.tree.map(np.asarray, nnx.state(template, nnx.Param))
    jax.tree.map(np.testing.assert_array_equal, before, after)  # the template is unchanged

    _, other = build("lstm")
    with pytest.raises(ValueError, match="does not match the network"):
        policy.load(checkpoint, networks=other)


def test_load_takes_the_newest_or_the_given_step_of_a_directory(tmp_path):
    env, network, state = checkpointed(tmp_path / "checkpoints", "mlp")
    nnx.update(network, jax.tree.map(lambda x: x + 1.0, nnx.state(network, nnx.Param)))
    save_checkpoint(str(tmp_path / "checkpoints"), state, 8192)  # state refers to network
    obs, newest = eval_rollout(env, network, seed=4)
    # A service run's directory (checkpoints/ inside) and the directory of checkpoints.
    for where in (tmp_path, tmp_path / "checkpoints"):
        assert policy.load(where).step == 8192
        assert policy.load(where, step=4096).step == 4096
    np.testing.assert_allclose(run_policy(policy.load(tmp_path), obs), newest, atol=TOLERANCE)
    older = run_policy(policy.load(tmp_path, step=4096), obs)
    assert not np.allclose(older, newest)
    with pytest.raises(FileNotFoundError, match=r"no checkpoint of step 5; its steps: \[4096, "):
        policy.load(tmp_path, step=5)
    with pytest.raises(FileNotFoundError, match="is the checkpoint of step 8192"):
        policy.load(tmp_path / "checkpoints" / "step_0000008192", step=4096)
    with pytest.raises(FileNotFoundError, match="neither a checkpoint nor"):
        policy.load(tmp_path / "nothing-here")


def test_act_refuses_observations_of_the_wrong_shape(tmp_path):
    checkpointed(tmp_path, "mlp")
    pi = policy.load(tmp_path)
    assert (pi.obs_shapes, pi.action_size) == ((6,), 2)
    with pytest.raises(ValueError, match=r"observation must be \[B, \*\(6,\)\], got shape \(6,\)"):
        pi.act((), jnp.zeros((6,)))
    with pytest.raises(ValueError, match=r"got shape \(3, 5\)"):
        pi.act((), jnp.zeros((3, 5)))


def test_onnx_without_the_export_extra_says_how_to_install_it(tmp_path, monkeypatch):
    checkpointed(tmp_path, "mlp")
    pi = policy.load(tmp_path)
    monkeypatch.setitem(sys.modules, "jax2onnx", None)  # import jax2onnx raises ImportError
    with pytest.raises(policy.MissingExtra, match=r"nnx-ppo\[export\].*--no-deps jax2onnx"):
        policy.export(pi, tmp_path / "p.onnx", "onnx")
    assert not (tmp_path / "p.onnx").exists()
    # StableHLO needs no extra.
    written = policy.export(pi, tmp_path / "p.stablehlo", "stablehlo")
    assert os.stat(written).st_mode & 0o777 == 0o644  # readable where it is copied to
    with open(written, "rb") as f:
        assert jax.export.deserialize(bytearray(f.read())).in_avals[0].shape[1] == 6
    with pytest.raises(ValueError, match="format must be one of"):
        policy.export(pi, tmp_path / "p.tflite", "tflite")
