"""The example plugin package (``tests/plugin_example``) installed for the test session.

Where it is installed already (``pip install -e tests/plugin_example``), nothing is done.
Otherwise pip installs a copy of it into a temporary folder (``--target``: offline, no build
isolation, with the test extra's setuptools), so the service sees what a user's ``pip install``
gives: the package and a ``.dist-info`` whose entry points its build backend wrote. The folder
goes on ``sys.path``, and ``PYTHONPATH`` carries it to the services a test starts, and so to
their spawned workers and checkers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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


def install(site: Path) -> None:
    """pip-installs the example plugin into ``site`` (from a copy: two test workers may install
    at once, and a build writes next to its sources)."""
    source = site.parent / f"{site.name}-source"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    command += ["--no-build-isolation", "--target", str(site), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"installing the example plugin failed:\n{done.stdout}{done.stderr}")


def make_visible(site: Path) -> dict[str, str]:
    """Installs the example plugin for this process; returns the environment variables that
    make it visible to a child process (none where it is installed in the environment)."""
    if installed():
        return {}
    install(site)
    if str(site) not in sys.path:
        sys.path.insert(0, str(site))
    inherited = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join([str(site), *([inherited] if inherited else [])])}
