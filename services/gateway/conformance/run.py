"""`make conformance`: the official MCP conformance suite (npm `@modelcontextprotocol/conformance`) against a
fresh `make run`, behind an access key.

The suite's client cannot send headers, so it reaches the gateway with the key in the URL (`?accessKey=`, which
seed 000 §12 allows). Scenarios that need the suite's own fixture tools, prompts and resources (its
"everything server") are listed in baseline.yml; the suite fails on any other failure, and also when a
listed one starts passing, so the list stays honest.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memento_devtools.embedded import free_port

HERE = Path(__file__).resolve().parent
START_TIMEOUT_S = 300


def start_system(work: Path, key: str) -> tuple[subprocess.Popen, dict]:
    data = work / "data"
    env = {**os.environ, "MEMENTO_DATA_DIR": str(data), "MEMENTO_ACCESS_KEY": key, "PORT": str(free_port())}
    log = (work / "launcher.out").open("wb")
    launcher = subprocess.Popen(
        [sys.executable, "-m", "memento_devtools.launcher"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not (data / "run.json").exists():
        if launcher.poll() is not None or time.monotonic() > deadline:
            launcher.kill()
            sys.exit(f"conformance: the system did not start; see {work / 'launcher.out'}")
        time.sleep(0.2)  # polling the launcher's readiness file
    return launcher, json.loads((data / "run.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", required=True, help="Node 22 binary")
    parser.add_argument("--suite", required=True, help="the conformance package's dist/index.js")
    parser.add_argument("--results", default=".venv/conformance/results", help="where the suite writes checks.json")
    args = parser.parse_args()
    key = "conformance-" + secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="memento-conformance-") as tmp:
        launcher, info = start_system(Path(tmp), key)
        started = time.monotonic()
        try:
            command = [args.node, args.suite, "server", "--url", f"{info['mcp_url']}?accessKey={key}"]
            command += ["--expected-failures", str(HERE / "baseline.yml"), "--output-dir", args.results]
            code = subprocess.call(command)
        finally:
            launcher.send_signal(signal.SIGINT)
            launcher.wait(90)
    verdict = "passed" if code == 0 else f"FAILED (exit {code})"
    sys.stdout.write(f"conformance: {verdict} in {time.monotonic() - started:.0f} s; results in {args.results}\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
