"""Domain randomization: each training env steps its own variant of the env's MuJoCo model.

A randomization function has Brax's signature (``randomization_fn`` of
``brax.training.agents.ppo.train``): ``fn(model, keys) -> (models, in_axes)`` takes the
env's nominal ``mjx.Model`` and ``[N]`` PRNG keys and returns the ``N`` variants as one model
whose randomized fields have a batch axis, with ``in_axes`` naming those fields as
``jax.vmap`` takes them (``None`` elsewhere). MuJoCo Playground has one for each of its
robots (``mujoco_playground.registry.get_domain_randomizer``; ``randomizer(name)`` here):
floor friction, link masses, joint armature and friction loss, ...

Brax keeps the variants in its env wrapper. Here each env's state carries its own, the
randomized fields only, in ``state.info["model_variant"]`` (``VARIANT_KEY``), so that:

- env ``i`` steps variant ``i`` from its first reset on, and keeps it through its resets;
- a checkpoint of the training state holds the variants, so a resumed run steps the very
  same ones (the randomization function is not called again);
- the jitted training program takes the variants as data, not as constants: a cached
  program (``ProgramCache``) serves every seed, and thousands of variants do not bloat it.

``RandomizedEnv`` is an ordinary, unbatched env: ``step`` steps the model its state
carries, and ``reset`` starts the nominal one. The trainer resets a batch of envs with
``reset_batch`` (``nnx_ppo.algorithms.rollout.reset_envs``), which gives env ``i`` variant
``i`` on its first reset and its own variant on every later one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from nnx_ppo import catalogue

RandomizationFn = Callable[[Any, jax.Array], tuple[Any, Any]]
"""``fn(model, keys[N]) -> (models, in_axes)``: Brax's ``randomization_fn``."""

VARIANT_KEY = "model_variant"
"""The ``state.info`` key of an env's model variant: ``{field path: value}``, e.g.
``{".geom_friction": [ngeom, 3]}`` (``[B, ngeom, 3]`` in a batch of env states)."""

_KEY_STREAM = 3
"""``randomize`` splits its keys off ``fold_in(PRNGKey(seed), 3)`` (the host loop takes 1
and 2 for evaluation and video)."""


class RandomizedEnv:
    """An env whose state carries its own variant of the env's MuJoCo model.

    Every attribute not defined here (``episode_length``, ``render``, ...) is looked up on
    the wrapped env.

    Args:
        env: A MuJoCo Playground env (possibly wrapped, e.g. by ``EpisodeWrapper``); its
            innermost env's ``_mjx_model`` is the nominal model.
        variants: ``{field path: [N, ...] values}``: the randomized fields of ``N`` variants
            (``variant_fields``), paths as ``jax.tree_util.keystr`` writes them.

    Raises:
        ValueError: If the env has no MuJoCo model, or a path is not a field of its model,
            or the values do not have the field's shape after a common ``[N]`` axis.
    """

    def __init__(self, env: Any, variants: Mapping[str, Any]) -> None:
        self.env = env
        self.variants = dict(variants)
        fields = _fields(nominal_model(env))
        sizes = set()
        for path, value in self.variants.items():
            if path not in fields:
                raise ValueError(f"{path!r} is not a field of the env's model")
            want = tuple(np.shape(fields[path]))
            if tuple(np.shape(value))[1:] != want:
                raise ValueError(
                    f"the variants of {path} have shape {np.shape(value)}, not [N, *{want}]"
                )
            sizes.add(np.shape(value)[0])
        if len(sizes) != 1:
            raise ValueError(f"the variants need one common leading size, got {sorted(sizes)}")
        (self.n_variants,) = sizes

    def reset(self, rng: jax.Array) -> Any:
        """Resets one env on the nominal model (its state carries the nominal fields)."""
        nominal = _fields(nominal_model(self.env))
        return _carrying(self.env.reset(rng), {path: nominal[path] for path in self.variants})

    def step(self, state: Any, action: jax.Array) -> Any:
        """Steps one env on the model variant its state carries."""
        variant = state.info[VARIANT_KEY]
        with self._model(variant):
            return _carrying(self.env.step(state, action), variant)

    def reset_batch(self, keys: jax.Array, previous: Any = None) -> Any:
        """Resets ``[B]`` envs, one per key: env ``i`` on the variant ``previous`` env ``i``
        carries, or, with ``previous`` None (the first reset), on variant ``i``.

        Raises:
            ValueError: If there are not as many keys as variants.
        """
        variants = self.variants if previous is None else previous.info[VARIANT_KEY]
        n = np.shape(keys)[0]
        if any(np.shape(v)[0] != n for v in variants.values()):
            sizes = sorted({np.shape(v)[0] for v in variants.values()})
            raise ValueError(f"{n} envs to reset but {sizes[0]} model variants")

        def reset_one(variant: dict[str, jax.Array], key: jax.Array) -> Any:
            with self._model(variant):
                return _carrying(self.env.reset(key), variant)

        return jax.vmap(reset_one)(variants, keys)

    @contextlib.contextmanager
    def _model(self, variant: Mapping[str, jax.Array]) -> Iterator[None]:
        """The innermost env steps the nominal model with ``variant``'s fields while traced
        inside this block (Brax's ``DomainRandomizationVmapWrapper`` does the same)."""
        unwrapped = _unwrapped(self.env)
        nominal = unwrapped._mjx_model
        unwrapped._mjx_model = with_fields(nominal, variant)
        try:
            yield
        finally:
            unwrapped._mjx_model = nominal

    @property
    def observation_size(self) -> Any:
        """The wrapped env's observation size."""
        return self.env.observation_size

    @property
    def action_size(self) -> int:
        """The wrapped env's action size."""
        return self.env.action_size

    @property
    def unwrapped(self) -> Any:
        """The innermost environment, below every wrapper."""
        return _unwrapped(self.env)

    def __getattr__(self, name: str) -> Any:
        if name == "env" or name.startswith("__"):  # half-built (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.env, name)

    def __repr__(self) -> str:
        return f"RandomizedEnv({self.env!r}, {self.n_variants} variants of {sorted(self.variants)})"


