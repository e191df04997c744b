"""Domain randomization on a tiny env whose model is visible in its rewards.

``Slide``'s model has a ``friction`` (nominal 0.7) and its reward is that friction at every
step, so a rollout's rewards show which model variant each env stepped. The randomizer is
shaped like MuJoCo Playground's (``fn(model, keys[N]) -> (models, in_axes)``). The Go1
checks with Playground's own randomizer are in ``test_randomization_go1.py``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx, struct

from nnx_ppo import envs
from nnx_ppo.algorithms.checkpointing import (
    checkpoint_misfits,
    load_checkpoint,
    make_checkpoint_fn,
)
from nnx_ppo.algorithms.config import (
    DistillationConfig,
    DistillationTrainConfig,
    EvalConfig,
    PPOConfig,
    TrainConfig,
)
from nnx_ppo.algorithms.distillation import train_distillation
from nnx_ppo.algorithms.rollout import reset_envs
from nnx_ppo.algorithms.training import train_ppo, training_state_for
from nnx_ppo.algorithms.types import LoggingLevel
from nnx_ppo.envs import EpisodeWrapper, State
from nnx_ppo.envs.randomization import (
    VARIANT_KEY,
    RandomizedEnv,
    randomize,
    randomizer,
    variant_fields,
)
from nnx_ppo.networks.factories import make_mlp_actor_critic
from tests.algorithms.test_checkpointing import as_numpy, assert_trees_equal, step_dir

NOMINAL_FRICTION = 0.7
LOW, HIGH = 0.4, 1.0
FRICTION = ".friction"  # the variant's path of the field
EPISODE = 5


@struct.dataclass
class Model:
    friction: jax.Array  # []
    mass: jax.Array  # [3]


class Slide:
    """A block pushed along a line; reward: the model's friction, every step."""

    observation_size = 2
    action_size = 1

    def __init__(self) -> None:
        self._mjx_model = Model(jnp.float32(NOMINAL_FRICTION), jnp.ones(3, jnp.float32))

    def reset(self, rng: jax.Array) -> State:
        position = jax.random.uniform(rng)
        zero = jnp.zeros((), jnp.float32)
        return State(data=position, obs=self._obs(position), reward=zero, done=zero)

    def step(self, state: State, action: jax.Array) -> State:
        model = self._mjx_model
        position = state.data + action[0] * model.friction / jnp.sum(model.mass)
        return state.replace(data=position, obs=self._obs(position), reward=model.friction)

    def _obs(self, position: jax.Array) -> jax.Array:
        return jnp.stack([position, self._mjx_model.friction])


def randomize_friction(model: Model, keys: jax.Array) -> tuple[Model, Model]:
    """Friction ~ U(0.4, 1.0) per env, as Playground's Go1 randomizer draws the floor's."""
    friction = jax.vmap(lambda key: jax.random.uniform(key, minval=LOW, maxval=HIGH))(keys)
    in_axes = jax.tree.map(lambda _: None, model).replace(friction=0)
    return model.replace(friction=friction), in_axes


def slide() -> EpisodeWrapper:
    return EpisodeWrapper(Slide(), EPISODE)


def frictions(env_states: Any) -> np.ndarray:
    return np.asarray(env_states.info[VARIANT_KEY][FRICTION])


def test_each_env_steps_its_own_variant_and_keeps_it_through_resets():
    env = randomize(slide(), randomize_friction, 4, seed=0)
    variants = np.asarray(env.variants[FRICTION])
    assert variants.shape == (4,) and len(set(variants.tolist())) == 4
    assert np.all((variants >= LOW) & (variants < HIGH))
    assert env.variants.keys() == {FRICTION}  # the mass was not randomized

    states = jax.jit(lambda keys: reset_envs(env, keys))(jax.random.split(jax.random.key(1), 4))
    np.testing.assert_array_equal(states.obs[:, 1], variants)  # each reset on its variant
    stepped = jax.jit(jax.vmap(env.step))(states, jnp.ones((4, 1)))
    np.testing.assert_array_equal(stepped.reward, variants)  # and each steps it
    again = jax.jit(lambda keys, prev: reset_envs(env, keys, prev))(
        jax.random.split(jax.random.key(2), 4), stepped
    )
    np.testing.assert_array_equal(again.obs[:, 1], variants)  # a reset keeps the variant
    assert not np.array_equal(again.obs[:, 0], states.obs[:, 0])  # from a new start
    # One env alone (reset) runs the nominal model; the wrapped env's model is untouched.
    single = env.reset(jax.random.key(3))
    assert float(single.obs[1]) == pytest.approx(NOMINAL_FRICTION)
    assert float(env.step(single, jnp.ones(1)).reward) == pytest.approx(NOMINAL_FRICTION)
    assert float(env.unwrapped._mjx_model.friction) == pytest.approx(NOMINAL_FRICTION)


