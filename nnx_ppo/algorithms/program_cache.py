"""Traced and lowered programs kept on disk, so that a second process with the same
configuration skips JAX's tracing and lowering, not only XLA's compilation.

JAX's persistent compilation cache (``nnx_ppo.utils.enable_compilation_cache``) skips XLA's
compile on a second start, but every process still traces the Python step to a jaxpr and
lowers it to StableHLO before it can look the compiled code up; for a PPO iteration on a
MuJoCo env that is most of a warm start. A ``ProgramCache`` stores the lowered program of a
jitted function (``jax.export``, serialized) under a digest of everything that changes it,
and the next process with the same digest deserializes it instead of tracing. The program
that runs is the same either way (the stored one is what the first process compiled and
ran), so the numbers are the same bit for bit; XLA's compiled code for it is still found in
the compilation cache.

At the boundary every pytree is flattened to its array leaves (PRNG keys as their key data),
so the stored program holds no custom pytree nodes; the live arguments' tree structure
rebuilds the results. A result must be a pytree of the same structure as one of the
arguments (the training carry) or of plain dicts, lists and tuples of arrays (metrics);
anything else is not cached (a log line says so) and runs as a plain ``jax.jit``.

A stored program is validated when it is read (format, digest, argument and result shapes);
one that is stale or corrupt is ignored with one log line and replaced, never an error.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import logging
import os
import pathlib
import platform
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from nnx_ppo.algorithms.compile_ahead import CompiledAhead

FORMAT = 1
"""Version of the stored file's layout and of the digest's contents."""
MAGIC = b"nnx-ppo program\n"
SUFFIX = ".jaxexport"
VERSIONED = ("jax", "jaxlib", "flax", "optax", "numpy", "mujoco", "mujoco-mjx", "playground")
"""Distributions whose versions join the digest (those not installed count as absent)."""

_logger = logging.getLogger(__name__)


class ProgramCacheMiss(Exception):
    """A stored program that cannot be used (missing, stale or corrupt); says why."""


class NotCacheable(Exception):
    """A function whose results cannot cross the flat boundary; says why."""


@dataclasses.dataclass(frozen=True)
class ProgramCache:
    """Where lowered programs are stored, and what they are keyed by beside what the library
    sees itself.

    Attributes:
        directory: The folder of the stored programs (created when the first is stored),
            e.g. next to JAX's compilation cache.
        identity: A JSON-serializable description of everything the jitted functions close
            over that the library cannot see: the env (its name and overrides, or the code
            that builds it) and the network (its spec; activations and other static
            attributes are not visible in its parameters). Two configurations with equal
            identities must build the same env and network. The library adds the training
            config's fields that reach the program, the arguments' tree structure, shapes
            and dtypes, the network's graph definition, the versions of nnx_ppo's source, of
            JAX, Flax, Optax, MuJoCo and Playground, and the backend and device kind.
        log: Called with one line per load, store or ignored entry; default: this module's
            ``logging`` logger.
    """

    directory: str | os.PathLike[str]
    identity: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    log: Callable[[str], None] | None = dataclasses.field(default=None, compare=False)

    def say(self, line: str) -> None:
        (self.log or _logger.info)(f"program cache: {line}")

    def digest(self, name: str, static: Mapping[str, Any], args: Sequence[Any]) -> str:
        """The key of program ``name`` with ``static`` (what the caller's closure holds)
        called on ``args``: a sha256 of everything that changes the lowered program."""
        leaves, trees = _flatten_args(args)
        description = {
            "format": FORMAT,
            "name": name,
            "identity": self.identity,
            "static": static,
            "trees": [_no_addresses(str(t)) for t in trees],
            "leaves": [_leaf_signature(x) for x in leaves],
            "environment": _environment(),
        }
        text = _no_addresses(json.dumps(description, sort_keys=True, default=repr))
        return hashlib.sha256(text.encode()).hexdigest()

    def path(self, name: str, digest: str) -> pathlib.Path:
        return pathlib.Path(self.directory) / f"{name}-{digest[:32]}{SUFFIX}"

    def jit(
        self,
        name: str,
        fn: Callable[..., Any],
        static: Mapping[str, Any],
        donate_argnums: int | tuple[int, ...] = (),
    ) -> Callable[..., Any]:
        """``jax.jit(fn, donate_argnums=...)`` whose lowered program is loaded from this cache
        when it holds one for ``static`` and the first call's argument shapes, else traced,
        stored and used. ``static`` must name everything ``fn`` closes over that changes the
        program and that ``identity`` does not (configs, lengths, the graph definition)."""
        return CachedProgram(self, name, fn, static, donate_argnums)


class CachedProgram:
    """The callable ``ProgramCache.jit`` returns; prepares its program at the first call
    (later calls must have the same argument shapes, as a chunk driver's do)."""

    def __init__(
        self,
        cache: ProgramCache,
        name: str,
        fn: Callable[..., Any],
        static: Mapping[str, Any],
        donate_argnums: int | tuple[int, ...],
    ):
        self.cache, self.name, self.fn, self.static = cache, name, fn, static
        self.donate_argnums = donate_argnums
        self.source: str | None = None
        """How the program was obtained: "loaded", "stored", "traced" (not stored) or
        "plain" (not cacheable: a plain ``jax.jit``)."""
        self._call: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        if self._call is None:
            self._call = self._prepare(args)
        return self._call(*args)

    def compile_ahead(self, *args: Any) -> None:
        """Prepares the program for arguments shaped like ``args`` now (loaded, or traced and
        stored) and compiles it in a background thread (``compile_ahead.CompiledAhead``)."""
        if self._call is None:
            self._call = self._prepare(args, ahead=True)

    def _prepare(self, args: Sequence[Any], ahead: bool = False) -> Callable[..., Any]:
        cache = self.cache
        digest = cache.digest(self.name, self.static, args)
        path = cache.path(self.name, digest)
        boundary = _Boundary(args)
        try:
            exported, outputs = _read(path, digest, boundary)
            self.source = "loaded"
            cache.say(f"loaded {self.name} ({path.name})")
        except ProgramCacheMiss as miss:
            if path.exists():
                cache.say(f"ignoring {path.name} ({miss}); tracing {self.name} again")
            try:
                exported, outputs = boundary.export(self.fn, args)
            except Exception as why:  # NotCacheable, or what jax.export does not support
                # A genuine error in ``fn`` is raised again by the plain jit's own trace.
                reason = why if isinstance(why, NotCacheable) else type(why).__name__
                cache.say(f"{self.name} is not cacheable ({reason}); compiling it as usual")
                self.source = "plain"
                plain = jax.jit(self.fn, donate_argnums=self.donate_argnums)
                return CompiledAhead(plain, *args) if ahead else plain
            self.source = _write(self.name, path, digest, exported, outputs, cache)
        # Explicit shardings: otherwise the first call (fresh, uncommitted arrays) and the
        # next (committed results) lower and compile the program twice.
        device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        call: Callable[..., Any] = jax.jit(
            exported.call,
            in_shardings=device,
            out_shardings=device,
            donate_argnums=self.donate_argnums,
        )
        if ahead:
            call = CompiledAhead(call, *boundary.flatten(args))

        def run(*live: Any) -> Any:
            return boundary.unflatten(call(*boundary.flatten(live)), outputs)

        return run


# -- the flat boundary ----------------------------------------------------------------------


def _is_key(x: Any) -> bool:
    return hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _flatten_args(args: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    leaves, trees = [], []
    for arg in args:
        arg_leaves, tree = jax.tree.flatten(arg)
        leaves += arg_leaves
        trees.append(tree)
    return leaves, trees


def _leaf_signature(x: Any) -> list[Any]:
    if _is_key(x):
        return ["key", str(jax.random.key_impl(x)), list(x.shape)]
    return [str(jnp.result_type(x)), list(jnp.shape(x)), bool(getattr(x, "weak_type", False))]


class _Boundary:
    """Flattens the live arguments to lists of arrays per argument (keys as key data), and
    the results back (``outputs``: per result part, ``["like", i]`` for the tree of argument
    ``i``, ``["plain"]`` for plain containers; ``["single", ...]`` marks a non-tuple
    result)."""

    def __init__(self, args: Sequence[Any]):
        self.trees = [jax.tree.structure(a) for a in args]
        self.impls = [
            [jax.random.key_impl(x) if _is_key(x) else None for x in jax.tree.leaves(a)]
            for a in args
        ]
        self.specs = [
            [(tuple(jnp.shape(x)), jnp.dtype(jnp.result_type(x))) for x in group]
            for group in self.flatten(args)
        ]
        """Per argument, the ``(shape, dtype)`` of each flat leaf."""

    def flatten_like(self, i: int, value: Any) -> list[Any]:
        """The leaves of ``value``, which has argument ``i``'s structure (keys as data)."""
        return [
            jax.random.key_data(x) if impl is not None else x
            for x, impl in zip(jax.tree.leaves(value), self.impls[i], strict=True)
        ]

    def flatten(self, args: Sequence[Any]) -> list[list[Any]]:
        return [self.flatten_like(i, a) for i, a in enumerate(args)]

    def rebuild(self, i: int, leaves: Sequence[Any]) -> Any:
        wrapped = [
            jax.random.wrap_key_data(x, impl=impl) if impl is not None else x
            for x, impl in zip(leaves, self.impls[i], strict=True)
        ]
        return jax.tree.unflatten(self.trees[i], wrapped)

    def unflatten(self, flat: Any, outputs: list[Any]) -> Any:
        single = outputs[0] == "single"
        parts = [flat] if single else list(flat)
        out = tuple(
            self.rebuild(kind[1], part) if kind[0] == "like" else part
            for kind, part in zip(outputs[1:], parts, strict=True)
        )
        return out[0] if single else out

    def export(self, fn: Callable[..., Any], args: Sequence[Any]) -> tuple[Any, list[Any]]:
        outputs: list[Any] = []

        def flat_fn(*groups: list[Any]) -> Any:
            result = fn(*(self.rebuild(i, g) for i, g in enumerate(groups)))
            single = not isinstance(result, tuple) or hasattr(result, "_fields")
            parts = [result] if single else list(result)
            outputs.append("single" if single else "tuple")
            flat = []
            for part in parts:
                tree = jax.tree.structure(part)
                if tree in self.trees:
                    i = self.trees.index(tree)
                    outputs.append(["like", i])
                    flat.append(self.flatten_like(i, part))
                else:
                    _check_plain(part)
                    outputs.append(["plain"])
                    flat.append(part)
            return flat[0] if single else tuple(flat)

        specs = [[jax.ShapeDtypeStruct(*s) for s in group] for group in self.specs]
        return jax.export.export(jax.jit(flat_fn))(*specs), outputs


def _check_plain(part: Any) -> None:
    """Raises NotCacheable unless ``part`` is plain dicts (str keys), lists and tuples of
    non-key arrays."""
    if isinstance(part, dict):
        if not all(isinstance(k, str) for k in part):
            raise NotCacheable("a result dict has keys that are not strings")
        for value in part.values():
            _check_plain(value)
    elif isinstance(part, list | tuple) and not hasattr(part, "_fields"):
        for value in part:
            _check_plain(value)
    elif part is None or not hasattr(part, "dtype"):
        raise NotCacheable(f"a result of type {type(part).__name__}")
    elif _is_key(part):
        raise NotCacheable("a PRNG key outside the arguments' structure")


# -- the stored file: MAGIC, one JSON line of metadata, the serialized program -------------


def _read(path: pathlib.Path, digest: str, boundary: _Boundary) -> tuple[Any, list[Any]]:
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        raise ProgramCacheMiss("not stored") from None
    except OSError as error:
        raise ProgramCacheMiss(f"unreadable: {error}") from None
    if not blob.startswith(MAGIC):
        raise ProgramCacheMiss("not a stored program")
    header, sep, body = blob[len(MAGIC) :].partition(b"\n")
    try:
        meta = json.loads(header) if sep else None
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ProgramCacheMiss("unknown format")
    if meta.get("digest") != digest:
        raise ProgramCacheMiss("stale: stored for another configuration")
    if meta.get("size") != len(body) or meta.get("sha256") != hashlib.sha256(body).hexdigest():
        raise ProgramCacheMiss("corrupt: the program's checksum does not match")
    try:
        exported = jax.export.deserialize(bytearray(body))
    except Exception as error:  # a damaged flatbuffer raises whatever the parser meets
        raise ProgramCacheMiss(f"corrupt: {type(error).__name__}") from None
    _validate(exported, meta["outputs"], boundary)
    return exported, meta["outputs"]


def _validate(exported: Any, outputs: list[Any], boundary: _Boundary) -> None:
    """Raises ProgramCacheMiss unless the program takes the live arguments' shapes and
    returns the arguments' shapes where a result part has an argument's structure."""
    expected = [spec for group in boundary.specs for spec in group]
    got = [(tuple(a.shape), jnp.dtype(a.dtype)) for a in exported.in_avals]
    if got != expected:
        raise ProgramCacheMiss("stale: its argument shapes differ")
    try:
        parts = jax.tree.unflatten(exported.out_tree, exported.out_avals)
    except Exception:
        raise ProgramCacheMiss("corrupt: its result structure") from None
    parts = [parts] if outputs[0] == "single" else list(parts)
    if len(parts) != len(outputs) - 1:
        raise ProgramCacheMiss("stale: its result structure differs")
    for kind, part in zip(outputs[1:], parts, strict=True):
        if kind[0] != "like":
            continue
        have = [(tuple(a.shape), jnp.dtype(a.dtype)) for a in part]
        if have != boundary.specs[kind[1]]:
            raise ProgramCacheMiss("stale: its result shapes differ")


def _write(
    name: str,
    path: pathlib.Path,
    digest: str,
    exported: Any,
    outputs: list[Any],
    cache: ProgramCache,
) -> str:
    """Stores the program atomically (a temporary file renamed into place); a failure to
    store is a log line, not an error. Returns the program's source ("stored"/"traced")."""
    try:
        body = bytes(exported.serialize())
        meta = {
            "format": FORMAT,
            "digest": digest,
            "outputs": outputs,
            "size": len(body),
            "sha256": hashlib.sha256(body).hexdigest(),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + json.dumps(meta).encode() + b"\n" + body)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except Exception as error:  # disk full, read-only folder, an unserializable program
        cache.say(f"could not store {path.name} ({type(error).__name__}: {error})")
        return "traced"
    cache.say(f"stored {name} ({path.name})")
    return "stored"


# -- what the digest holds beside the arguments ----------------------------------------------


def _no_addresses(text: str) -> str:
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)


@functools.cache
def _source_digest() -> str:
    """A sha256 of nnx_ppo's Python source: any edit of the library changes every key."""
    root = pathlib.Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for file in sorted(root.rglob("*.py")):
        h.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes() + b"\0")
    return h.hexdigest()


def _environment() -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    device = jax.devices()[0]
    return {
        "nnx_ppo_source": _source_digest(),
        "versions": versions,
        "python": platform.python_version(),
        "backend": jax.default_backend(),
        "device_kind": device.device_kind,
        "devices": jax.device_count(),
        "x64": bool(getattr(jax.config, "jax_enable_x64")),  # noqa: B009 (not typed)
        "matmul_precision": str(getattr(jax.config, "jax_default_matmul_precision")),  # noqa: B009
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
