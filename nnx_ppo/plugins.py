"""Envs and networks from installed packages: the ``nnx_ppo.envs`` and ``nnx_ppo.networks``
entry-point groups.

A package registers factories as entry points; the entry point's name is the env's name (a
run spec's ``env.name``) or the network's (``network.kind = "plugin:<name>"``)::

    [project.entry-points."nnx_ppo.envs"]
    TwoLinkArm = "my_package.arm:make_env"  # (**overrides) -> env
    [project.entry-points."nnx_ppo.networks"]
    tiny = "my_package.nets:make_network"  # (obs_size, action_size, *, rngs, **kwargs)

Only installed entry points can be named: a name is looked up among them, never imported as
a module path. Listing reads the names and values only (``importlib.metadata``, no import);
a factory is imported (``EntryPoint.load``) when its name is asked for. The keyword
arguments given to a factory are checked against its signature and type hints first, each
refusal naming the argument. Nothing here imports JAX: the service's API process lists
plugins from this module. ``make_env`` builds a plugin env; a plugin network is built by
``nnx_ppo.networks.factories.make_plugin_network`` (the networks sit above this module).
"""

from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any

ENV_GROUP = "nnx_ppo.envs"
"""The entry-point group of env factories: ``(**overrides) -> env``."""
NETWORK_GROUP = "nnx_ppo.networks"
"""The entry-point group of network factories: ``(obs_size, action_size, *, rngs, **kwargs)
-> StatefulModule`` whose output is a ``PPONetworkOutput``."""
KIND_PREFIX = "plugin:"
"""A run spec's ``network.kind`` for a plugin network: ``"plugin:<entry point name>"``."""
_WHAT = {ENV_GROUP: "env", NETWORK_GROUP: "network"}


class PluginError(ValueError):
    """A plugin that cannot be used: base of the errors below."""


class UnknownPlugin(PluginError):
    """No installed entry point has the name (the message lists those that do)."""


class PluginUnavailable(PluginError):
    """The plugin's factory failed to import or to build; the plugin's own exception is the
    ``__cause__`` (its traceback is the plugin's)."""


class PluginArgumentError(PluginError):
    """A keyword argument the factory does not take, or of a type its hint refuses;
    ``argument`` names it."""

    def __init__(self, argument: str, message: str):
        super().__init__(message)
        self.argument = argument


def entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    """The installed entry points of ``group`` by name (the first of a repeated name wins);
    none is imported."""
    found: dict[str, metadata.EntryPoint] = {}
    for entry in metadata.entry_points(group=group):
        found.setdefault(entry.name, entry)
    return found


def package_of(entry: metadata.EntryPoint) -> str:
    """The name of the distribution that registers ``entry`` (its module's top package when
    unknown)."""
    dist = getattr(entry, "dist", None)
    return str(dist.name) if dist is not None else entry.module.split(".")[0]


def fingerprint() -> list[str]:
    """Every installed plugin as ``group:name=value package version``: changes when a plugin
    is installed, removed or upgraded (the service's env catalogue is recomputed then)."""
    lines = []
    for group in (ENV_GROUP, NETWORK_GROUP):
        for name, entry in entry_points(group).items():
            dist = getattr(entry, "dist", None)
            version = dist.version if dist is not None else "?"
            lines.append(f"{group}:{name}={entry.value} {package_of(entry)} {version}")
    return sorted(lines)


def load_factory(group: str, name: str) -> Callable[..., Any]:
    """The factory registered as ``name`` in ``group``, imported now.

    Raises:
        UnknownPlugin: If no installed entry point of ``group`` is called ``name``.
        PluginUnavailable: If importing it fails (from the plugin's exception) or it is not
            callable.
    """
    what = _WHAT[group]
    installed = entry_points(group)
    entry = installed.get(name) if isinstance(name, str) else None
    if entry is None:
        known = ", ".join(sorted(installed)) or "none"
        raise UnknownPlugin(
            f"no installed plugin {what} is called {name!r} (entry-point group {group!r}; "
            f"installed: {known})"
        )
    try:
        factory = entry.load()
    except Exception as error:
        raise PluginUnavailable(
            f"plugin {what} {name!r} ({entry.value}) failed to import: "
            f"{type(error).__name__}: {error}"
        ) from error
    if not callable(factory):
        raise PluginUnavailable(f"plugin {what} {name!r} ({entry.value}) is not callable")
    return factory


