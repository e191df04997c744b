"""The plain-data encoding of ``metadata.pkl`` and its restricted unpickler.

Pytrees (env states with an ``mjx.Data`` inside, recurrent network states, keys) are
stored as nested ``(kind, ...)`` tuples that name dataclasses by ``"module:qualname"``
instead of pickling them, and loading admits only an allow-list of globals (numpy arrays
and scalars, the config dataclasses, ``LoggingLevel``). A downloaded checkpoint therefore
cannot run code when it is loaded.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import os
import pickle
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig, VideoConfig

FORMAT_VERSION = 1
"""Version of the ``metadata.pkl`` layout; ``load_checkpoint`` refuses other versions."""

TRUSTED_STATE_MODULES = ("nnx_ppo", "mujoco.mjx", "mujoco_playground")
"""Packages whose dataclasses and named tuples ``load_checkpoint`` may rebuild."""

_PICKLE_ALLOWED = {
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.multiarray", "scalar"),
    ("nnx_ppo.algorithms.config", "TrainConfig"),
    ("nnx_ppo.algorithms.config", "PPOConfig"),
    ("nnx_ppo.algorithms.config", "EvalConfig"),
    ("nnx_ppo.algorithms.config", "VideoConfig"),
    ("nnx_ppo.algorithms.types", "LoggingLevel"),
}
_registered_classes: dict[str, type] = {}


def register_state_class(cls: type) -> type:
    """Lets ``load_checkpoint`` rebuild ``cls`` (a dataclass or named tuple) in state pytrees.

    Needed only for env or network state classes defined outside ``TRUSTED_STATE_MODULES``.
    Usable as a class decorator.

    Args:
        cls: A module-level dataclass or named tuple class.

    Returns:
        ``cls`` itself.
    """
    if not (dataclasses.is_dataclass(cls) or _is_namedtuple_class(cls)):
        raise ValueError(f"{cls!r} is neither a dataclass nor a named tuple")
    _registered_classes[_class_name(cls)] = cls
    return cls


def is_typed_key(x: Any) -> bool:
    """Whether ``x`` is a typed JAX PRNG key array."""
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def key_impl(key: jax.Array) -> str:
    """The name of a typed key's PRNG implementation."""
    return str(jax.random.key_impl(key))


def write_metadata(path: str, metadata: dict[str, Any]) -> None:
    with open(path, "wb") as f:
        pickle.dump(metadata, f, protocol=pickle.HIGHEST_PROTOCOL)
        f.flush()
        os.fsync(f.fileno())


