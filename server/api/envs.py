"""``GET /api/envs``: the environments that can be trained.

Every name is listed at once, from ``nnx_ppo.catalogue`` (no JAX, no Playground import);
the sizes come from the env catalogue's child process as it loads each env, and an env
whose sizes are not known yet has ``details_known: false``. An env that cannot load here
(missing MuJoCo Menagerie assets) is listed with ``available: false`` and the reason.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from nnx_ppo import catalogue
from server.api.deps import ServicesDep
from server.schemas import EnvList, EnvPublic

router = APIRouter(tags=["envs"])


@router.get("/envs", response_model=EnvList)
def list_envs(services: ServicesDep) -> EnvList:
    entries, complete = services.catalogue.entries()
    known = {entry["name"]: entry for entry in entries}
    names = catalogue.env_names()
    if not services.catalogue.include_playground:
        names = [n for n in names if catalogue.source_of(n) == "builtin"]
    items = []
    for name in names:
        reason = catalogue.missing_assets(name)
        entry: dict[str, Any] = {**known.get(name, {}), "details_known": name in known}
        entry.update(name=name, source=catalogue.source_of(name))
        items.append(EnvPublic(**entry, available=reason is None, reason=reason))
    return EnvList(items=items, total=len(items), complete=complete)
