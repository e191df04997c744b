"""A sweep's request without a service: which values are checked before it is queued,
what a trial's values do to the spec, and the schema's refusals."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from server.spec.sweep_space import (
    PathError,
    SpaceEntry,
    SweepCreate,
    path_problem,
    variants,
    with_values,
)
from tests.service_harness import tiny_ppo_spec


def test_checked_values_cover_every_choice_bounds_and_small_integer_ranges() -> None:
    assert SpaceEntry(choice=[[16], [32, 32]]).check_values() == [[16], [32, 32]]
    assert SpaceEntry(log_uniform=(1e-4, 1e-2)).check_values() == [1e-4, 1e-2]
    # every integer of a small range: 17 may break a divisibility that 16 and 20 meet
    assert SpaceEntry(int_uniform=(16, 20)).check_values() == [16, 17, 18, 19, 20]
    assert SpaceEntry(int_uniform=(0, 1000)).check_values() == [0, 1, 500, 999, 1000]


def test_variants_and_values_in_the_spec() -> None:
    sweep = SweepCreate.model_validate(
        {
            "spec": tiny_ppo_spec(),
            "space": {
                "config.ppo.learning_rate": {"log_uniform": [1e-4, 1e-2]},
                "network.actor_hidden_sizes": {"choice": [[16], [32, 32]]},
            },
        }
    )
    # 2 + 2 single-path values, then all at their first, then all at their last extreme
    assert variants(sweep) == [
        ("config.ppo.learning_rate", {"config.ppo.learning_rate": 1e-4}),
        ("config.ppo.learning_rate", {"config.ppo.learning_rate": 1e-2}),
        ("network.actor_hidden_sizes", {"network.actor_hidden_sizes": [16]}),
        ("network.actor_hidden_sizes", {"network.actor_hidden_sizes": [32, 32]}),
        (None, {"config.ppo.learning_rate": 1e-4, "network.actor_hidden_sizes": [16]}),
        (None, {"config.ppo.learning_rate": 1e-2, "network.actor_hidden_sizes": [32, 32]}),
    ]
    base = sweep.spec.stored()
    spec = with_values(base, {"config.ppo.learning_rate": 3e-3, "env.overrides.size": 2})
    assert spec["config"]["ppo"]["learning_rate"] == 3e-3
    assert spec["env"]["overrides"] == {"size": 2}
    assert base["config"]["ppo"].get("learning_rate") is None  # the base is not changed
    with pytest.raises(PathError, match=r"config\.ppo\.n_envs is not an object"):
        with_values(base, {"config.ppo.n_envs.x": 1})
    assert sweep.trials() == 20  # the default for random and tpe


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"config.seed": {"uniform": [1, 1]}}, "low must be below high"),
        ({"config.seed": {"log_uniform": [0, 1]}}, "low must be above 0"),
        ({"config.seed": {"choice": [1, 1]}}, "values must be distinct"),
        ({"config.seed": {"choice": [1], "grid": [2]}}, "exactly one of"),
        ({"runs.seed": {"choice": [1]}}, "is not a spec path"),
        ({"config.a-b": {"choice": [1]}}, "is not a spec path"),
    ],
)
def test_the_schema_refuses(space: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValidationError, match=message):
        SweepCreate.model_validate({"spec": tiny_ppo_spec(), "space": space})


def test_a_plugin_networks_arguments_may_be_swept() -> None:
    assert path_problem("network.kwargs.hidden") is None
    assert path_problem("network.kwargs.hidden.deeper") is not None
    assert path_problem("network.actor.hidden") is not None
    spec = {"network": {"kind": "plugin:tiny"}}
    assert with_values(spec, {"network.kwargs.hidden": 8}) == {
        "network": {"kind": "plugin:tiny", "kwargs": {"hidden": 8}}
    }