class _RestrictedUnpickler(pickle.Unpickler):
    """Admits only what ``save_checkpoint`` writes; any other global is refused unloaded."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _PICKLE_ALLOWED:
            raise pickle.UnpicklingError(
                f"refusing to load global {module}.{name}: a checkpoint never holds it "
                "(the file is corrupt or malicious)"
            )
        return super().find_class(module, name)


def read_metadata(path: str) -> dict[str, Any]:
    with open(path, "rb") as f:
        data = f.read()
    try:
        meta = _RestrictedUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as e:
        raise ValueError(f"cannot load {path}: {e}") from e
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        found = meta.get("format_version") if isinstance(meta, dict) else type(meta).__name__
        raise ValueError(f"{path}: unsupported checkpoint format {found!r}")
    step, config = meta.get("step"), meta.get("config")
    if isinstance(step, bool) or not isinstance(step, int):
        raise ValueError(f"{path}: malformed step {step!r}")
    if config is not None:
        meta["config"] = _revalidated(config, path)
    return meta


def _revalidated(config: Any, path: str) -> TrainConfig:
    """Rebuilds an unpickled config through its constructors, which validate every field."""
    parts = {"ppo": PPOConfig, "eval": EvalConfig, "video": VideoConfig}
    if not isinstance(config, TrainConfig) or not all(
        isinstance(getattr(config, k, None), t) for k, t in parts.items()
    ):
        raise ValueError(f"{path}: malformed config of type {type(config).__name__}")
    nested = {k: dataclasses.replace(getattr(config, k)) for k in parts}
    return dataclasses.replace(config, **nested)


def _class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _is_namedtuple_class(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def _resolve_class(name: str) -> type:
    """The class called ``module:qualname``, if it is registered or from a trusted module."""
    if name in _registered_classes:
        return _registered_classes[name]
    module, _, qualname = name.partition(":")
    trusted = any(module == m or module.startswith(m + ".") for m in TRUSTED_STATE_MODULES)
    if not trusted:
        raise ValueError(
            f"state class {name} is not from a trusted module {TRUSTED_STATE_MODULES}; "
            "register it with nnx_ppo.algorithms.checkpointing.register_state_class"
        )
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    ok = isinstance(obj, type) and _class_name(obj) == name
    if not (ok and (dataclasses.is_dataclass(obj) or _is_namedtuple_class(obj))):
        raise ValueError(f"{name} is not a dataclass or named tuple class")
    return obj


def _checked_class_name(cls: type, path: str) -> str:
    name = _class_name(cls)
    try:
        resolved = _resolve_class(name)
    except (ValueError, ImportError) as e:
        raise TypeError(f"cannot checkpoint {path}: {e}") from e
    if resolved is not cls:
        raise TypeError(f"cannot checkpoint {path}: {name} does not name its class")
    return name


def encode(x: Any, path: str) -> tuple:
    """A plain-data ``(kind, ...)`` node for the pytree ``x`` (leaves become numpy arrays)."""
    if x is None:
        return ("none",)
    if is_typed_key(x):
        return ("key", key_impl(x), np.asarray(jax.random.key_data(x)))
    if isinstance(x, jax.Array):
        return ("array", _builtin_dtype(np.asarray(x), path))
    if isinstance(x, np.ndarray | np.generic):  # static numpy fields, as in mjx.Data
        return ("numpy", _builtin_dtype(x, path))
    if isinstance(x, bool | int | float | str):
        return ("scalar", x)
    if type(x) is dict:
        for k in x:
            if not isinstance(k, str | int):
                raise TypeError(f"cannot checkpoint {path}: dict key {k!r} is not a str or int")
        return ("dict", tuple((k, encode(v, f"{path}/{k}")) for k, v in x.items()))
    if _is_namedtuple_class(type(x)):
        items = tuple(encode(v, f"{path}/{i}") for i, v in enumerate(x))
        return ("namedtuple", _checked_class_name(type(x), path), items)
    if type(x) in (tuple, list):
        return (type(x).__name__, tuple(encode(v, f"{path}/{i}") for i, v in enumerate(x)))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        name = _checked_class_name(type(x), path)
        fields = [f.name for f in dataclasses.fields(x) if f.init]
        return (
            "dataclass",
            name,
            tuple((f, encode(getattr(x, f), f"{path}/{f}")) for f in fields),
        )
    raise TypeError(f"cannot checkpoint {path}: unsupported type {type(x).__qualname__}")


def _builtin_dtype(x: Any, path: str) -> Any:
    """``x`` with numpy's own dtype object for its dtype (which the restricted unpickler
    admits), or a TypeError naming ``path`` for a dtype that has none (structured, extension
    dtypes such as bfloat16)."""
    builtin = as_builtin_dtype(x)
    if builtin is None:
        raise TypeError(f"cannot checkpoint {path}: unsupported dtype {x.dtype}")
    return builtin


def as_builtin_dtype(x: np.ndarray | np.generic) -> np.ndarray | np.generic | None:
    """``x`` itself if its dtype object is one of numpy's own; a copy with that one if its
    dtype only equals one of them; else None.

    An array that comes back from a pickle (``metadata.pkl``, or a pickle made elsewhere)
    carries a copied dtype object (``isbuiltin == 0``) equal to numpy's own ``int64`` etc.
    The static numpy fields of an ``mjx.Data`` restored from a checkpoint are such arrays,
    and they travel unchanged to the next checkpoint (through the program cache's flat
    boundary, which keeps the arguments' static fields), so both ends normalise them.
    """
    if x.dtype.isbuiltin == 1:
        return x
    if x.dtype.hasobject or x.dtype.fields is not None:
        return None
    builtin = np.dtype(x.dtype.str)  # "<i8" etc.: a structured or extension dtype has "<V.."
    if builtin.isbuiltin != 1 or builtin != x.dtype:
        return None
    return x.astype(builtin)


def expect(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, kind):
        raise ValueError(f"malformed checkpoint metadata: {what} is a {type(value).__name__}")
    return value


def decode(node: Any, path: str) -> Any:
    """Inverse of ``_encode``: jax arrays for array leaves, dataclasses rebuilt by name."""
    if not isinstance(node, tuple) or not node:
        raise ValueError(f"malformed checkpoint metadata at {path}")
    kind = node[0]
    if kind == "none":
        return None
    if kind in ("array", "key"):
        data = expect(node[-1], np.ndarray, path)
        if data.dtype.hasobject:
            raise ValueError(f"malformed checkpoint metadata: {path} holds objects")
        if kind == "array":
            return jnp.asarray(data)
        return jax.random.wrap_key_data(jnp.asarray(data), impl=expect(node[1], str, path))
    if kind == "numpy":
        value = as_builtin_dtype(expect(node[1], (np.ndarray, np.generic), path))
        if value is None:
            raise ValueError(f"malformed checkpoint metadata: {path} has an unsupported dtype")
        return value
    if kind == "scalar":
        return expect(node[1], (bool, int, float, str), path)
    if kind == "dict":
        return {k: decode(v, f"{path}/{k}") for k, v in expect(node[1], tuple, path)}
    if kind in ("tuple", "list"):
        items = [decode(v, f"{path}/{i}") for i, v in enumerate(expect(node[1], tuple, path))]
        return tuple(items) if kind == "tuple" else items
    if kind == "namedtuple":
        cls = _resolve_class(expect(node[1], str, path))
        items = expect(node[2], tuple, path)
        return cls(*(decode(v, f"{path}/{i}") for i, v in enumerate(items)))
    if kind == "dataclass":
        cls = _resolve_class(expect(node[1], str, path))
        fields = expect(node[2], tuple, path)
        return cls(**{f: decode(v, f"{path}/{f}") for f, v in fields})
    raise ValueError(f"malformed checkpoint metadata: unknown node {kind!r} at {path}")


# --- Atomic directory replacement -----------------------------------------------------------
