"""Checkpointing utilities for saving and loading training state.

A checkpoint is one directory, ``{directory}/step_{step:010d}/``, holding

* ``networks/``: an Orbax checkpoint (a pure dict, as ``nnx.State.to_pure_dict`` gives it) of
  every network variable that does not hold a PRNG key: ``nnx.Param``, ``nnx.RngCount``,
  ``NormalizerStatistics``, ...
* ``optimizer/``: an Orbax checkpoint of every optimizer state array, in the same form.
* ``metadata.pkl``: a pickle of plain data (builtin containers, strings, numbers, numpy
  arrays; the ``TrainConfig`` with its ``LoggingLevel`` flags is the only class instance):
  the PRNG-key variables as raw key data, the rest of the ``TrainingState``
  (``network_states``, ``env_states``, ``rng_key``, ``steps_taken``), the step, the
  optional ``TrainConfig`` and, for a network built by ``nnx_ppo.networks.factories``, its
  recipe (``network_recipe``: what rebuilds it without a template; absent in checkpoints
  written before it was recorded, None for other networks).

Pytrees in ``metadata.pkl`` (env states in particular, e.g. a Playground state with an
``mjx.Data`` inside) are stored as nested ``(kind, ...)`` tuples that name dataclasses by
``"module:qualname"`` instead of pickling them. Loading unpickles with an allow-list (numpy
arrays, the config dataclasses, ``LoggingLevel``; nothing else can be called) and rebuilds
dataclasses only from trusted modules (``nnx_ppo``, ``mujoco.mjx``, ``mujoco_playground``)
or classes passed to ``register_state_class``.

Writes are atomic: a checkpoint is written into a hidden temporary sibling directory and
renamed to ``step_...`` once complete, so a crash never leaves a half-written ``step_``
directory. Everything here runs in the host loop, outside jit.
"""

from __future__ import annotations

import os
import shutil
import uuid
from typing import Any, Protocol

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

from nnx_ppo.algorithms.checkpoint_metadata import (
    FORMAT_VERSION,
    decode,
    encode,
    expect,
    is_typed_key,
    key_impl,
    read_metadata,
    write_metadata,
)
from nnx_ppo.algorithms.checkpoint_metadata import TRUSTED_STATE_MODULES as TRUSTED_STATE_MODULES
from nnx_ppo.algorithms.checkpoint_metadata import register_state_class as register_state_class
from nnx_ppo.algorithms.config import TrainConfig
from nnx_ppo.algorithms.types import TrainingState
from nnx_ppo.envs import randomization
from nnx_ppo.networks import factories, legacy
from nnx_ppo.utils import same_shapes

_NETWORKS, _OPTIMIZER, _METADATA = "networks", "optimizer", "metadata.pkl"
_STATE_FIELDS = ("network_states", "env_states", "rng_key", "steps_taken")
Renames = tuple[tuple[tuple[Any, ...], tuple[Any, ...]], ...]


class CheckpointCallback(Protocol):
    """Protocol for checkpoint callbacks with named parameters."""

    def __call__(self, training_state: TrainingState, step: int) -> None: ...


def make_checkpoint_fn(directory: str, config: TrainConfig | None = None) -> CheckpointCallback:
    """Create a checkpoint callback that saves TrainingState to disk.

    Each checkpoint is written to ``{directory}/step_{step:010d}/`` (see the module docstring
    for its contents) by ``save_checkpoint``. To resume training from a checkpoint, use
    ``load_checkpoint()``.

    Args:
        directory: Base directory under which checkpoint subdirectories are created.
        config: Optional TrainConfig to store alongside each checkpoint, useful for
            reproducing training runs.

    Returns:
        A callback compatible with train_ppo's checkpoint_fn parameter.

    Raises:
        ValueError: If ``config`` is neither None nor a TrainConfig.

    Example:
        >>> result = train_ppo(
        ...     env, networks, config,
        ...     checkpoint_fn=make_checkpoint_fn("/tmp/my_run", config=config),
        ... )
    """
    if config is not None and not isinstance(config, TrainConfig):
        raise ValueError(f"config must be a TrainConfig or None, got {type(config).__name__}")

    def checkpoint_fn(training_state: TrainingState, step: int) -> None:
        save_checkpoint(directory, training_state, step, config)

    return checkpoint_fn


