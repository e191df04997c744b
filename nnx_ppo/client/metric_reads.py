"""``Client``'s metric reads: downsampled series, a pandas frame, every point (CSV)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

import numpy as np

from nnx_ppo.client.http import HttpBase
from nnx_ppo.client.types import (
    Series,
    decode_value,
)


class MetricReads(HttpBase):
    """A run's metrics (a part of ``Client``)."""

    def metrics(
        self,
        run_id: str,
        keys: Iterable[str] | str | None = None,
        max_points: int | None = None,
    ) -> dict[str, Series]:
        """A run's metrics as numpy arrays, one ``Series`` per key (all keys by default).

        ``max_points=None``: every stored point with its wall time (from ``metrics.csv``);
        a number: at most that many points per key, downsampled by the server (per bucket
        the last value and the bucket's min and max). NaN and infinities are floats.
        """
        wanted = [keys] if isinstance(keys, str) else None if keys is None else list(keys)
        if max_points is None:
            return self._all_metrics(run_id, wanted)
        params: dict[str, Any] = {"max_points": max_points}
        if wanted is not None:
            params["keys"] = ",".join(wanted)
        path = f"{self._run_path(run_id)}/metrics"
        data = self._json("GET", path, f"metrics of {run_id}", params=params)
        out = {}
        for key, raw in data["series"].items():
            wall = raw.get("wall_time")
            out[key] = Series(
                step=np.asarray(raw["step"], dtype=np.int64),
                value=_floats(raw["value"]),
                min=_floats(raw["min"]),
                max=_floats(raw["max"]),
                wall_time=None if wall is None else np.asarray(wall, dtype=np.float64),
            )
        return out

    def metrics_frame(
        self,
        run_id: str,
        keys: Iterable[str] | str | None = None,
        max_points: int | None = None,
    ) -> Any:
        """``metrics(...)`` as a long-format pandas DataFrame: columns ``key``, ``step``,
        ``value``, ``min``, ``max``, ``wall_time`` (``df.pivot(index="step",
        columns="key", values="value")`` makes it wide). Needs pandas."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(
                "Client.metrics_frame needs pandas (pip install pandas); "
                "Client.metrics returns the same data as numpy arrays"
            ) from None
        frames = []
        for key, s in self.metrics(run_id, keys, max_points).items():
            wall = s.wall_time if s.wall_time is not None else np.full(len(s), np.nan)
            frames.append(
                pd.DataFrame(
                    {
                        "key": key,
                        "step": s.step,
                        "value": s.value,
                        "min": s.min,
                        "max": s.max,
                        "wall_time": wall,
                    }
                )
            )
        columns = ["key", "step", "value", "min", "max", "wall_time"]
        if not frames:
            return pd.DataFrame({c: [] for c in columns})
        return pd.concat(frames, ignore_index=True)[columns]

    def _all_metrics(self, run_id: str, keys: list[str] | None) -> dict[str, Series]:
        text = self._request("GET", f"{self._run_path(run_id)}/metrics.csv", f"metrics of {run_id}")
        columns: dict[str, tuple[list[int], list[float], list[float]]] = {}
        wanted = None if keys is None else set(keys)
        for row in csv.DictReader(io.StringIO(text.text)):
            key = row["key"]
            if wanted is not None and key not in wanted:
                continue
            steps, walls, vals = columns.setdefault(key, ([], [], []))
            steps.append(int(row["step"]))
            walls.append(float(row["wall_time"]))
            vals.append(decode_value(row["value"]))
        out = {}
        for key, (steps, walls, vals) in columns.items():
            value = np.asarray(vals, dtype=np.float64)
            out[key] = Series(
                step=np.asarray(steps, dtype=np.int64),
                value=value,
                min=value.copy(),
                max=value.copy(),
                wall_time=np.asarray(walls, dtype=np.float64),
            )
        return out


def _floats(values: list[Any]) -> np.ndarray:
    return np.asarray([decode_value(v) for v in values], dtype=np.float64)
