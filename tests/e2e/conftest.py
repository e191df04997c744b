"""Fixtures of the browser tests: a real `nnx-ppo serve` subprocess and Debian's Chromium
driven by Playwright (imported only when a test asks for a browser)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DIST_INDEX = ROOT / "frontend" / "dist" / "index.html"
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
TOKEN = "e2e-test-token-0123456789"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session", autouse=True)
def chromium_installed() -> None:
    """Every browser test is skipped, whatever its file, where Debian's Chromium is missing
    (README: `.ci/run` installs it). Session-scoped, so it runs before any server starts."""
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    url: str
    token: str
    log_path: Path

    def login_url(self) -> str:
        return f"{self.url}/?token={self.token}"


def _wait_healthy(url: str, process: subprocess.Popen, log_path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode}):\n{log_path.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/api/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    raise RuntimeError(f"the server did not answer /api/health in {timeout_s} s")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("e2e-data")) as started:
        yield started


@contextlib.contextmanager
def serving(data_dir: Path, extra_env: dict[str, str] | None = None) -> Iterator[Server]:
    """``nnx-ppo serve`` on ``data_dir`` (with ``extra_env``) until the block ends."""
    port = _free_port()
    log_path = data_dir / "server.log"
    env = {
        **os.environ,
        "NNX_PPO_API_TOKEN": TOKEN,
        "NNX_PPO_JAX_CACHE": os.environ.get("NNX_PPO_JAX_CACHE", str(ROOT / ".cache" / "jax")),
        "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"),
        # Describing every Playground env costs a minute of CPU; the tests use built-ins.
        "NNX_PPO_LIST_PLAYGROUND_ENVS": "false",
        # A sample of system/* metrics every second, so that a short run has some.
        "NNX_PPO_SYSTEM_METRICS_SECONDS": "1",
        **(extra_env or {}),
    }
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "server.cli",
                "serve",
                "--port",
                str(port),
                "--data-dir",
                str(data_dir),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, log_path, timeout_s=90)
        yield Server(url=url, token=TOKEN, log_path=log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(log_path, ARTIFACTS / "server.log")


@pytest.fixture(scope="module")  # Playwright's loop ends with the module
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield instance
        instance.close()


@dataclass
class ConsoleWatch:
    """Collects the page's console errors and uncaught exceptions; a test names the HTTP
    error statuses it provokes on purpose (Chromium logs each failed request)."""

    errors: list[str] = field(default_factory=list)
    allowed: list[re.Pattern[str]] = field(default_factory=list)

    def allow_status(self, *statuses: int) -> None:
        for status in statuses:
            self.allowed.append(re.compile(rf"status of {status}\b"))

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self.allowed)]


def _new_page(browser: object, viewport: dict[str, int]) -> tuple[object, object, ConsoleWatch]:
    context = browser.new_context(viewport=viewport, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    watch = ConsoleWatch()
    page.on("console", lambda msg: msg.type == "error" and watch.errors.append(msg.text))
    page.on("pageerror", lambda error: watch.errors.append(f"uncaught: {error}"))
    return context, page, watch


@pytest.fixture
def desktop(browser: object) -> Iterator[tuple[object, ConsoleWatch]]:
    """A fresh 1280x800 page (no cookie); fails the test on unexpected console errors."""
    context, page, watch = _new_page(browser, {"width": 1280, "height": 800})
    yield page, watch
    context.close()
    assert watch.unexpected() == [], f"browser console errors: {watch.unexpected()}"


@pytest.fixture
def phone(browser: object) -> Iterator[tuple[object, ConsoleWatch]]:
    """A fresh 375x800 page (a phone's width)."""
    context, page, watch = _new_page(browser, {"width": 375, "height": 800})
    yield page, watch
    context.close()
    assert watch.unexpected() == [], f"browser console errors: {watch.unexpected()}"


def field(page: Any, path: str) -> Any:
    """The text input, select or textarea of the form field at a spec path."""
    return page.locator(f'[data-path="{path}"]').locator("input, select, textarea").first


def screenshot(page: object, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
