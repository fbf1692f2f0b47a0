"""A peer, side by side: the official MCP memory server (npm `@modelcontextprotocol/server-memory`, stdio, a JSON
knowledge-graph file) and Memento (through the gateway), the same workload in the same run, reported as ratios.

Operations both have: store a memory (remember / create_entities), search by a keyword (recall keywords /
search_nodes), link two memories (link / create_relations).

    python -m bench.peer --n 500
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bench.corpus import fragments, keyword_pool
from bench.report import RESULTS, ROOT, percentiles, replace_readme_block
from bench.run import System

PEER = "@modelcontextprotocol/server-memory@2026.8.31"
PEER_DIR = ROOT / "bench" / ".peer"
PEER_JS = PEER_DIR / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"


def install_peer() -> None:
    if not PEER_JS.exists():
        subprocess.run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(PEER_DIR), PEER], check=True
        )


async def timed(call) -> float:
    started = time.perf_counter()
    result = await call
    if result.is_error and "already exists" not in result.content[0].text and "CONFLICT" not in result.content[0].text:
        raise SystemExit(f"peer bench: {result.content[0].text[:200]}")
    return time.perf_counter() - started


async def run_memento(system: System, items: list[dict], searches: list[str]) -> dict[str, list[float]]:
    headers = {"Authorization": f"Bearer {system.secrets['access_key']}", "X-Memento-Workspace": "peer"}
    out: dict[str, list[float]] = {"store": [], "search": [], "link": []}
    async with Client(
        streamable_http_client(system.info["mcp_url"], http_client=create_mcp_http_client(headers=headers))
    ) as c:
        ids = []
        for item in items:
            started = time.perf_counter()
            result = await c.call_tool(
                "remember", {"content": item["content"], "topic": item["topic"], "type": item["type"]}
            )
            out["store"].append(time.perf_counter() - started)
            ids.append(json.loads(result.content[0].text)["id"])
        for keyword in searches:
            out["search"].append(await timed(c.call_tool("recall", {"keywords": [keyword]})))
        for i in range(0, len(ids) - 1, 2):
            out["link"].append(await timed(c.call_tool("link", {"fromId": ids[i], "toId": ids[i + 1]})))
    return out


async def run_peer(items: list[dict], searches: list[str], memory_file: Path) -> dict[str, list[float]]:
    params = StdioServerParameters(command="node", args=[str(PEER_JS)], env={"MEMORY_FILE_PATH": str(memory_file)})
    out: dict[str, list[float]] = {"store": [], "search": [], "link": []}
    async with Client(params) as c:
        names = []
        for i, item in enumerate(items):
            name = f"note-{i}"
            names.append(name)
            entity = {"name": name, "entityType": item["topic"], "observations": [item["content"]]}
            out["store"].append(await timed(c.call_tool("create_entities", {"entities": [entity]})))
        for keyword in searches:
            out["search"].append(await timed(c.call_tool("search_nodes", {"query": keyword})))
        for i in range(0, len(names) - 1, 2):
            relation = {"from": names[i], "to": names[i + 1], "relationType": "related"}
            out["link"].append(await timed(c.call_tool("create_relations", {"relations": [relation]})))
    return out


def markdown(results: dict) -> str:
    lines = [
        f"Same workload, same run: {results['n']} stores, {results['searches']} keyword searches, "
        f"{results['n'] // 2} links, one client. Produced by `{results['command']}`"
        f" (`bench/results/{results['file']}`).",
        "",
        "| operation | Memento p50 / p95 ms | server-memory p50 / p95 ms | p50 ratio (Memento / peer) |",
        "|---|---|---|---|",
    ]
    for op, row in results["ops"].items():
        m, p = row["memento"], row["peer"]
        lines.append(f"| {op} | {m['p50_ms']} / {m['p95_ms']} | {p['p50_ms']} / {p['p95_ms']} | {row['p50_ratio']} |")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> dict:
    install_peer()
    items = fragments(args.n, seed=5)
    rng = random.Random(5)
    searches = [rng.choice(keyword_pool()) for _ in range(args.searches)]
    system = System(args)
    system.start()
    try:
        memento = await run_memento(system, items, searches)
    finally:
        system.stop()
    with tempfile.TemporaryDirectory() as tmp:
        peer = await run_peer(items, searches, Path(tmp) / "memory.jsonl")
    ops = {}
    for op in ("store", "search", "link"):
        m, p = percentiles(memento[op]), percentiles(peer[op])
        ops[op] = {"memento": m, "peer": p, "p50_ratio": round(m["p50_ms"] / p["p50_ms"], 2)}
    return {"n": args.n, "searches": args.searches, "ops": ops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--port", type=int, default=56434)
    parser.add_argument("--data-dir")
    parser.add_argument("--no-readme", action="store_true")
    args = parser.parse_args()
    args.url = args.key = None
    results = asyncio.run(main_async(args))
    results["command"] = "python -m bench.peer " + " ".join(sys.argv[1:])
    results["file"] = f"peer-{time.strftime('%Y%m%d-%H%M%S')}.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / results["file"]).write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    print(table)
    if not args.no_readme:
        replace_readme_block("peer", table)


if __name__ == "__main__":
    main()
