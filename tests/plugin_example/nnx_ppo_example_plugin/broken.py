"""A plugin module that fails to import, as a plugin with a missing dependency does."""

raise ImportError("nnx_ppo_example_plugin.broken fails to import on purpose")
