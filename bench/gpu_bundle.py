"""The wheel bundle for the bare GPU machine: slimming and the size check of ``gpu_bundle.sh``.

::

    python -m bench.gpu_bundle slim .whl      # drop what the machine cannot carry
    python -m bench.gpu_bundle size .whl      # bundle + working tree <= 64 MiB, or exit 1

Standard library only: it runs before anything else is installed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

LIMIT_BYTES = 64 * 1024 * 1024
"""What the device tool carries: the working tree, wheels included."""
DROP = {"imageio_ffmpeg": "imageio_ffmpeg/binaries/ffmpeg-"}
"""Per wheel (by its distribution's file-name prefix): members to leave out. imageio-ffmpeg's
ffmpeg is 173 MB (68 MB zipped); without it ``get_ffmpeg_exe`` uses ``$IMAGEIO_FFMPEG_EXE``
or a system ffmpeg, and the GPU check records which it found."""


def slim(wheel: Path, drop_prefix: str) -> int:
    """Rewrites ``wheel`` without the members starting with ``drop_prefix`` (and their RECORD
    lines); the platform tag becomes ``any``, as nothing platform-specific is left.

    Returns:
        Bytes saved.
    """
    before = wheel.stat().st_size
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename.startswith(drop_prefix):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(x for x in lines if not x.startswith(drop_prefix)).encode()
            if info.filename.endswith(".dist-info/WHEEL"):
                text = data.decode()
                data = "".join(
                    "Tag: py3-none-any\n" if x.startswith("Tag:") else x
                    for x in text.splitlines(keepends=True)
                ).encode()
            dst.writestr(info, data)
    name, version = wheel.name.split("-")[:2]
    target = wheel.with_name(f"{name}-{version}-py3-none-any.whl")
    tmp.replace(target)
    if target != wheel:
        wheel.unlink()
    return before - target.stat().st_size


def tree_files(root: Path) -> list[Path]:
    """The files the device tool carries: tracked, and untracked but not ignored by git."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout
    return [root / name for name in listed.decode().split("\0") if name]


def total_bytes(root: Path, bundle: Path) -> dict[str, int]:
    """Bytes of the working tree (links counted as links) and of the bundle."""
    tree = sum(os.lstat(p).st_size for p in tree_files(root) if os.path.lexists(p))
    wheels = sum(p.stat().st_size for p in bundle.glob("*.whl"))
    return {"tree": tree, "bundle": wheels, "total": tree + wheels, "limit": LIMIT_BYTES}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("slim", "size"))
    parser.add_argument("bundle", type=Path)
    args = parser.parse_args(argv)
    if args.command == "slim":
        for wheel in sorted(args.bundle.glob("*.whl")):
            for prefix, member in DROP.items():
                if wheel.name.startswith(prefix + "-"):
                    print(f"{wheel.name}: {slim(wheel, member) / 2**20:.1f} MiB dropped")
        return 0
    size = total_bytes(Path.cwd(), args.bundle)
    mib = {k: round(v / 2**20, 1) for k, v in size.items()}
    print(
        f"tree {mib['tree']} MiB + bundle {mib['bundle']} MiB = {mib['total']} MiB "
        f"(limit {mib['limit']} MiB)"
    )
    return 0 if size["total"] <= size["limit"] else 1


if __name__ == "__main__":
    sys.exit(main())
