"""``config.ppo.minibatch_segment_length`` in a run spec: refused at submit for a network that
carries state, and for a length that does not divide the rollout."""

from __future__ import annotations

from server.spec.spec_check import check_spec


def _spec(network: dict, segment: int) -> dict:
    ppo = {"n_envs": 8, "n_minibatches": 2, "rollout_length": 20, "total_steps": 1000}
    return {
        "kind": "ppo",
        "env": {"name": "PointReach"},
        "network": {"actor_hidden_sizes": [8], "critic_hidden_sizes": [8], **network},
        "config": {"ppo": {**ppo, "minibatch_segment_length": segment}},
    }


def test_a_stateless_network_takes_segments():
    assert check_spec(_spec({"kind": "mlp"}, 5), None) == ([], 1000)


def test_a_recurrent_network_is_refused_on_the_field():
    errors, _ = check_spec(_spec({"kind": "lstm", "lstm_size": 4}, 5), None)
    assert [e["loc"] for e in errors] == [["body", "config", "ppo", "minibatch_segment_length"]]
    assert "needs a stateless network" in errors[0]["msg"]


def test_a_length_that_does_not_divide_the_rollout_is_refused():
    errors, _ = check_spec(_spec({"kind": "mlp"}, 7), None)
    assert [e["loc"] for e in errors] == [["body", "config", "ppo", "minibatch_segment_length"]]
    assert "a divisor of ppo.rollout_length (20)" in errors[0]["msg"]
