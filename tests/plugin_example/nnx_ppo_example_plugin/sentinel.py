"""Records that it was imported: a spec that names this module by path must not import it.

On import, creates the file named by ``$NNX_PPO_PLUGIN_SENTINEL`` (when set).
"""

import os
import pathlib

_MARKER = os.environ.get("NNX_PPO_PLUGIN_SENTINEL")
if _MARKER:
    pathlib.Path(_MARKER).write_text("imported\n")


def mark(*args: object, **kwargs: object) -> None:
    """What a path such as ``nnx_ppo_example_plugin.sentinel:mark`` would call."""
