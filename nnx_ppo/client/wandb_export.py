"""``nnx-ppo export ID --to wandb``: replays a finished run into Weights & Biases: every
scalar at its step (with its wall time), the spec as the config, the videos at theirs."""

from __future__ import annotations

import tempfile
from collections import defaultdict
from typing import Any, Literal

from nnx_ppo.client.client import Client
from nnx_ppo.client.errors import ClientError


def export_to_wandb(
    client: Client,
    run_id: str,
    *,
    project: str,
    entity: str | None = None,
    mode: Literal["offline", "online"] = "offline",
) -> str:
    """Replays the finished run ``run_id`` into a new W&B run; returns where it went (the
    offline run's folder, to upload with ``wandb sync``, or the online run's URL)."""
    try:
        import wandb
    except ImportError:
        raise ClientError("exporting to W&B needs wandb: pip install 'nnx-ppo[wandb]'") from None
    run = client.run(run_id)
    if not run.finished:
        raise ClientError(f"run {run_id} is {run.status}: export it once it has finished")
    rows: dict[int, dict[str, Any]] = defaultdict(dict)
    wall: dict[int, float] = {}
    for key, series in client.metrics(run_id).items():
        walls = series.wall_time if series.wall_time is not None else [None] * len(series)
        for step, value, when in zip(series.step, series.value, walls, strict=True):
            rows[int(step)][key] = float(value)
            if when is not None:
                wall[int(step)] = max(wall.get(int(step), 0.0), float(when))
    with tempfile.TemporaryDirectory(prefix="nnx-ppo-videos-") as videos_dir:
        for video in client.videos(run_id):
            path = client.download_video(run_id, video.id, videos_dir)
            rows[video.step]["eval/video"] = wandb.Video(str(path), format="mp4")
        target = wandb.init(
            project=project,
            entity=entity,
            name=run.name,
            config={"nnx_ppo_run_id": run.id, **run.spec},
            tags=run.tags or None,
            notes=run.notes or None,
            mode=mode,
            job_type=run.kind,
        )
        try:
            for step in sorted(rows):
                row = rows[step]
                if step in wall:
                    row["_timestamp"] = wall[step]  # when the step happened, not now
                target.log(row, step=step)
            target.summary["status"] = run.status
            target.summary["steps"] = run.steps
            where = str(target.dir if mode == "offline" else target.url)
        finally:
            target.finish()
    if mode == "offline":
        # target.dir is the run's files/ folder; `wandb sync` takes its parent.
        where = where.rsplit("/files", 1)[0]
        return f"offline W&B run: {where} (upload with `wandb sync {where}`)"
    return f"W&B run: {where}"
