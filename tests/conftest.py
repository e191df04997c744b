"""Test-wide setup: CPU JAX with a persistent compilation cache shared across runs."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MUJOCO_GL", "egl")

import jax
import pytest

from nnx_ppo.utils import enable_compilation_cache
from tests.postgres import PostgresServer, start_or_skip

ROOT = pathlib.Path(__file__).resolve().parents[1]
enable_compilation_cache(os.environ.get("NNX_PPO_JAX_CACHE", str(ROOT / ".cache" / "jax")))
jax.config.update("jax_enable_x64", False)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL cluster for the session (skipped where it is not installed)."""
    server = start_or_skip()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> str:
    """A fresh, migrated database of each backend."""
    if request.param == "sqlite":
        from server.store.db import migrate

        url = f"sqlite:///{tmp_path / 'db.sqlite'}"
        migrate(url)
        return url
    return request.getfixturevalue("postgres").database()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--every-env",
        action="store_true",
        help="tests/envs/test_every_env.py: every available env (make test-envs), "
        "not only the cheap subset",
    )


@pytest.fixture(scope="session")
def example_plugin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The example plugin (``tests/plugin_example``: env ``TwoLinkArm``, network
    ``plugin:tiny``, the broken env ``BrokenArm``) pip-installed for the session; the
    environment variables a service needs to see it too (``tests/plugin_fixture.py``)."""
    from tests.plugin_fixture import make_visible

    return make_visible(tmp_path_factory.mktemp("plugin-site"))
