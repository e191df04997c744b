"""Training algorithms: PPO (``ppo``), rollouts, configuration, metrics and types."""