def make_env(name: str, overrides: Mapping[str, Any]) -> Any:
    """The env made by plugin env ``name``'s factory with ``overrides`` as its keyword
    arguments (checked first, see ``check_arguments``).

    Raises:
        UnknownPlugin, PluginUnavailable: see ``load_factory``; PluginUnavailable also when
            the factory raises anything but a ``ValueError`` or ``TypeError``, or returns
            something without the env interface.
        PluginArgumentError: for an override the factory does not take.
        ValueError: when the factory refuses a value.
    """
    factory = load_factory(ENV_GROUP, name)
    check_arguments(f"plugin env {name!r}", factory, overrides)
    env = call_factory(f"plugin env {name!r}", factory, (), dict(overrides))
    missing = [
        a for a in ("reset", "step", "observation_size", "action_size") if not hasattr(env, a)
    ]
    if missing:
        raise PluginUnavailable(
            f"plugin env {name!r} returned a {type(env).__name__}, which lacks {missing}"
        )
    return env


def call_factory(what: str, factory: Callable[..., Any], args: tuple[Any, ...], kwargs: Any) -> Any:
    try:
        return factory(*args, **kwargs)
    except (ValueError, TypeError) as error:  # the factory refuses a value
        raise ValueError(f"{what}: {error}") from error
    except Exception as error:
        raise PluginUnavailable(
            f"{what} failed to build: {type(error).__name__}: {error}"
        ) from error


def check_arguments(
    what: str,
    factory: Callable[..., Any],
    kwargs: Mapping[str, Any],
    *,
    positional: int = 0,
    reserved: tuple[str, ...] = (),
) -> None:
    """Refuses a keyword argument that ``factory`` does not take (its first ``positional``
    parameters and the ``reserved`` ones are the caller's), and a JSON value its type hint
    does not admit (``bool``, ``int``, ``float``, ``str``, ``None``, ``Literal``, unions,
    lists/tuples/sequences and dicts of those; an unannotated parameter takes anything).

    Raises:
        PluginArgumentError: naming the first argument refused.
    """
    signature = inspect.signature(factory)
    parameters = list(signature.parameters.values())[positional:]
    named = {
        p.name: p
        for p in parameters
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in reserved
    }
    open_ended = any(p.kind is p.VAR_KEYWORD for p in parameters)
    hints = _type_hints(factory)
    for key, value in kwargs.items():
        if key not in named:
            if open_ended and key not in reserved:
                continue
            raise PluginArgumentError(
                key, f"{what} takes no argument {key!r}; it takes: {', '.join(named) or 'none'}"
            )
        hint = hints.get(key, Any)
        if not _admits(hint, value):
            raise PluginArgumentError(
                key, f"{what}: argument {key!r} must be {_describe(hint)}, got {value!r}"
            )


def _type_hints(factory: Callable[..., Any]) -> dict[str, Any]:
    """The factory's resolved type hints; where they cannot be resolved, none (anything is
    admitted and the factory judges)."""
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        return typing.get_type_hints(target)
    except Exception:
        return {}


def _admits(hint: Any, value: Any) -> bool:
    """Whether the JSON value ``value`` fits the type hint ``hint``."""
    if hint is Any or hint is inspect.Parameter.empty:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_admits(option, value) for option in args)
    if origin is typing.Literal:
        return any(type(value) is type(option) and value == option for option in args)
    if hint is None or hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    sequences = (list, tuple, collections.abc.Sequence)
    if hint in sequences or origin in sequences:
        if not isinstance(value, list):
            return False
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(args) == len(value) and all(map(_admits, args, value))
        item = args[0] if args else Any
        return all(_admits(item, v) for v in value)
    if hint in (dict, collections.abc.Mapping) or origin in (dict, collections.abc.Mapping):
        item = args[1] if len(args) == 2 else Any
        return isinstance(value, dict) and all(_admits(item, v) for v in value.values())
    return False  # a type JSON cannot hold


def _describe(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("collections.abc.", "")
