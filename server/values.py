"""Metric values in JSON: JSON has no literal for NaN or the infinities, so they travel as
the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (the convention of proto3's JSON
mapping); finite values are plain numbers."""

from __future__ import annotations

import math

JsonFloat = float | str


def encode(value: float | None) -> JsonFloat:
    """A metric value for JSON; ``None`` (how SQLite stores NaN) is NaN."""
    if value is None or math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def decode(value: JsonFloat) -> float:
    if isinstance(value, str):
        return float({"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[value])
    return float(value)


def to_db(value: float) -> float | None:
    """SQLite has no NaN: it is stored as NULL."""
    return None if math.isnan(value) else value