def test_variants_follow_the_seed():
    same = [randomize(slide(), randomize_friction, 8, seed=s).variants[FRICTION] for s in (3, 3)]
    other = randomize(slide(), randomize_friction, 8, seed=4).variants[FRICTION]
    np.testing.assert_array_equal(same[0], same[1])
    assert not np.any(np.asarray(same[0]) == np.asarray(other))


def test_wrong_randomizers_and_envs_are_refused():
    with pytest.raises(ValueError, match="has none"):  # a built-in env has no MuJoCo model
        randomize(envs.load("PointReach"), randomize_friction, 4, seed=0)
    with pytest.raises(ValueError, match="3 variants, not 4"):
        variant_fields(Model(jnp.zeros(3), jnp.ones(3)), Model(0, None), 4)
    with pytest.raises(ValueError, match="randomized no field"):
        randomize(slide(), lambda m, k: (m, jax.tree.map(lambda _: None, m)), 4, seed=0)
    with pytest.raises(ValueError, match="not a field"):
        RandomizedEnv(slide(), {".stiffness": jnp.zeros(4)})
    with pytest.raises(ValueError, match="shape"):
        RandomizedEnv(slide(), {".mass": jnp.zeros((4, 2))})
    env = RandomizedEnv(slide(), {FRICTION: jnp.full(4, 0.5)})
    with pytest.raises(ValueError, match="3 envs to reset but 4 model variants"):
        reset_envs(env, jax.random.split(jax.random.key(0), 3))


N_ENVS, ROLLOUT = 8, 4
ITERATION = N_ENVS * ROLLOUT
CONFIG = TrainConfig(
    ppo=PPOConfig(
        n_envs=N_ENVS,
        rollout_length=ROLLOUT,
        total_steps=2 * ITERATION,
        n_epochs=1,
        n_minibatches=2,
        logging_level=LoggingLevel.LOSSES | LoggingLevel.ROLLOUT_STATS,
    ),
    eval=EvalConfig(enabled=False),
    checkpoint_every_steps=ITERATION,
    seed=11,
)


def networks(seed: int = 0) -> Any:
    return make_mlp_actor_critic(
        2, 1, rngs=nnx.Rngs(seed), actor_hidden_sizes=(4,), critic_hidden_sizes=(4,)
    )


def test_training_steps_the_variants_and_evaluates_the_nominal_model():
    logs: list[dict] = []
    config = dataclasses.replace(
        CONFIG, eval=EvalConfig(every_steps=2 * ITERATION, n_envs=4, max_episode_length=EPISODE)
    )
    env = slide()
    result = train_ppo(
        env,
        networks(),
        config,
        randomization_fn=randomize_friction,
        log_fn=lambda m, s: logs.append(m),
    )
    variants = np.asarray(
        randomize(slide(), randomize_friction, N_ENVS, config.seed).variants[FRICTION]
    )
    np.testing.assert_array_equal(frictions(result.training_state.env_states), variants)
    # Every env's reward is its own friction at every step: the rollout's rewards have
    # the variants' mean and spread.
    for metrics in logs:
        assert metrics["rollout/reward/mean"] == pytest.approx(variants.mean(), rel=1e-5)
        assert metrics["rollout/reward/std"] == pytest.approx(variants.std(), rel=1e-4)
    assert abs(variants.mean() - NOMINAL_FRICTION) > 1e-3  # so the check above can tell
    # Evaluation ran the nominal model: 0.7 a step for a whole episode.
    assert logs[-1]["eval/episode_reward"] == pytest.approx(NOMINAL_FRICTION * EPISODE, rel=1e-5)

    # Asked for it, evaluation runs its own variants instead.
    randomized_eval = randomize(env, randomize_friction, 4, seed=99)
    eval_logs: list[dict] = []
    train_ppo(
        env,
        networks(),
        config,
        randomization_fn=randomize_friction,
        eval_env=randomized_eval,
        log_fn=lambda m, s: eval_logs.append(m),
    )
    expected = float(np.mean(randomized_eval.variants[FRICTION])) * EPISODE
    assert eval_logs[-1]["eval/episode_reward"] == pytest.approx(expected, rel=1e-5)


