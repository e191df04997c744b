"""Benchmarks: nnx-ppo against Brax PPO on MuJoCo Playground (throughput, compile, learning)."""
