"""``network.precision`` over HTTP: other values are a 422 on the field; a bfloat16 run trains
and its log states the precision it ran with."""

from __future__ import annotations

import math

from tests.service_harness import Service, refused_locs, tiny_ppo_spec


def with_precision(precision: object, **network: object) -> dict:
    spec = tiny_ppo_spec(total_steps=1600)
    spec["network"] = {**spec["network"], **network, "precision": precision}
    return spec


def test_other_precisions_are_refused_on_the_field(service: Service) -> None:
    for bad in ("float16", "bf16", 16):
        refused = service.client.post("/api/runs", json=with_precision(bad), timeout=180)
        assert refused.status_code == 422, refused.text
        assert refused_locs(refused) == [["body", "network", "precision"]]
    plugin = with_precision("bfloat16", kind="plugin:tiny")
    del plugin["network"]["actor_hidden_sizes"], plugin["network"]["critic_hidden_sizes"]
    refused = service.client.post("/api/runs", json=plugin)
    assert refused.status_code == 422 and "precision" in refused.text, refused.text


def test_a_bfloat16_run_trains_and_logs_its_precision(service: Service) -> None:
    # The first submit loads the env for the spec check: give it time on a loaded machine.
    response = service.client.post("/api/runs", json=with_precision("bfloat16"), timeout=180)
    assert response.status_code == 201, response.text
    run = response.json()
    assert run["spec"]["network"]["precision"] == "bfloat16"
    done = service.wait_for(run["id"], timeout=600)
    assert done["status"] == "succeeded", done["error"]
    assert done["steps"] == 1600
    series = service.client.get(
        f"/api/runs/{run['id']}/metrics", params={"keys": "losses/total"}
    ).json()["series"]["losses/total"]
    assert len(series["value"]) == 10 and all(math.isfinite(v) for v in series["value"])
    log = service.client.get(f"/api/runs/{run['id']}/logs").text
    assert "precision: bfloat16, matmul precision highest, device cpu" in log, log
