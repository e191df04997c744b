"""Safe unpacking of a checkpoint archive (a ``.tar.gz`` whose single top-level folder is
``step_XXXXXXXXXX/``): only regular files and folders, every path inside that folder."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path, PurePosixPath

from nnx_ppo.client.errors import ClientError

STEP_DIR = re.compile(r"step_\d{10}")


class ArchiveError(ClientError):
    """A checkpoint archive that is not what the service sends (or not safe to unpack)."""


def extract_checkpoint(archive: Path, into: Path) -> str:
    """Unpacks ``archive`` into ``into``; returns the name of its ``step_XXXXXXXXXX`` folder.

    Raises:
        ArchiveError: for a link, a device, an absolute path, a ``..`` part, more than one
            top-level entry, or a file that is not a gzipped tar.
    """
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            tops = set()
            for member in members:
                parts = PurePosixPath(member.name).parts
                if not parts or member.name.startswith(("/", "\\")) or ".." in parts:
                    raise ArchiveError(f"checkpoint archive: unsafe path {member.name!r}")
                if not (member.isfile() or member.isdir()):
                    raise ArchiveError(
                        f"checkpoint archive: {member.name!r} is not a regular file or folder"
                    )
                tops.add(parts[0])
            if len(tops) != 1 or not STEP_DIR.fullmatch(next(iter(tops))):
                raise ArchiveError(
                    f"checkpoint archive: expected one step_XXXXXXXXXX folder, found {sorted(tops)}"
                )
            into.mkdir(parents=True, exist_ok=True)
            tar.extractall(into, members=members, filter="data")
    except (tarfile.TarError, EOFError, OSError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise ArchiveError(f"checkpoint archive: {error}") from None
    return tops.pop()
