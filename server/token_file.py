"""The access token in the data directory (``<data_dir>/api_token``, mode 0600), written by
``nnx-ppo serve`` at start so that the local user's client and CLI find it
(``nnx_ppo.client`` reads the same file name) without copying it from the printed URL."""

from __future__ import annotations

import os
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
