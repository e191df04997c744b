"""``GET /api/envs``: the environments that can be trained."""

from __future__ import annotations

from fastapi import APIRouter

from server.api.deps import ServicesDep
from server.schemas import EnvList, EnvPublic

router = APIRouter(tags=["envs"])


@router.get("/envs", response_model=EnvList)
def list_envs(services: ServicesDep) -> EnvList:
    entries, complete = services.catalogue.entries()
    items = [EnvPublic(**entry) for entry in entries]
    return EnvList(items=items, total=len(items), complete=complete)
