"""The example plugin package (``tests/plugin_example``) made visible as an installed one.

Where it is installed (``pip install -e tests/plugin_example``), nothing is done. Otherwise
a ``.dist-info`` holding its entry points (read from its ``pyproject.toml``) is written to a
temporary folder, which goes on ``sys.path`` with the package's folder; ``PYTHONPATH`` carries
both to the services a test starts, and so to their spawned workers and checkers.
"""

from __future__ import annotations

import os
import sys
import tomllib
from importlib import metadata
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent / "plugin_example"
PACKAGE = "nnx-ppo-example-plugin"


def installed() -> bool:
    try:
        metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        return False
    return True


def write_dist_info(site: Path) -> None:
    """``site/<name>-<version>.dist-info`` with the example's metadata and entry points."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    name, version = project["name"], project["version"]
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    sections = []
    for group, entries in project["entry-points"].items():
        lines = [f"{key} = {value}" for key, value in entries.items()]
        sections.append("\n".join([f"[{group}]", *lines]))
    (info / "entry_points.txt").write_text("\n\n".join(sections) + "\n")


def make_visible(site: Path) -> dict[str, str]:
    """Makes the example plugin visible here; returns the environment variables that make it
    visible to a child process (none where it is installed)."""
    if installed():
        return {}
    write_dist_info(site)
    paths = [str(site), str(EXAMPLE)]
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    inherited = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join([*paths, *([inherited] if inherited else [])])}
