"""Load environments by name: the built-in envs, or any MuJoCo Playground env.

MuJoCo Playground is imported inside the functions that need it (it takes seconds to
import), so importing ``nnx_ppo.envs`` stays cheap.

Envs that need MuJoCo Menagerie (``nnx_ppo.catalogue.MENAGERIE_ASSETS``) load from
``$NNX_PPO_MENAGERIE_DIR`` when it is set, otherwise from Playground's own copy or the asset
wheels of the ``nnx-ppo[menagerie]`` extra (``nnx_ppo.menagerie``). When their assets are
missing, ``load`` raises ``AssetsMissing`` (a ``ValueError``) naming the
env, the missing folder and the fix; Playground's own ``git clone`` is never run from here.

Plugin envs (``nnx_ppo.plugins``: the ``nnx_ppo.envs`` entry points of installed packages)
load by their entry point's name, after the built-in and Playground names.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax

from nnx_ppo import catalogue, plugins
from nnx_ppo.envs import playground_compat
from nnx_ppo.envs.registry import BUILTIN_ENVS
from nnx_ppo.envs.wrappers import EpisodeWrapper

_EPISODE_LENGTH = "episode_length"
_FALLBACK_EPISODE_LENGTH = 1000


class AssetsMissing(ValueError):
    """An env's MuJoCo Menagerie assets are not on this machine; the message says which
    folder and how to get it."""


def available_envs() -> list[str]:
    """Names that ``load`` accepts: the built-in envs, then MuJoCo Playground's envs
    (including those whose assets are missing; see ``unavailable_reason``), then the
    installed plugin envs.

    Returns:
        The env names, built-in names first.
    """
    return list(BUILTIN_ENVS) + list(_playground_env_names()) + catalogue.plugin_env_names()


def unavailable_reason(name: str) -> str | None:
    """Why ``name`` cannot be loaded on this machine (missing Menagerie assets, with the
    fix), or None when it can. Cheap: it only looks at the file system."""
    return catalogue.missing_assets(name)


def load(name: str, overrides: Mapping[str, Any] | None = None) -> EpisodeWrapper:
    """Creates the env called ``name``, wrapped in ``EpisodeWrapper``.

    Built-in envs (``PointReach``, ``PointReachDict``, ``MemoryCue``) take their constructor
    keywords as overrides. Any other name is loaded with
    ``mujoco_playground.registry.load(name, config_overrides=overrides)``; keys may be dotted
    paths into the env's config (``"vision_config.nworld"``). When ``impl`` is not
    overridden, :func:`default_impl` chooses it: ``"jax"`` on the CPU (Playground's default
    ``warp`` is ~30x slower there) or where ``warp-lang`` is not installed.

    ``episode_length`` is accepted for every env. It defaults to the built-in env's
    ``default_episode_length``, or to the Playground env's ``config.episode_length``.

    Args:
        name: An env name from ``available_envs()``.
        overrides: Config overrides, as described above; ``None`` for none.

    Returns:
        The env in an ``EpisodeWrapper``.

    Raises:
        AssetsMissing: If the env needs MuJoCo Menagerie assets that are not here.
        ValueError: If ``name`` is unknown (the message lists available names), if an
            override key is unknown (the message names it), or if a value is invalid.
    """
    overrides = dict(overrides or {})
    if name in BUILTIN_ENVS:
        return _load_builtin(name, overrides)
    if name in _playground_env_names():
        return _load_playground(name, overrides)
    if name in catalogue.plugin_env_names():
        return _load_plugin(name, overrides)
    builtin = ", ".join(BUILTIN_ENVS)
    playground = ", ".join(_playground_env_names())
    installed = ", ".join(catalogue.plugin_env_names())
    raise ValueError(
        f"unknown env name {name!r}{catalogue.did_you_mean(name)}. Built-in envs: {builtin}. "
        "MuJoCo Playground envs: "
        f"{playground}." + (f" Plugin envs: {installed}." if installed else "")
    )


def describe(name: str) -> dict[str, Any]:
    """Summarizes an env for listings (e.g. the server's ``GET /api/envs``).

    Cheap for built-in envs; a Playground env is loaded (with default overrides), which
    takes about a second and may trace its ``reset``.

    Args:
        name: An env name from ``available_envs()``.

    Returns:
        ``{"name", "observation_size", "action_size", "source"}``, where
        ``observation_size`` is an int or, for dict observations, a dict of shape tuples, and
        ``source`` is ``"builtin"``, ``"playground"`` or ``"plugin:<package>"``; plus
        ``"action_heads"`` (``{head: size}``; ``action_size`` is then their total) for an
        env with dict actions, and ``"reward_streams"`` (the names, for ``reward_streams=``
        of the network factories) for an env whose reward is a dict.

    Raises:
        ValueError: If ``name`` is unknown.
    """
    if name in BUILTIN_ENVS:
        env: Any = BUILTIN_ENVS[name]()
        source = "builtin"
    else:
        env = load(name)
        source = catalogue.source_of(name)
    size = env.action_size
    heads = {str(h): int(n) for h, n in size.items()} if isinstance(size, Mapping) else None
    entry = {
        "name": name,
        "observation_size": env.observation_size,
        "action_size": sum(heads.values()) if heads else int(size),
        "source": source,
    }
    if heads is not None:
        entry["action_heads"] = heads
    streams = reward_streams(env)
    if streams is not None:
        entry["reward_streams"] = list(streams)
    return entry


def reward_streams(env: Any) -> tuple[str, ...] | None:
    """The names of ``env``'s reward streams when its reward is a dict, else None (from
    the shapes of its ``reset``: nothing is compiled)."""
    reward = jax.eval_shape(env.reset, jax.random.key(0)).reward
    if not isinstance(reward, dict):
        return None
    return tuple(sorted(reward))


def _load_builtin(name: str, overrides: dict[str, Any]) -> EpisodeWrapper:
    env_class = BUILTIN_ENVS[name]
    parameters = inspect.signature(env_class.__init__).parameters
    accepted = {p for p in parameters if p != "self"} | {_EPISODE_LENGTH}
    unknown = sorted(set(overrides) - accepted)
    if unknown:
        raise ValueError(
            f"unknown override key(s) {unknown} for env {name!r}; accepted keys: {sorted(accepted)}"
        )
    episode_length = overrides.pop(_EPISODE_LENGTH, None)
    env = env_class(**overrides)
    if episode_length is None:
        episode_length = env.default_episode_length
    return EpisodeWrapper(env, episode_length)


def _load_plugin(name: str, overrides: dict[str, Any]) -> EpisodeWrapper:
    """A plugin env: its factory takes the overrides (``episode_length`` is the
    wrapper's), its ``default_episode_length`` (if it has one) sets the horizon."""
    episode_length = overrides.pop(_EPISODE_LENGTH, None)
    env = plugins.make_env(name, overrides)
    if episode_length is None:
        episode_length = getattr(env, "default_episode_length", _FALLBACK_EPISODE_LENGTH)
    return EpisodeWrapper(env, episode_length)


def _load_playground(name: str, overrides: dict[str, Any]) -> EpisodeWrapper:
    reason = catalogue.missing_assets(name)
    if reason is not None:
        raise AssetsMissing(reason)
    from mujoco_playground import registry  # Slow import, kept lazy.

    playground_compat.install()
    if name in catalogue.MENAGERIE_ASSETS:
        _point_playground_at_menagerie(name)
    default_config = registry.get_default_config(name)
    unknown = sorted(key for key in overrides if not _config_has_key(default_config, key))
    if bad_keys := [key for key in unknown if key != _EPISODE_LENGTH]:
        raise ValueError(
            f"unknown override key(s) {bad_keys} for env {name!r}; accepted keys: "
            f"{sorted(default_config.keys())} (dotted paths reach nested fields)"
        )
    episode_length = overrides.get(_EPISODE_LENGTH)
    if _EPISODE_LENGTH in unknown:  # Not a config field of this env: for the wrapper only.
        del overrides[_EPISODE_LENGTH]
    if "impl" not in overrides and "impl" in default_config:
        impl = default_impl(jax.default_backend(), _warp_installed())
        if impl is not None:
            overrides["impl"] = impl
    try:
        env = registry.load(name, config_overrides=overrides or None)
    except (KeyError, TypeError) as err:
        raise ValueError(f"invalid overrides {overrides!r} for env {name!r}: {err}") from err
    if episode_length is None:
        config = getattr(env, "_config", default_config)
        episode_length = int(config.get(_EPISODE_LENGTH, _FALLBACK_EPISODE_LENGTH))
    return EpisodeWrapper(env, episode_length)


def _point_playground_at_menagerie(name: str) -> None:
    """Makes Playground read Menagerie from the root that holds ``name``'s robot folders
    (``catalogue.menagerie_root``) and replaces its clone-on-first-use with an
    ``AssetsMissing`` error. Playground reads ``MENAGERIE_PATH`` only while an env is
    built, so setting it per load is enough."""
    from etils import epath  # type: ignore[import-untyped]
    from mujoco_playground._src import mjx_env

    root = catalogue.menagerie_root(name)
    if root is not None:
        mjx_env.MENAGERIE_PATH = epath.Path(root)

    def refuse_to_clone() -> None:
        if not Path(mjx_env.MENAGERIE_PATH).is_dir():
            raise AssetsMissing(
                catalogue.missing_assets(name) or f"MuJoCo Menagerie is missing for {name!r}"
            )

    mjx_env.ensure_menagerie_exists = refuse_to_clone


def _playground_env_names() -> tuple[str, ...]:
    return tuple(catalogue.PLAYGROUND_FAMILIES)


def default_impl(backend: str, warp_installed: bool) -> str | None:
    """The physics ``impl`` to load a Playground env with when the caller names none.

    ``"jax"`` (MJX's JAX implementation) on the CPU, where Playground's default ``warp`` is
    ~30x slower, and wherever ``warp-lang`` is not installed (a GPU machine that got only the
    wheels it can carry: warp-lang is ~400 MB installed); otherwise None: Playground's own
    default.
    """
    return "jax" if backend == "cpu" or not warp_installed else None


def _warp_installed() -> bool:
    return importlib.util.find_spec("warp") is not None


def _config_has_key(config: Any, dotted_key: str) -> bool:
    """Whether ``dotted_key`` (``"a.b.c"``) names a field of a ``ConfigDict``."""
    node = config
    for part in dotted_key.split("."):
        try:
            if part not in node:
                return False
            node = node[part]
        except TypeError:  # Reached a leaf value before the end of the path.
            return False
    return True
