"""The whole system as `make run` starts it: the launcher as a process, embedded Postgres and Valkey, five
services, in a fresh data dir. Stopped with SIGINT, as Ctrl-C would, and checked for orphans."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

from memento_devtools.embedded import free_port, spawn
from tests.fixtures.otlp import Receiver

ACCESS_KEY = "e2e-access-key-" + "x" * 16


@dataclass
class System:
    data_dir: Path
    info: dict
    process: subprocess.Popen

    @property
    def mcp_url(self) -> str:
        return self.info["mcp_url"]

    @property
    def base_url(self) -> str:
        return self.mcp_url.rsplit("/mcp", 1)[0]

    def service_url(self, service: str) -> str:
        return f"http://127.0.0.1:{self.info['ports'][service]}"


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1):
    """Bounded polling, never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture(scope="session")
def otlp() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture(scope="session")
def system(tmp_path_factory: pytest.TempPathFactory, otlp: Receiver) -> Iterator[System]:
    """The services apart, as containers run them (tests here kill memory-api alone, and read each one's spans)."""
    telemetry = {
        # every service exports its spans to the loopback receiver, in small batches so tests need not wait
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    with launched(tmp_path_factory.mktemp("e2e") / "memento-data", MEMENTO_COHOST="0", **telemetry) as system:
        yield system


@contextlib.contextmanager
def launched(data_dir: Path, **extra: str) -> Iterator[System]:
    """`make run` in `data_dir`, with `extra` in its environment; stopped with SIGINT, and checked for orphans."""
    env = {
        **os.environ,
        "MEMENTO_DATA_DIR": str(data_dir),
        "PORT": str(free_port()),
        "MEMENTO_ACCESS_KEY": ACCESS_KEY,
        **extra,
    }
    # spawn: the launcher dies with this test process (SIGINT, its clean shutdown) even if pytest is killed
    process = spawn(
        [sys.executable, "-m", "memento_devtools.launcher"],
        log_path=data_dir.parent / "launcher.out",
        env=env,
        death_signal=signal.SIGINT,
    )
    run_file = data_dir / "run.json"

    def ready():
        if process.poll() is not None:
            raise AssertionError(
                f"launcher exited {process.returncode}: {(data_dir.parent / 'launcher.out').read_text()}"
            )
        return run_file.exists() and json.loads(run_file.read_text())

    info = wait_for(ready, 180, "make run to report ready")
    children = psutil.Process(process.pid).children(recursive=True)
    try:
        yield System(data_dir, info, process)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(90)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        assert code == 0, (data_dir.parent / "launcher.out").read_text()[-3000:]
        alive = [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
        assert not alive, f"orphans left after Ctrl-C: {[c.cmdline()[:3] for c in alive]}"


@contextlib.contextmanager
def another_gateway(system: System, **env: str) -> Iterator[str]:
    """One more gateway process on the system's Redis, memory-api and data dir (so the same OAuth signing key):
    what a second replica behind a load balancer is. Yields its base URL; stopped with SIGTERM."""
    secrets = json.loads((system.data_dir / "secrets.json").read_text())
    port = free_port()
    values = {
        **os.environ,
        "PORT": str(port),
        "MEMENTO_DATA_DIR": str(system.data_dir),
        "MEMENTO_ACCESS_KEY": ACCESS_KEY,
        "MEMENTO_INTERNAL_SECRET": secrets["internal_secret"],
        "REDIS_URL": system.info["redis_url"],
        "MEMORY_API_URL": system.service_url("memory-api"),
        **env,
    }
    out = system.data_dir.parent / f"gateway-{port}.out"
    process = spawn([sys.executable, "-m", "memento_gateway"], log_path=out, env=values)
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert process.poll() is None, out.read_text()
        try:
            return httpx.get(url + "/health", trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(healthy, 60, "another gateway to answer /health")
        yield url
    finally:
        process.terminate()
        process.wait(30)


# the console's browser tests (test_console*.py): one Chromium per module, a fresh context per test (imported here,
# not at the top: console_screenshots imports this module)
@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    from tests.e2e.console_screenshots import launch

    with sync_playwright() as p:
        chromium = launch(p)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    yield context.new_page()
    context.close()


@pytest.fixture(scope="module")
def db(system) -> str:
    """The schema owner's URL, to check rows the console wrote."""
    from tests.e2e.console_screenshots import owner_url

    return owner_url(system.data_dir, system.info["database_url"])
