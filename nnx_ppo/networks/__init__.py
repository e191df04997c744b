"""Stateful (recurrent-capable) networks for PPO: layers, samplers, normalizer, factories."""
