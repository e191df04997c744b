"""A Python client of the nnx-ppo service (imports neither JAX nor the server).

>>> from nnx_ppo.client import Client
>>> client = Client()  # NNX_PPO_URL / NNX_PPO_API_TOKEN, or the local service's token file
>>> run = client.submit({"env": {"name": "PointReach"}, "config": {"ppo": {"total_steps": 20000}}})
>>> for event in client.follow(run.id):
...     print(event.type, event.step, event.values)
>>> client.metrics(run.id)["eval/episode_reward"].value
"""

from nnx_ppo.client.archive import ArchiveError
from nnx_ppo.client.client import Client, default_token, default_url
from nnx_ppo.client.errors import ApiError, ClientError, NotFound, ServiceUnavailable, Unauthorized
from nnx_ppo.client.recordings import Recording
from nnx_ppo.client.types import (
    TERMINAL,
    Checkpoint,
    Env,
    Event,
    Health,
    Run,
    RunList,
    Series,
    Sweep,
    SweepEvent,
    SweepList,
    Trial,
    Video,
    Worker,
)

__all__ = [
    "TERMINAL",
    "ApiError",
    "ArchiveError",
    "Checkpoint",
    "Client",
    "ClientError",
    "Env",
    "Event",
    "Health",
    "NotFound",
    "Recording",
    "Run",
    "RunList",
    "Series",
    "ServiceUnavailable",
    "Sweep",
    "SweepEvent",
    "SweepList",
    "Trial",
    "Unauthorized",
    "Video",
    "Worker",
    "default_token",
    "default_url",
]
