"""A run spec's left-out fields, filled from its env's preset (``nnx_ppo.presets``).

A spec that names an env takes that env's preset (as ``GET /api/envs/{name}/preset`` serves
it) for every field it leaves out; the spec's own fields win. ``"preset": false`` opts out
(the library's defaults apply); ``"preset": {"variant": "gpu"}`` picks the variant. What was
filled is recorded in the stored spec::

    "preset": {"name": "PointReach", "variant": "cpu", "source": "tuned",
               "filled": ["config.ppo.n_envs", "network.critic_hidden_sizes", ...]}

Per kind:

- both: ``env.randomize`` (domain randomization) when the spec leaves it out or null;
- ``ppo``: ``env.overrides`` key by key, the network's fields (only when the spec's
  ``network.kind`` is the preset's or unset: another kind's fields do not carry over), and
  every ``config`` field. When the spec sets ``config.ppo.total_steps`` but leaves a
  cadence (``eval.every_steps``, ``checkpoint_every_steps``) to the preset, the cadence
  follows the new total: the preset's number of evaluations (checkpoints) over it.
- ``distillation``: ``env.overrides`` and the evaluation's ``n_envs`` and
  ``max_episode_length`` (a preset is a PPO setup: its optimisation sizes are not a
  distillation run's).

Pure JSON: no JAX in the API process (the preset itself comes from the checker process).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

CADENCES = (("eval", "every_steps"), ("checkpoint_every_steps",))
"""Config paths that follow ``ppo.total_steps`` when only the total is set."""
_DISTILLATION_EVAL = ("n_envs", "max_episode_length")
MAX_TOTAL_STEPS = 10**12
"""``spec_config.MAX_TOTAL_STEPS`` (which imports JAX): a larger total is refused there."""


def fill(
    spec: Mapping[str, Any], network_given: set[str], answer: Mapping[str, Any]
) -> dict[str, Any]:
    """``spec`` (a stored run spec, JSON) with its left-out fields taken from the preset.

    Args:
        spec: The spec as given (``RunCreate.stored()``).
        network_given: The network fields the request named (``kind`` included if named).
        answer: ``spec_check.preset_answer``: ``{"env", "variant", "source", "spec"}``.

    Returns:
        A new spec whose ``preset`` section names the preset and the filled paths.
    """
    out = copy.deepcopy(dict(spec))
    preset = answer["spec"]
    filled: list[str] = []
    overrides = out["env"].setdefault("overrides", {})
    for key, value in preset["env"].get("overrides", {}).items():
        if key not in overrides:
            overrides[key] = copy.deepcopy(value)
            filled.append(f"env.overrides.{key}")
    if out["env"].get("randomize") is None and "randomize" in preset["env"]:
        out["env"]["randomize"] = bool(preset["env"]["randomize"])
        filled.append("env.randomize")
    config = out.setdefault("config", {})
    if out.get("kind", "ppo") == "distillation":
        section = config.get("eval", {})
        if isinstance(section, dict):
            for name in _DISTILLATION_EVAL:
                if name not in section and name in preset["config"]["eval"]:
                    section[name] = preset["config"]["eval"][name]
                    filled.append(f"config.eval.{name}")
            config["eval"] = section
    else:
        filled += _fill_network(out, network_given, preset["network"])
        config_filled = _fill_config(config, preset["config"])
        _follow_total(config, preset["config"], config_filled)
        filled += [f"config.{path}" for path in config_filled]
    out["preset"] = {
        "name": answer["env"],
        "variant": answer["variant"],
        "source": answer["source"],
        "filled": sorted(filled),
    }
    return out


def _fill_network(out: dict[str, Any], given: set[str], preset: Mapping[str, Any]) -> list[str]:
    network = out.setdefault("network", {"kind": "mlp"})
    if "kind" in given and network.get("kind") != preset.get("kind", "mlp"):
        return []
    filled = []
    for name, value in preset.items():
        if name not in given:
            network[name] = copy.deepcopy(value)
            filled.append(f"network.{name}")
    return filled


def _fill_config(config: dict[str, Any], preset: Mapping[str, Any]) -> list[str]:
    """Fills ``config`` in place; returns the filled paths (relative to ``config``), a
    section's field by field."""
    filled = []
    for name, value in preset.items():
        if isinstance(value, dict):
            section = config.setdefault(name, {})
            if not isinstance(section, dict):
                continue  # the checker names the bad section
            for field, inner in value.items():
                if field not in section:
                    section[field] = copy.deepcopy(inner)
                    filled.append(f"{name}.{field}")
        elif name not in config:
            config[name] = copy.deepcopy(value)
            filled.append(name)
    return filled


def _follow_total(config: dict[str, Any], preset: Mapping[str, Any], filled: list[str]) -> None:
    """Rescales the cadences the preset filled when the spec set its own total."""
    if "ppo.total_steps" in filled:
        return
    total = config.get("ppo", {}).get("total_steps")
    preset_total = preset["ppo"]["total_steps"]
    if not _is_count(total) or total > MAX_TOTAL_STEPS:
        return  # the checker names the bad total
    for path in CADENCES:
        if ".".join(path) not in filled:
            continue
        preset_every = preset[path[0]] if len(path) == 1 else preset[path[0]][path[1]]
        every = follow_total(preset_total, preset_every, int(total))
        if len(path) == 1:
            config[path[0]] = every
        else:
            config[path[0]][path[1]] = every


def follow_total(preset_total: int, preset_every: int, total: int) -> int:
    """A cadence for ``total`` steps with the preset's number of events over its own total.

    >>> follow_total(60_000_000, 6_666_667, 5_000_000)  # 9 evaluations over 5M
    555556
    """
    count = max(1, round(preset_total / preset_every))
    return max(1, math.ceil(total / count))


def _is_count(value: Any) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isfinite(value) and value > 0 and float(value).is_integer()
