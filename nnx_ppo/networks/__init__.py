"""Stateful (recurrent-capable) networks for PPO: layers, samplers, normalizer, factories, and
the composable toolkit of ``networks-api.md`` (containers, utils, feedforward, recurrent,
delay, variational, sampling_layers, adapter, graph)."""

# Installs ``StatefulModule.with_recording`` (``base`` cannot import the recording wrappers,
# which subclass ``StatefulModule``), whichever of this package's modules is imported first.
from nnx_ppo.networks import recording as _recording  # noqa: F401
