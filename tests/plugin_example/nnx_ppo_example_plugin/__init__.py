"""An example nnx-ppo plugin: ``TwoLinkArm`` (a pure-JAX env) and ``tiny`` (a network)."""
