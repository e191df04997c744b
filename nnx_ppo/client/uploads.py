"""Files PUT to the service (checkpoints, videos, recordings): streamed in chunks, with the
SHA-256 and the length the service checks before it keeps one."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

CHUNK = 1 << 20
"""Bytes read (and sent) at a time."""


def file_chunks(file: Path) -> Iterator[bytes]:
    """``file``'s bytes, ``CHUNK`` at a time."""
    with open(file, "rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk


def upload_headers(file: Path) -> dict[str, str]:
    """The headers of ``file``'s upload: its SHA-256 (``X-Content-SHA256``), type and length."""
    digest = hashlib.sha256()
    for chunk in file_chunks(file):
        digest.update(chunk)
    return {
        "X-Content-SHA256": digest.hexdigest(),
        "Content-Type": "application/octet-stream",
        "Content-Length": str(file.stat().st_size),
    }
