"""``GET /api/envs``: the environments that can be trained (and ``GET /api/networks``, the
network kinds a spec can name).

Every name is listed at once, from ``nnx_ppo.catalogue`` (no JAX, no Playground import);
the sizes come from the env catalogue's child process as it loads each env, and an env
whose sizes are not known yet has ``details_known: false``. An env that cannot load here
(missing MuJoCo Menagerie assets) is listed with ``available: false`` and the reason.

Plugin envs (installed packages' ``nnx_ppo.envs`` entry points, ``nnx_ppo.plugins``) come
last, with source ``plugin:<package>``; their names are read without importing them, and
one whose factory fails to import or to build is marked unavailable with its error once
the catalogue process has tried it.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from fastapi import APIRouter, HTTPException

from nnx_ppo import catalogue, plugins
from server.api.deps import Services, ServicesDep
from server.schemas import EnvList, EnvPublic, NetworkKindList, NetworkKindPublic, PresetPublic
from server.spec.checker import CheckerUnavailable

router = APIRouter(tags=["envs"])


@router.get("/envs", response_model=EnvList)
def list_envs(services: ServicesDep) -> EnvList:
    entries, complete = services.catalogue.entries()
    known = {entry["name"]: entry for entry in entries}
    items = []
    for name in trainable_names(services.catalogue.include_playground):
        learned = dict(known.get(name, {}))
        reason = learned.pop("error", None) or catalogue.missing_assets(name)
        entry: dict[str, Any] = {**learned, "details_known": name in known}
        entry.update(name=name, source=catalogue.source_of(name))
        randomizer = name in catalogue.RANDOMIZED_ENVS
        items.append(
            EnvPublic(
                **entry, available=reason is None, reason=reason, domain_randomizer=randomizer
            )
        )
    return EnvList(items=items, total=len(items), complete=complete)


@router.get("/networks", response_model=NetworkKindList)
def list_networks() -> NetworkKindList:
    """The network kinds a run spec can name: the built-in ones, then the installed plugin
    networks (``nnx_ppo.networks`` entry points; their names are read, nothing imported)."""
    items = [NetworkKindPublic(kind=kind, source="builtin") for kind in ("mlp", "lstm", "graph")]
    for name, entry in sorted(plugins.entry_points(plugins.NETWORK_GROUP).items()):
        source = f"plugin:{plugins.package_of(entry)}"
        items.append(NetworkKindPublic(kind=f"{plugins.KIND_PREFIX}{name}", source=source))
    return NetworkKindList(items=items)


@router.get("/envs/{name}/preset", response_model=PresetPublic)
def env_preset(
    name: str, services: ServicesDep, variant: Literal["cpu", "gpu"] | None = None
) -> PresetPublic:
    """The env's preset (``nnx_ppo.presets``) as a run spec: what the dashboard's New Run
    form fills in when the env is picked. ``variant`` defaults to ``gpu`` when a live worker
    runs on a GPU, else ``cpu``."""
    if name not in trainable_names(services.catalogue.include_playground):
        raise HTTPException(404, f"env {name!r} not found")
    try:
        answer = services.checker.preset(name, variant or worker_variant(services))
    except CheckerUnavailable as error:
        raise HTTPException(503, str(error)) from None
    except ValueError as error:
        raise HTTPException(404, str(error)) from None
    return PresetPublic(**answer)


def trainable_names(include_playground: bool) -> list[str]:
    """Every env this service lists: built-in, then Playground's (where listed), then the
    installed plugin envs."""
    names = catalogue.env_names()
    if not include_playground:
        names = [n for n in names if catalogue.source_of(n) == "builtin"]
    return [*names, *catalogue.plugin_env_names()]


def worker_variant(services: Services) -> Literal["cpu", "gpu"]:
    """The preset variant this service's workers train with: gpu when a live one has one."""
    now = time.time()
    live = [
        w
        for w in services.store.workers()
        if now - w.heartbeat_at <= services.settings.heartbeat_timeout
    ]
    return "gpu" if any(w.backend not in ("cpu", "") for w in live) else "cpu"
