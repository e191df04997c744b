"""Stateful (recurrent-capable) networks for PPO: layers, samplers, normalizer, factories, and
the composable toolkit of ``networks-api.md`` (containers, utils, feedforward, recurrent,
delay, variational, sampling_layers, adapter, graph)."""
