"""Creating a tracked run on the service (``POST /api/runs/track``, with the service's
access token, found as the client finds it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from nnx_ppo.client.errors import ServiceUnavailable, api_error


def create_tracked_run(
    url: str,
    token: str | None,
    *,
    name: str,
    config: Mapping[str, Any],
    tags: Sequence[str],
    notes: str,
    total_steps: int,
    timeout_s: float = 30.0,
) -> tuple[str, str]:
    """The new run's id and its run token.

    Raises:
        ServiceUnavailable: The service cannot be reached (the message says what to do).
        nnx_ppo.client.ApiError: It refused (401: the access token; 422: a field).
    """
    body = {
        "name": name,
        "config": dict(config),
        "tags": list(tags),
        "notes": notes,
        "total_steps": total_steps,
    }
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.post(
            f"{url.rstrip('/')}/api/runs/track", json=body, headers=headers, timeout=timeout_s
        )
    except httpx.TransportError as error:
        raise ServiceUnavailable(
            f"cannot reach the nnx-ppo service at {url} to track run {name!r} ({error}): "
            "start it (`nnx-ppo serve`), point NNX_PPO_URL or track(url=...) at it, or track "
            'offline with track(..., mode="offline") and upload later with `nnx-ppo sync DIR`'
        ) from None
    if response.status_code != 201:
        try:
            detail: Any = response.json().get("detail")
        except ValueError:
            detail = response.text[:500]
        raise api_error(response.status_code, detail, "track")
    answer = response.json()
    return str(answer["run"]["id"]), str(answer["token"])
