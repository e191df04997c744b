"""The body of an error answer."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ErrorPublic(BaseModel):
    detail: str | list[dict[str, Any]]
