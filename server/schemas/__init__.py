"""The API's wire models (request and response bodies, after the Base/Create/Public family),
one module per subject; every model is re-exported here, so ``from server.schemas import
RunCreate`` keeps working."""

from server.schemas.artifacts import CheckpointList, CheckpointPublic, VideoList, VideoPublic
from server.schemas.envs import EnvList, EnvPublic, NetworkKindList, NetworkKindPublic, PresetPublic
from server.schemas.errors import ErrorPublic
from server.schemas.health import DeviceUsePublic, HealthPublic, NodePublic, WorkerPublic
from server.schemas.metrics import MetricsPublic, PhasePublic, SeriesPublic
from server.schemas.recordings import (
    RecordingCreate,
    RecordingDetail,
    RecordingList,
    RecordingPca,
    RecordingPublic,
    RecordingSlice,
)
from server.schemas.run_spec import (
    CheckpointRef,
    EnvSpec,
    GraphConnection,
    GraphPopulation,
    NetworkSpec,
    PresetRef,
    ResourcesSpec,
    RunCreate,
)
from server.schemas.runs import RunList, RunPublic, RunUpdate
from server.schemas.tracked import TrackCreate, TrackedRunPublic

__all__ = [
    "CheckpointList",
    "CheckpointPublic",
    "CheckpointRef",
    "DeviceUsePublic",
    "EnvList",
    "EnvPublic",
    "EnvSpec",
    "ErrorPublic",
    "GraphConnection",
    "GraphPopulation",
    "HealthPublic",
    "MetricsPublic",
    "NetworkKindList",
    "NetworkKindPublic",
    "NetworkSpec",
    "NodePublic",
    "PhasePublic",
    "PresetPublic",
    "PresetRef",
    "RecordingCreate",
    "RecordingDetail",
    "RecordingList",
    "RecordingPca",
    "RecordingPublic",
    "RecordingSlice",
    "ResourcesSpec",
    "RunCreate",
    "RunList",
    "RunPublic",
    "RunUpdate",
    "SeriesPublic",
    "TrackCreate",
    "TrackedRunPublic",
    "VideoList",
    "VideoPublic",
    "WorkerPublic",
]
