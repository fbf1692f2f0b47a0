"""`make conformance`: the official MCP conformance suites (npm `@modelcontextprotocol/conformance`) against a
fresh `make run`, behind an access key, then the official TypeScript SDK client against two gateway replicas.

The suites' client cannot send headers, so it reaches the gateway with the key in the URL (`?accessKey=`, which
seed 000 §12 allows). Scenarios that need a suite's own fixture tools, prompts and resources (its "everything
server") are listed in that suite's baseline; a suite fails on any other failure, and also when a listed one
starts passing, so the lists stay honest. Each suite runs with the selection given with it: 0.1.16 its default
(the session-based revisions), the 0.2 pre-release `requirements=2026-07-28` (every scenario that revision
requires, at its stateless wire).
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

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


@contextmanager
def replica(work: Path, info: dict, key: str) -> Iterator[str]:
    """One more gateway on the system's Redis and memory-api, behind the same key: a second replica. Yields its
    MCP URL."""
    data = work / "data"
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "MEMENTO_DATA_DIR": str(data),
        "MEMENTO_ACCESS_KEY": key,
        "MEMENTO_INTERNAL_SECRET": json.loads((data / "secrets.json").read_text())["internal_secret"],
        "REDIS_URL": info["redis_url"],
        "MEMORY_API_URL": f"http://127.0.0.1:{info['ports']['memory-api']}",
    }
    log = (work / f"gateway-{port}.out").open("wb")
    gateway = subprocess.Popen([sys.executable, "-m", "memento_gateway"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _healthy(url):
            if gateway.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"conformance: a gateway replica did not start; see {work / f'gateway-{port}.out'}")
            time.sleep(0.2)  # polling its /health
        yield url + "/mcp"
    finally:
        gateway.terminate()
        gateway.wait(30)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def suite_name(index: str) -> str:
    """`conformance@0.1.16`, from the package the suite's dist/index.js belongs to."""
    package = Path(index).parents[1]
    return f"{package.name}@{json.loads((package / 'package.json').read_text())['version']}"


def run_suite(node: str, suite: list[str], url: str, results: Path) -> int:
    index, baseline, selection = suite
    name = suite_name(index)
    command = [node, index, "server", "--url", url, "--expected-failures", str(HERE / baseline)]
    command += ["--output-dir", str(results / name)]
    if selection != "-":
        command.append("--" + selection)
    sys.stdout.write(f"conformance: {name}, {selection if selection != '-' else 'its default scenarios'}\n")
    sys.stdout.flush()
    return subprocess.call(command)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", required=True, help="Node 22 binary")
    parser.add_argument(
        "--suite",
        action="append",
        nargs=3,
        required=True,
        metavar=("INDEX_JS", "BASELINE", "SELECTION"),
        help="a conformance package's dist/index.js, its baseline file (beside this script) and which scenarios to "
        "run, as one option of the suite's without its dashes ('requirements=2026-07-28'; '-': its default)",
    )
    parser.add_argument("--client-modules", help="node_modules holding @modelcontextprotocol/client: run its check")
    parser.add_argument("--results", default=".venv/conformance/results", help="where the suites write checks.json")
    args = parser.parse_args()
    key = "conformance-" + secrets.token_urlsafe(24)
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="memento-conformance-") as tmp:
        launcher, info = start_system(Path(tmp), key)
        started = time.monotonic()
        try:
            for suite in args.suite:
                if run_suite(args.node, suite, f"{info['mcp_url']}?accessKey={key}", Path(args.results)) != 0:
                    failures.append(suite_name(suite[0]))
            if args.client_modules:
                with replica(Path(tmp), info, key) as second:
                    check = [args.node, str(HERE / "ts_client.mjs"), args.client_modules, info["mcp_url"], second, key]
                    if subprocess.call(check) != 0:
                        failures.append("the TypeScript SDK client")
        finally:
            launcher.send_signal(signal.SIGINT)
            launcher.wait(90)
    verdict = "passed" if not failures else "FAILED: " + "; ".join(failures)
    sys.stdout.write(f"conformance: {verdict} in {time.monotonic() - started:.0f} s; results in {args.results}\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
