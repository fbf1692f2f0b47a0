"""The whole system as `make run` starts it: the launcher as a process, embedded Postgres and Valkey, five
services, in a fresh data dir. Stopped with SIGINT, as Ctrl-C would, and checked for orphans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from memento_devtools.embedded import free_port

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
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    data_dir = tmp_path_factory.mktemp("e2e") / "memento-data"
    env = {**os.environ, "MEMENTO_DATA_DIR": str(data_dir), "PORT": str(free_port()), "MEMENTO_ACCESS_KEY": ACCESS_KEY}
    log = (data_dir.parent / "launcher.out").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "memento_devtools.launcher"], env=env, stdout=log, stderr=subprocess.STDOUT
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
        finally:
            log.close()
        assert code == 0, (data_dir.parent / "launcher.out").read_text()[-3000:]
        alive = [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
        assert not alive, f"orphans left after Ctrl-C: {[c.cmdline()[:3] for c in alive]}"
