"""Proximal Policy Optimization with stateful (recurrent) networks.

The public PPO API in one place. The pure, jittable pieces live in ``losses`` (``gae``,
``ppo_loss``) and ``step`` (``ppo_step``, ``new_training_state``); the impure host loop that
runs several PPO steps per jitted call and does evaluation, checkpoints and callbacks
between calls is ``training.train_ppo``.
"""

from nnx_ppo.algorithms.losses import gae, ppo_loss
from nnx_ppo.algorithms.step import make_optimizer, new_training_state, ppo_step
from nnx_ppo.algorithms.training import default_config, train_ppo

__all__ = [
    "default_config",
    "gae",
    "make_optimizer",
    "new_training_state",
    "ppo_loss",
    "ppo_step",
    "train_ppo",
]