def test_a_resumed_run_steps_the_same_variants(tmp_path):
    """Straight: two iterations. Resumed: one, a checkpoint, then the second from it, with
    another seed in the config: the checkpoint's variants (not the seed's) are stepped, and
    the run ends where the straight one does, bit for bit."""
    straight = train_ppo(slide(), networks(), CONFIG, randomization_fn=randomize_friction)
    first = train_ppo(
        slide(),
        networks(),
        CONFIG,
        randomization_fn=randomize_friction,
        checkpoint_fn=make_checkpoint_fn(str(tmp_path), CONFIG),
        should_stop=lambda: True,
    )
    assert int(first.training_state.steps_taken) == ITERATION
    env = slide()
    reseeded = dataclasses.replace(CONFIG, seed=CONFIG.seed + 1)
    template = training_state_for(env, networks(1), reseeded)
    loaded = load_checkpoint(step_dir(tmp_path, ITERATION), template.networks, template.optimizer)
    state = loaded["training_state"]
    np.testing.assert_array_equal(
        frictions(state.env_states), frictions(first.training_state.env_states)
    )
    resumed = train_ppo(
        env, state.networks, reseeded, initial_state=state, randomization_fn=randomize_friction
    )
    original = frictions(straight.training_state.env_states)
    np.testing.assert_array_equal(frictions(resumed.training_state.env_states), original)
    other_seed = randomize(slide(), randomize_friction, N_ENVS, reseeded.seed).variants[FRICTION]
    assert not np.any(np.asarray(other_seed) == original)  # re-randomizing would differ
    assert_trees_equal(
        as_numpy(nnx.state(resumed.training_state.networks)),
        as_numpy(nnx.state(straight.training_state.networks)),
    )
    assert_trees_equal(
        as_numpy(resumed.training_state.env_states), as_numpy(straight.training_state.env_states)
    )


def test_resuming_needs_the_same_kind_of_run(tmp_path):
    randomized = train_ppo(
        slide(),
        networks(),
        CONFIG,
        randomization_fn=randomize_friction,
        checkpoint_fn=make_checkpoint_fn(str(tmp_path / "randomized")),
    )
    plain = train_ppo(
        slide(), networks(), CONFIG, checkpoint_fn=make_checkpoint_fn(str(tmp_path / "plain"))
    )
    # What the service checks before it queues a resumed run.
    for run, was in (("randomized", True), ("plain", False)):
        path = step_dir(tmp_path / run, 2 * ITERATION)
        assert checkpoint_misfits(path, networks(), N_ENVS, randomized=was) == {}
        assert checkpoint_misfits(path, networks(), N_ENVS) == {}  # not asked
        why = checkpoint_misfits(path, networks(), N_ENVS, randomized=not was)["randomize"]
        assert f"trained {'with' if was else 'without'} domain randomization" in why
    more = dataclasses.replace(
        CONFIG, ppo=dataclasses.replace(CONFIG.ppo, total_steps=3 * ITERATION)
    )
    with pytest.raises(ValueError, match="pass the randomization_fn it was trained with"):
        train_ppo(slide(), networks(), more, initial_state=randomized.training_state)
    with pytest.raises(ValueError, match="resume it without randomization_fn"):
        train_ppo(
            slide(),
            networks(),
            more,
            initial_state=plain.training_state,
            randomization_fn=randomize_friction,
        )


def test_distillation_steps_the_variants():
    config = DistillationTrainConfig(
        distillation=DistillationConfig(
            n_envs=N_ENVS, rollout_length=ROLLOUT, total_steps=ITERATION, n_minibatches=2
        ),
        eval=EvalConfig(enabled=False),
        seed=5,
    )
    result = train_distillation(
        slide(), networks(1), networks(0), config, randomization_fn=randomize_friction
    )
    variants = randomize(slide(), randomize_friction, N_ENVS, config.seed).variants[FRICTION]
    np.testing.assert_array_equal(frictions(result.training_state.env_states), variants)


def test_randomizer_is_playgrounds_for_the_envs_that_have_one():
    from mujoco_playground import registry

    go1 = "Go1JoystickFlatTerrain"
    assert randomizer(go1) is registry.get_domain_randomizer(go1)
    assert randomizer("CartpoleBalance") is None and randomizer("PandaPickCube") is None
