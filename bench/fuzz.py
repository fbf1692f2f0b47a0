"""Long fuzzing runs of every tool (issue 31 item 1): memento_devtools.fuzz against the whole system started as
bench.run starts it, `--examples` valid calls and as many near-misses per tool, through the gateway with the
official client; prints the outcomes by answer, every failure, and writes bench/results/fuzz-<time>.json. The
bounded run in `make test` is tests/e2e/test_fuzz_tools.py.

    python -m bench.fuzz --examples 500 [--seed S] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time

import asyncpg
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bench.report import RESULTS
from bench.run import System
from memento_devtools import fuzz


async def main_async(args: argparse.Namespace) -> dict:
    args.url = None
    system = System(args)
    system.start()
    try:
        headers = {"Authorization": f"Bearer {system.secrets['access_key']}",
                   "X-Memento-Workspace": f"fuzz-{secrets.token_hex(3)}"}  # fmt: skip
        http = create_mcp_http_client(headers=headers)
        owner = await asyncpg.connect(system.owner_url())
        started = time.perf_counter()
        try:
            async with Client(streamable_http_client(f"{system.info['mcp_url']}?profile=all", http_client=http)) as c:
                tools = (await c.list_tools()).tools
                report = fuzz.Report()
                for round_start in range(0, args.examples, 10):  # rounds of 10 a tool, so progress shows
                    await fuzz.run(c, tools, min(10, args.examples - round_start), args.seed + round_start, owner,
                                   report)  # fmt: skip
                    print(f"  {len(report.outcomes)} calls, {len(report.failures)} failures", flush=True)
        finally:
            await owner.close()
        return {
            "command": "python -m bench.fuzz " + " ".join(sys.argv[1:]),
            "tools": len(tools),
            "seed": args.seed,
            "seconds": round(time.perf_counter() - started, 1),
            **report.summary(),
            "failure_list": [o.__dict__ for o in report.failures],
        }
    finally:
        system.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=100, help="valid calls (and near-misses) per tool")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data-dir", help="data dir for the started system (default: a fresh temporary one)")
    parser.add_argument("--port", type=int, default=56732, help="gateway port of the started system")
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"fuzz-{time.strftime('%Y%m%d-%H%M%S')}.json"
    (RESULTS / name).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: v for k, v in results.items() if k != "failure_list"}, indent=2))
    for failure in results["failure_list"]:
        print(f"FAIL {failure['tool']} [{failure['kind']} {failure['expected_field']}] {failure['failure']}")
    print(f"bench: results written to bench/results/{name}")


if __name__ == "__main__":
    main()
