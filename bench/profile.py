"""Where the time goes: py-spy samples memory-api and the gateway while one client drives `remember` or `recall`
by text through the gateway on N bulk-loaded fragments, and the CPU samples are grouped by library.

    python -m bench.profile --n 10000 --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bench.load import load
from bench.report import RESULTS
from bench.run import WORKSPACE, System, Workload, wait_for_l1

# A frame's file decides its group; the first matching pattern wins (order matters: our code before site-packages).
GROUPS = [
    ("memento (our code)", ("memento_",)),
    ("asyncpg (Postgres driver)", ("asyncpg",)),
    ("redis client", ("redis/", "arq/")),
    ("pydantic (validation)", ("pydantic",)),
    ("opentelemetry (tracing)", ("opentelemetry",)),
    ("httpx / httpcore (HTTP client)", ("httpx", "httpcore", "h11")),
    ("starlette / fastapi / uvicorn (HTTP server)", ("starlette", "fastapi", "uvicorn", "sse_starlette")),
    ("json / stdlib", ("json/", "python3.11/")),
    ("prometheus-client", ("prometheus_client",)),
]
OPS = {"remember": "remember", "recall_text": "recall"}


def pid_of(system: System, module: str) -> int:
    for child in psutil.Process(system.process.pid).children(recursive=True):
        if module in " ".join(child.cmdline()):
            return child.pid
    raise SystemExit(f"profile: no process runs {module}")


def group_of(frame: str) -> str:
    for name, patterns in GROUPS:
        if any(p in frame for p in patterns):
            return name
    return "other"


def summarise(raw: Path) -> dict:
    """py-spy's raw output: one collapsed stack per line, then a sample count. Self time goes to the leaf's group;
    inclusive time to every group on the stack, so 'our code' shows how much runs beneath our own functions."""
    leaf, inclusive, total = Counter(), Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        leaf[group_of(frames[-1])] += n
        for group in {group_of(f) for f in frames}:
            inclusive[group] += n
    top_functions = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            top_functions[stack.split(";")[-1].split(" (")[0] + " — " + group_of(stack.split(";")[-1])] += int(count)
    share = lambda c: {k: round(100 * v / total, 1) for k, v in c.most_common()}  # noqa: E731
    return {
        "samples": total,
        "self_percent": share(leaf),
        "inclusive_percent": share(inclusive),
        "top_leaf_functions": {k: round(100 * v / total, 1) for k, v in top_functions.most_common(8)},
    }


async def drive(system: System, workload: Workload, op: str, seconds: float) -> int:
    headers = {"Authorization": f"Bearer {system.secrets['access_key']}", "X-Memento-Workspace": WORKSPACE}
    calls = 0
    async with Client(
        streamable_http_client(system.info["mcp_url"], http_client=create_mcp_http_client(headers=headers))
    ) as c:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await c.call_tool(OPS[op], workload.args(op))
            calls += 1
    return calls


async def main_async(args: argparse.Namespace) -> dict:
    os.environ["MEMENTO_COHOST"] = "0"  # each service profiled in its own process
    system = System(args)
    system.start()
    out: dict = {"n": args.n, "seconds": args.seconds, "ops": {}}
    try:
        loaded = await load(system.owner_url(), system.service_url("embedder"), args.n, WORKSPACE)
        await wait_for_l1(system)
        workload = Workload(loaded["ids"])
        targets = {"memory-api": pid_of(system, "memento_memory_api"), "gateway": pid_of(system, "memento_gateway")}
        for op in OPS:
            await drive(system, workload, op, 2)  # warm caches and connections
            spies = {}
            for name, pid in targets.items():
                raw = RESULTS / f"profile-{op}-{name}.raw"
                spies[name] = (
                    raw,
                    subprocess.Popen(
                        [
                            str(Path(sys.executable).with_name("py-spy")),
                            "record",
                            "--pid",
                            str(pid),
                            "--rate",
                            "250",
                            "--duration",
                            str(int(args.seconds)),
                            "--format",
                            "raw",
                            "--output",
                            str(raw),
                            "--nonblocking",
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    ),
                )
            calls = await drive(system, workload, op, args.seconds)
            out["ops"][op] = {"calls": calls, "calls_per_s": round(calls / args.seconds, 1)}
            for name, (raw, spy) in spies.items():
                spy.wait(60)
                out["ops"][op][name] = summarise(raw)
                raw.unlink()
    finally:
        system.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--port", type=int, default=56435)
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    args.url = args.key = None
    RESULTS.mkdir(parents=True, exist_ok=True)
    results = asyncio.run(main_async(args))
    results["command"] = "python -m bench.profile " + " ".join(sys.argv[1:])
    path = RESULTS / f"profile-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
