"""nnx-ppo: PPO and policy distillation in JAX + Flax NNX, with stateful networks."""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``nnx_ppo.track`` (``nnx_ppo.tracking``), imported when first used."""
    if name in ("track", "TrackedRun"):
        from nnx_ppo import tracking

        return getattr(tracking, name)
    raise AttributeError(f"module 'nnx_ppo' has no attribute {name!r}")
