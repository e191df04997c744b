"""A trained policy outside training: load it from a checkpoint, act, export it.

>>> from nnx_ppo import policy
>>> pi = policy.load("runs/reach")          # the newest checkpoint of a run's directory
>>> state = pi.initial_state(1)             # the LSTM state of a recurrent policy, or ()
>>> state, action = pi.act(state, obs)      # deterministic; obs is [1, ...]
>>> policy.export(pi, "reach.onnx", "onnx") # or "stablehlo" (nnx_ppo.policy.exporting)

``load`` and ``Policy`` live in ``nnx_ppo.policy.policy``, ``export`` and the programs'
signature in ``nnx_ppo.policy.exporting`` (ONNX needs the ``export`` extra, imported only
when an ONNX model is asked for).
"""

from __future__ import annotations

from nnx_ppo.policy.exporting import FORMATS, MissingExtra, export
from nnx_ppo.policy.policy import Policy, find_checkpoint, load

__all__ = ["FORMATS", "MissingExtra", "Policy", "export", "find_checkpoint", "load"]