def save_checkpoint(
    directory: str, training_state: TrainingState, step: int, config: TrainConfig | None = None
) -> str:
    """Writes ``training_state`` to ``{directory}/step_{step:010d}/`` atomically.

    The checkpoint is assembled in a hidden sibling directory and renamed into place when
    complete. An existing checkpoint of the same step is replaced: it is first renamed to a
    hidden name, so a crash between the two renames leaves no ``step_`` directory for that
    step rather than a half-written one (the old copy survives under the hidden name).

    Args:
        directory: Base directory of the run; created if missing.
        training_state: The state to save (e.g. what ``train_ppo`` hands its checkpoint_fn).
        step: Training env steps at which the state was reached, an int >= 0.
        config: Optional TrainConfig stored in ``metadata.pkl``.

    Returns:
        The path of the checkpoint directory.

    Raises:
        ValueError: If ``step`` is not an int >= 0.
        TypeError: If a state pytree holds a value that cannot be checkpointed (the message
            names its path).
    """
    if isinstance(step, bool) or not isinstance(step, int | np.integer) or step < 0:
        raise ValueError(f"step must be an int >= 0, got {step!r}")
    name = f"step_{int(step):010d}"
    directory = os.path.abspath(os.fspath(directory))
    os.makedirs(directory, exist_ok=True)
    net_keys, net_arrays = nnx.state(training_state.networks, _is_key_variable, ...)
    opt_keys, opt_arrays = nnx.state(training_state.optimizer, _is_key_variable, ...)
    metadata = {
        "format_version": FORMAT_VERSION,
        "step": int(step),
        "network_rng_keys": _encode_key_variables(net_keys),
        "optimizer_rng_keys": _encode_key_variables(opt_keys),
        **{k: encode(getattr(training_state, k), k) for k in _STATE_FIELDS},
        "config": config,
        "network_recipe": factories.recipe_of(training_state.networks),
    }
    tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex[:8]}.tmp")
    os.mkdir(tmp)  # hidden, and never named step_*: load_checkpoint cannot mistake it
    try:
        _save_arrays(os.path.join(tmp, _NETWORKS), nnx.to_pure_dict(net_arrays))
        _save_arrays(os.path.join(tmp, _OPTIMIZER), nnx.to_pure_dict(opt_arrays))
        write_metadata(os.path.join(tmp, _METADATA), metadata)
        _sync_directory(tmp)
        final = os.path.join(directory, name)
        _rename_into_place(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def load_checkpoint(path: str, networks: Any, optimizer: nnx.Optimizer) -> dict[str, Any]:
    """Load a checkpoint saved by make_checkpoint_fn().

    The networks and optimizer arguments serve as structural templates: their architecture
    must match the checkpoint, but their current parameter values are irrelevant and will be
    overwritten in-place by the checkpoint values. Everything is checked before anything is
    overwritten, so a failed load leaves the templates as they were.

    Args:
        path: Path to the step checkpoint directory, e.g. /tmp/my_run/step_0000500000.
        networks: Network instance with the same architecture as the checkpoint. Weights are
            updated in-place.
        optimizer: Optimizer instance with the same structure as the checkpoint. State is
            updated in-place.

    Returns:
        A dict with the following keys: "training_state" (the restored TrainingState, whose
        networks and optimizer are the templates), "step" (training step at which the
        checkpoint was saved, int) and "config" (TrainConfig if one was stored, else None).

    Raises:
        FileNotFoundError: If ``path`` is not a checkpoint directory.
        ValueError: If the templates do not match the checkpoint (the message names the
            differing variables and their shapes), or if ``metadata.pkl`` is malformed or
            references anything a checkpoint never holds.

    Example:
        >>> networks = factories.make_mlp_actor_critic(...)
        >>> training_state = ppo.new_training_state(env, networks, n_envs, seed)
        >>> ckpt = load_checkpoint(
        ...     "/tmp/my_run/step_0000500000",
        ...     training_state.networks,
        ...     training_state.optimizer,
        ... )
        >>> train_ppo(env, networks, config, initial_state=ckpt["training_state"])
    """
    path = os.path.abspath(os.fspath(path))
    for entry in (_NETWORKS, _OPTIMIZER, _METADATA):
        if not os.path.exists(os.path.join(path, entry)):
            raise FileNotFoundError(f"{path} is not a checkpoint: {entry} is missing")
    meta = read_metadata(os.path.join(path, _METADATA))
    net_keys, net_arrays = nnx.state(networks, _is_key_variable, ...)
    opt_keys, opt_arrays = nnx.state(optimizer, _is_key_variable, ...)
    renames = _renames(os.path.join(path, _NETWORKS), networks)
    # Check everything first, so that a mismatch leaves the templates untouched.
    _check_layout(os.path.join(path, _NETWORKS), net_arrays, "network", renames)
    _check_layout(os.path.join(path, _OPTIMIZER), opt_arrays, "optimizer", renames)
    try:
        net_key_values = _decode_key_variables(
            meta["network_rng_keys"], net_keys, "network", renames
        )
        opt_key_values = _decode_key_variables(
            meta["optimizer_rng_keys"], opt_keys, "optimizer", renames
        )
        states = {k: decode(meta[k], k) for k in _STATE_FIELDS}
    except (IndexError, KeyError, TypeError) as e:
        raise ValueError(f"malformed checkpoint metadata in {path}: {e!r}") from e
    if renames is not None:
        states["network_states"] = _legacy_network_states(networks, states["network_states"])
    _check_network_states(networks, states["network_states"], states["env_states"])

    _restore_arrays(os.path.join(path, _NETWORKS), networks, net_arrays, renames)
    _restore_arrays(os.path.join(path, _OPTIMIZER), optimizer, opt_arrays, renames)
    _update_keys(networks, net_keys, net_key_values)
    _update_keys(optimizer, opt_keys, opt_key_values)
    training_state = TrainingState(networks=networks, optimizer=optimizer, **states)
    return {"training_state": training_state, "step": meta["step"], "config": meta["config"]}


def checkpoint_misfits(
    path: str, networks: Any, n_envs: int, randomized: bool | None = None
) -> dict[str, str]:
    """What stops resuming from the checkpoint at ``path`` with ``networks`` and ``n_envs``
    envs (an addition to the seed API), without loading its arrays: ``{"network": why}``
    when the stored variables differ from the network's (names and shapes), ``{"n_envs":
    why}`` when it holds another number of envs, ``{"randomize": why}`` when ``randomized``
    (a bool: whether the run resumed uses domain randomization) differs from whether its
    envs carry model variants (``nnx_ppo.envs.randomization``). Empty when it fits.

    Raises:
        FileNotFoundError: If ``path`` is not a checkpoint directory.
        ValueError: If its metadata is malformed or its arrays cannot be read at all.
    """
    path = os.path.abspath(os.fspath(path))
    for entry in (_NETWORKS, _OPTIMIZER, _METADATA):
        if not os.path.exists(os.path.join(path, entry)):
            raise FileNotFoundError(f"{path} is not a checkpoint: {entry} is missing")
    problems: dict[str, str] = {}
    _, net_arrays = nnx.state(networks, _is_key_variable, ...)
    try:
        renames = _renames(os.path.join(path, _NETWORKS), networks)
        _check_layout(os.path.join(path, _NETWORKS), net_arrays, "network", renames)
    except CheckpointDamaged:
        raise
    except ValueError as error:
        problems["network"] = str(error)
    meta = read_metadata(os.path.join(path, _METADATA))
    try:
        env_states = decode(meta["env_states"], "env_states")
        leaves = jax.tree.leaves(env_states)
    except (IndexError, KeyError, TypeError) as e:
        raise ValueError(f"malformed checkpoint metadata in {path}: {e!r}") from e
    stored = int(np.shape(leaves[0])[0]) if leaves else n_envs
    if stored != n_envs:
        problems["n_envs"] = f"the checkpoint holds {stored} envs, not {n_envs}"
    carried = randomization.carried_variants(env_states) is not None
    if randomized is not None and randomized != carried:
        problems["randomize"] = (
            f"the checkpoint's run was trained {'with' if carried else 'without'} domain "
            "randomization (its envs carry their model variants only then)"
        )
    return problems


def load_networks(path: str, networks: Any) -> int:
    """Loads only the network of a checkpoint saved by ``make_checkpoint_fn``.

    For using a trained policy (a distillation teacher, an evaluation) without rebuilding
    the optimizer it was trained with. ``networks`` is the structural template and is
    updated in place; it is checked before anything is overwritten.

    Returns:
        The training step at which the checkpoint was saved.

    Raises:
        FileNotFoundError: If ``path`` is not a checkpoint directory.
        ValueError: If ``networks`` does not match the checkpoint's network (the message
            names the differing variables), or the metadata is malformed.
    """
    path = os.path.abspath(os.fspath(path))
    for entry in (_NETWORKS, _METADATA):
        if not os.path.exists(os.path.join(path, entry)):
            raise FileNotFoundError(f"{path} is not a checkpoint: {entry} is missing")
    meta = read_metadata(os.path.join(path, _METADATA))
    net_keys, net_arrays = nnx.state(networks, _is_key_variable, ...)
    renames = _renames(os.path.join(path, _NETWORKS), networks)
    _check_layout(os.path.join(path, _NETWORKS), net_arrays, "network", renames)
    try:
        key_values = _decode_key_variables(meta["network_rng_keys"], net_keys, "network", renames)
    except (IndexError, KeyError, TypeError) as e:
        raise ValueError(f"malformed checkpoint metadata in {path}: {e!r}") from e
    _restore_arrays(os.path.join(path, _NETWORKS), networks, net_arrays, renames)
    _update_keys(networks, net_keys, key_values)
    return int(meta["step"])


def read_network_recipe(path: str) -> dict[str, Any] | None:
    """The recipe of a checkpoint's network (``factories.recipe_of``), or None when the
    checkpoint records none (a network built otherwise, or a checkpoint written before
    recipes were recorded).

    Raises:
        FileNotFoundError: If ``path`` is not a checkpoint directory.
        ValueError: If the metadata is malformed.
    """
    path = os.path.abspath(os.fspath(path))
    if not os.path.exists(os.path.join(path, _METADATA)):
        raise FileNotFoundError(f"{path} is not a checkpoint: {_METADATA} is missing")
    recipe = read_metadata(os.path.join(path, _METADATA)).get("network_recipe")
    return expect(recipe, (dict, type(None)), "network_recipe")


# --- Network and optimizer variables -------------------------------------------------------


def _is_key_variable(path: Any, value: Any) -> bool:
    """Filter: variables holding PRNG keys (``nnx.RngKey`` and any other typed-key value)."""
    del path
    if isinstance(value, nnx.RngKey):
        return True
    return isinstance(value, nnx.Variable) and is_typed_key(value.get_value())


def _path_str(path: tuple[Any, ...]) -> str:
    return "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)


def _encode_key_variables(state: nnx.State) -> tuple[tuple[Any, ...], ...]:
    entries = []
    for path, variable in nnx.to_flat_state(state):
        key = variable.get_value()
        entries.append((tuple(path), key_impl(key), np.asarray(jax.random.key_data(key))))
    return tuple(entries)


def _decode_key_variables(
    entries: Any, template: nnx.State, what: str, renames: Renames | None = None
) -> dict[tuple, Any]:
    expected = {tuple(p): v.get_value() for p, v in nnx.to_flat_state(template)}
    stored = {}
    for entry in expect(entries, tuple, f"{what} key variables"):
        path, impl, data = expect(entry, tuple, f"{what} key variable")
        if renames is not None:
            path = legacy.rename_path(tuple(path), renames, to_old=False)
        stored[tuple(path)] = decode(("key", impl, data), _path_str(path))

    def describe(keys: dict[tuple, Any]) -> dict[str, str]:
        return {_path_str(p): f"PRNG key {key_impl(k)}{k.shape}" for p, k in keys.items()}

    _compare(describe(stored), describe(expected), what, "checkpoint")
    return stored


def _update_keys(module: Any, template: nnx.State, values: dict[tuple, Any]) -> None:
    if not values:
        return
    pure = nnx.to_pure_dict(template)
    for path, value in values.items():
        node = pure
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    nnx.replace_by_pure_dict(template, pure)
    nnx.update(module, template)


def _save_arrays(path: str, tree: dict[str, Any]) -> None:
    checkpointer = ocp.Checkpointer(ocp.StandardCheckpointHandler())
    try:
        checkpointer.save(path, tree)
    finally:
        checkpointer.close()


def _layout(tree: Any) -> dict[str, str]:
    """``{"a/b/kernel": "shape (6, 8) float32"}`` for the array leaves of ``tree``."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {_path_str(p): f"shape {tuple(x.shape)} {np.dtype(x.dtype)}" for p, x in flat}


def _stored_layout(path: str) -> dict[str, str]:
    """``_layout`` of the arrays stored in the Orbax checkpoint at ``path``."""
    checkpointer = ocp.Checkpointer(ocp.StandardCheckpointHandler())
    try:
        item = checkpointer.metadata(path).item_metadata
    finally:
        checkpointer.close()
    return _layout(getattr(item, "tree", item))


def _renames(path: str, networks: Any) -> Renames | None:
    """The renames from the old ``PPONetwork`` layout to ``networks`` when the network
    checkpoint at ``path`` was written in that layout (its variables live under ``actor``,
    ``critic`` and ``sampler``) and ``networks`` is the composed MLP or LSTM actor-critic
    that ``make_mlp_actor_critic`` or ``make_lstm_actor_critic`` builds now; None otherwise
    (paths are then compared as they are)."""
    roots = {name.split("/")[0] for name in _stored_layout(path)}
    if not roots >= legacy.LEGACY_ROOTS or hasattr(networks, "actor"):
        return None
    return legacy.legacy_renames(networks)


def _legacy_network_states(networks: Any, stored: Any) -> Any:
    """An old ``PPONetwork``'s carry (``{"actor": ..., "critic": ...}``) as the composed
    network's (``legacy.legacy_carry``: nothing for an MLP, each LSTM's ``(h, c)`` as
    ``(c, h)``); as stored when it does not fit (``_check_network_states`` names how)."""
    carry = legacy.legacy_carry(networks, stored)
    return stored if carry is None else carry


def _check_layout(path: str, template: nnx.State, what: str, renames: Renames | None) -> None:
    """Compares the stored arrays with ``template``'s (its paths in the old layout when
    ``renames`` is given); a ValueError names each difference."""
    stored = _stored_layout(path)
    tree = legacy.rename_tree(nnx.to_pure_dict(template), renames, to_old=True)
    if not stored and _layout(tree):
        raise CheckpointDamaged(f"checkpoint {path} holds no readable arrays (damaged?)")
    _compare(stored, _layout(tree), what, f"checkpoint {path}")


class CheckpointDamaged(ValueError):
    """A checkpoint whose arrays cannot be read at all."""


def _compare(stored: dict[str, str], expected: dict[str, str], what: str, where: str) -> None:
    """Raises ValueError naming each variable that differs, or that only one side has."""
    problems = [f"{p} is missing in the checkpoint" for p in sorted(expected.keys() - stored)]
    problems += [f"{p} is missing in the {what}" for p in sorted(stored.keys() - expected)]
    problems += [
        f"{p} has {stored[p]} in the checkpoint but {expected[p]} in the {what}"
        for p in sorted(expected.keys() & stored.keys())
        if stored[p] != expected[p]
    ]
    if problems:
        more = f"; and {len(problems) - 8} more" if len(problems) > 8 else ""
        raise ValueError(
            f"{where} does not match the {what} (a different architecture?): "
            + "; ".join(problems[:8])
            + more
        )


def _restore_arrays(
    path: str, module: Any, template: nnx.State, renames: Renames | None = None
) -> None:
    tree = legacy.rename_tree(nnx.to_pure_dict(template), renames, to_old=True)
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)
    checkpointer = ocp.Checkpointer(ocp.StandardCheckpointHandler())
    try:
        restored = checkpointer.restore(path, abstract)
    finally:
        checkpointer.close()
    nnx.replace_by_pure_dict(template, legacy.rename_tree(restored, renames, to_old=False))
    nnx.update(module, template)


def _check_network_states(networks: Any, network_states: Any, env_states: Any) -> None:
    leaves = jax.tree.leaves(env_states)
    init = getattr(networks, "initialize_state", None)
    if not leaves or init is None or not getattr(leaves[0], "shape", ()):
        return
    expected = jax.eval_shape(lambda: init(leaves[0].shape[0]))
    if not same_shapes(expected, network_states):
        shapes = jax.tree.map(lambda x: x.shape, (network_states, expected))
        raise ValueError(
            f"checkpoint network_states {shapes[0]} do not match the network's "
            f"initialize_state {shapes[1]} (different architecture?)"
        )


# --- metadata.pkl: plain-data pytrees and a restricted unpickler ----------------------------


def _sync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _rename_into_place(tmp: str, final: str) -> None:
    """Renames ``tmp`` to ``final``, moving an existing ``final`` aside first."""
    parent, name = os.path.split(final)
    old = None
    if os.path.exists(final):
        old = os.path.join(parent, f".{name}.{uuid.uuid4().hex[:8]}.old")
        os.rename(final, old)
    os.rename(tmp, final)
    _sync_directory(parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
