"""Every worker stops by itself on SIGTERM (a hung worker would outlive a killed launcher or pod)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from memento_devtools.embedded import free_port


@pytest.mark.parametrize(
    ("module", "port_var"), [("memento_evaluator", "EVALUATOR_PORT"), ("memento_consolidator", "CONSOLIDATOR_PORT")]
)
def test_worker_exits_on_sigterm(servers, module, port_var, tmp_path):
    port = free_port()
    env = {**os.environ, **servers.env(), port_var: str(port)}
    with (tmp_path / "worker.log").open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", module], env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                assert process.poll() is None, (tmp_path / "worker.log").read_text()
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "worker never became healthy"
                time.sleep(0.1)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=15) == 0, (tmp_path / "worker.log").read_text()
        finally:
            if process.poll() is None:
                process.kill()
