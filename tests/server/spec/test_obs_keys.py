"""``network.policy_obs_key`` / ``value_obs_key`` in a run spec: the shape check, the check
against the env's observation keys, and the asymmetric network a run process builds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nnx_ppo import envs
from nnx_ppo.presets import make_networks
from server.schemas import NetworkSpec, RunCreate
from server.spec.spec_check import check_spec


def _spec(env: str, **network: object) -> dict:
    return {
        "kind": "ppo",
        "env": {"name": env},
        "network": {
            "kind": "mlp",
            "actor_hidden_sizes": [8],
            "critic_hidden_sizes": [8],
            **network,
        },
        "config": {"ppo": {"n_envs": 8, "n_minibatches": 2, "total_steps": 1000}},
    }


def _locs(error: ValidationError) -> list[tuple]:
    return [tuple(e["loc"]) for e in error.errors()]


def test_the_keys_come_together_and_only_for_mlp():
    with pytest.raises(ValidationError) as info:
        RunCreate(**_spec("PointReachDict", policy_obs_key="state"))
    assert _locs(info.value) == [("network", "value_obs_key")]
    with pytest.raises(ValidationError) as info:
        RunCreate(**_spec("PointReachDict", value_obs_key="target"))
    assert _locs(info.value) == [("network", "value_obs_key")]
    lstm = {"kind": "lstm", "policy_obs_key": "state", "value_obs_key": "target"}
    with pytest.raises(ValidationError) as info:
        NetworkSpec(**lstm)
    assert ("policy_obs_key",) in _locs(info.value)


def test_keys_the_observation_lacks_are_refused_on_the_field():
    errors, _ = check_spec(_spec("PointReachDict", policy_obs_key="state", value_obs_key="x"), None)
    assert [e["loc"] for e in errors] == [["body", "network", "value_obs_key"]]
    assert "'x' is not a key of the observation; its keys: ['state', 'target']" in errors[0]["msg"]
    errors, _ = check_spec(_spec("PointReach", policy_obs_key="a", value_obs_key="b"), None)
    assert [e["loc"] for e in errors] == [["body", "network", "policy_obs_key"]]
    assert "needs dict observations" in errors[0]["msg"]


def test_valid_keys_pass_and_build_the_asymmetric_network_a_run_trains():
    spec = _spec("PointReachDict", policy_obs_key="target", value_obs_key="state")
    assert check_spec(spec, None) == ([], 1000)
    fields = RunCreate(**spec).stored()["network"]  # what the run process reads back
    assert (fields["policy_obs_key"], fields["value_obs_key"]) == ("target", "state")
    env = envs.load("PointReachDict")
    network = make_networks(fields, env.observation_size, env.action_size, 0)
    # Each port of the composed network starts with a Filter of its key: the policy reads
    # target's 2 features, the value state's 4.
    action, value = network.layers[-1].action, network.layers[-1].value
    assert (action.layers[0].extractions, value.layers[0].extractions) == (
        {"target": "target"},
        {"state": "state"},
    )
    assert action.layers[2].linear.kernel.shape[0] == 2
    assert value.layers[2].linear.kernel.shape[0] == 4


@pytest.mark.parametrize("name", ["PointReachEnergy", "MemoryCue"])
def test_a_served_preset_is_a_spec_the_checks_accept(name):
    from server.spec.spec_check import preset_answer

    answer = preset_answer(name, "cpu")
    spec = {"kind": "ppo", **answer["spec"]}
    RunCreate(**spec)  # the shape check
    errors, steps = check_spec(spec, None)
    assert errors == [] and steps == answer["spec"]["config"]["ppo"]["total_steps"]


def test_a_locomotion_preset_keeps_the_policy_off_the_privileged_state():
    from server.spec.spec_check import preset_answer

    network = preset_answer("Go1JoystickFlatTerrain", "gpu")["spec"]["network"]
    assert (network["policy_obs_key"], network["value_obs_key"]) == ("state", "privileged_state")
    assert NetworkSpec(**network).factory_fields()["value_obs_key"] == "privileged_state"
