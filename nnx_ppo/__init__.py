"""nnx-ppo: PPO and policy distillation in JAX + Flax NNX, with stateful networks."""

__version__ = "0.1.0"
