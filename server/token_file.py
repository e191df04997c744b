"""The access token in the data directory (``<data_dir>/api_token``, mode 0600), written by
``nnx-ppo serve`` at start so that the local user's client and CLI find it
(``nnx_ppo.client`` reads the same file name) without copying it from the printed URL, and
reused at the next start, so that open dashboards and scripts keep working across a
restart (``--new-token`` rotates it; ``NNX_PPO_API_TOKEN`` wins over both)."""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

TOKEN_FILE = "api_token"


def write_token_file(data_dir: Path, token: str) -> Path:
    """Writes ``token`` to ``data_dir/api_token`` atomically, readable by its owner only."""
    target = data_dir / TOKEN_FILE
    tmp = data_dir / f".{TOKEN_FILE}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask or an older file left
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def read_token_file(data_dir: Path) -> str | None:
    """The token a previous start wrote, or None when there is none or it is not one that
    ``serve`` would have written (URL-safe, 8 to 256 characters)."""
    try:
        token = (data_dir / TOKEN_FILE).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return token if re.fullmatch(r"[A-Za-z0-9_-]{8,256}", token) else None


def service_token(data_dir: Path, given: str | None, *, rotate: bool = False) -> str:
    """The token this start serves with, written to the token file: ``given``
    (``NNX_PPO_API_TOKEN``) when set; else the token file's unless ``rotate``; else a
    new one."""
    token = given or (None if rotate else read_token_file(data_dir))
    token = token or secrets.token_urlsafe(24)
    write_token_file(data_dir, token)
    return token
