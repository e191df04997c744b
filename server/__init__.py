"""The nnx-ppo training-control service: API, run store, worker supervisor, run processes.

``server`` imports ``nnx_ppo`` only in processes that train (run processes and the spec
checker); the API process itself never imports JAX.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("nnx-ppo")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