def randomize(env: Any, randomization_fn: RandomizationFn, n_envs: int, seed: int) -> RandomizedEnv:
    """``env`` with ``n_envs`` variants of its model, ``randomization_fn(model, keys)`` of
    ``n_envs`` keys split off ``fold_in(PRNGKey(seed), 3)`` (one jitted call).

    Raises:
        ValueError: If the env has no MuJoCo model or the function's result is not ``n_envs``
            variants (see ``variant_fields``).
    """
    model = nominal_model(env)
    keys = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), _KEY_STREAM), n_envs)

    def fields_of_variants(keys: jax.Array) -> dict[str, jax.Array]:
        return variant_fields(*randomization_fn(model, keys), n_envs)

    return RandomizedEnv(env, jax.jit(fields_of_variants)(keys))


def variant_fields(models: Any, in_axes: Any, n: int) -> dict[str, jax.Array]:
    """The randomized fields of a randomization function's result: ``{path: [n, ...]}``
    for each field whose ``in_axes`` is not None (its batch axis moved to the front).

    Args:
        models: The variants as one model.
        in_axes: The model's pytree with the batch axis of each randomized field.
        n: The number of variants.

    Raises:
        ValueError: If an axis names no field of ``models``, or a field's batch axis is not
            ``n`` long, or nothing is randomized.
    """
    fields = _fields(models)
    out = {}
    for path, axis in _fields(in_axes).items():
        if path not in fields:
            raise ValueError(f"in_axes names {path}, which is not a field of the model")
        value = jnp.moveaxis(jnp.asarray(fields[path]), int(axis), 0)
        if value.shape[0] != n:
            raise ValueError(f"{path} has {value.shape[0]} variants, not {n}")
        out[path] = value
    if not out:
        raise ValueError("the randomization function randomized no field (in_axes all None)")
    return out


def for_training(
    env: Any,
    randomization_fn: RandomizationFn | None,
    n_envs: int,
    seed: int,
    env_states: Any = None,
) -> Any:
    """The env a run trains on: ``env`` itself without a randomization function;
    otherwise a ``RandomizedEnv`` with the variants ``env_states`` carry (a resumed run:
    the function is not called again), or with ``n_envs`` new ones (``randomize``).

    Raises:
        ValueError: If ``env_states`` carry variants but there is no function (the run was
            randomized), or carry none but there is one (the run was not).
    """
    carried = carried_variants(env_states)
    if randomization_fn is None:
        if carried is not None:
            raise ValueError(
                "initial_state's envs carry model variants (it was trained with domain "
                "randomization): pass the randomization_fn it was trained with"
            )
        return env
    if env_states is None:
        return randomize(env, randomization_fn, n_envs, seed)
    if carried is None:
        raise ValueError(
            "initial_state's envs carry no model variants (it was trained without domain "
            "randomization): resume it without randomization_fn"
        )
    return RandomizedEnv(env, carried)


def carried_variants(env_states: Any) -> dict[str, Any] | None:
    """The model variants a batch of env states carries (``[B, ...]`` values), or None."""
    info = getattr(env_states, "info", None)
    if not isinstance(info, Mapping) or VARIANT_KEY not in info:
        return None
    return dict(info[VARIANT_KEY])


def randomizer(name: str) -> RandomizationFn | None:
    """MuJoCo Playground's domain randomizer of env ``name``, or None when it has none
    (``catalogue.RANDOMIZED_ENVS`` lists the envs that have one)."""
    if name not in catalogue.RANDOMIZED_ENVS:
        return None
    from mujoco_playground import registry  # Slow import, kept lazy.

    fn: RandomizationFn = registry.get_domain_randomizer(name)
    return fn


def nominal_model(env: Any) -> Any:
    """The innermost env's ``_mjx_model`` (where MuJoCo Playground envs keep it).

    Raises:
        ValueError: If it has none.
    """
    model = getattr(_unwrapped(env), "_mjx_model", None)
    if model is None:
        raise ValueError(
            f"domain randomization varies an env's MuJoCo model, and {env!r} has none "
            "(a MuJoCo Playground env has one)"
        )
    return model


def with_fields(model: Any, fields: Mapping[str, Any]) -> Any:
    """``model`` with the fields named in ``fields`` (paths as in ``variant_fields``)
    replaced by their values."""
    return jax.tree_util.tree_map_with_path(
        lambda path, leaf: fields.get(jax.tree_util.keystr(path), leaf), model
    )


def _fields(tree: Any) -> dict[str, Any]:
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {jax.tree_util.keystr(path): leaf for path, leaf in leaves}


def _unwrapped(env: Any) -> Any:
    return getattr(env, "unwrapped", env)


def _carrying(state: Any, variant: Mapping[str, Any]) -> Any:
    return state.replace(info={**state.info, VARIANT_KEY: dict(variant)})
