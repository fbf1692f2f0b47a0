"""Server CPU per acknowledged call, measured with a client that costs the server nothing (issue 50, item 1).

The official MCP client spends 3-4 ms of CPU a call on this machine, and it shares the two cores with the server, so
its figures mix the two. Here each client is a bare HTTP/1.1 connection speaking Streamable HTTP (one MCP session per
connection, the 2025-11-25 handshake, requests pre-encoded, answers checked for `isError`), and what is reported is
the CPU every server process spent (user + system, from /proc through psutil) over each operation's window, less
what the same processes spend idle over as long, divided by the calls acknowledged. The embedder's CPU is shown
apart: it is the model's time for the rows that embed. An operation's window runs until the workers have digested
what its calls wrote (every vector and evaluation written, every event relayed): that work is the calls' too.

Also: the idle system's CPU over a minute, and sustained `remember` throughput (as fast as `--connections` clients
go for `--seconds`), with its p95 and whether every fragment it wrote was embedded exactly once afterwards.

    python -m bench.server_cpu --n 10000
    python -m bench.server_cpu --compare 10k BEFORE.json AFTER.json 1M BEFORE.json AFTER.json   # docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg

from bench import dialects
from bench.load import load
from bench.report import percentiles, replace_readme_block, save
from bench.run import WORKSPACE, System, Workload, wait_for_l1

SERVER = (
    "gateway",
    "memory_api",
    "gateway+memory_api",
    "postgres",
    "valkey-server",
    "evaluator",
    "consolidator",
)  # the embedder apart
# after_turn before before_turn: its turns fill the sessions before_turn then reads (each measured alone)
OPS = ["remember", "recall_keywords", "recall_text", "store_memory", "search_memories", "after_turn", "before_turn"]
TOOL = {"recall_keywords": "recall", "recall_text": "recall", "before_turn": "memory_before_turn",
        "after_turn": "memory_after_turn"}  # fmt: skip
VERSION = "2025-11-25"


class Connection:
    """One keep-alive HTTP/1.1 connection with one MCP session on it."""

    def __init__(self, url: str, key: str) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname, parts.port, f"{parts.path}?profile=all"
        self.key = key
        self.session: str | None = None
        self.next_id = 0

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        initialize = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "server_cpu"}}
        status, headers, _ = await self.post(self.request("initialize", initialize))
        if status != 200 or "mcp-session-id" not in headers:
            raise SystemExit(f"bench: initialize answered {status}")
        self.session = headers["mcp-session-id"]
        status, _, _ = await self.post(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
        if status != 202:
            raise SystemExit(f"bench: notifications/initialized answered {status}")

    def request(self, method: str, params: dict) -> bytes:
        self.next_id += 1
        return json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode()

    async def post(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        head = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            f"Authorization: Bearer {self.key}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"X-Memento-Workspace: {WORKSPACE}",
            f"Content-Length: {len(body)}",
        ]
        if self.session:
            head += [f"Mcp-Session-Id: {self.session}", f"MCP-Protocol-Version: {VERSION}"]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        status_line = await self.reader.readline()
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        if not status_line:
            raise SystemExit("bench: the gateway closed the connection")
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while size := int((await self.reader.readline()).split(b";")[0], 16):
                body += await self.reader.readexactly(size + 2)
                body = body[:-2]
            await self.reader.readline()
        else:
            length = int(headers.get("content-length", 0))
            body = await self.reader.readexactly(length) if length else b""
        return int(status_line.split()[1]), headers, body

    async def call(self, tool: str, arguments: dict) -> None:
        status, _, body = await self.post(self.request("tools/call", {"name": tool, "arguments": arguments}))
        answer = json.loads(body) if body else {}
        if status != 200 or "error" in answer or answer.get("result", {}).get("isError"):
            raise SystemExit(f"bench: {tool} failed: {status} {body[:300]!r}")

    def close(self) -> None:
        self.writer.close()


class Turns:
    """Seed 004's turns as bench.dialects writes them, a session per connection: after_turn commits turn k, and
    before_turn, measured after it, asks with turn k's message in a session that holds the turns before."""

    def __init__(self, seed: str) -> None:
        self.project = dialects.Project(seed)
        self.seed = seed
        self.talks: dict[int, list[tuple[str, str]]] = {}

    def args(self, op: str, connection: int, turn: int) -> dict:
        talk = self.talks.setdefault(connection, dialects.conversation(self.seed, f"c{connection}", 400, self.project))
        said, reply = talk[turn % len(talk)]
        session = {"session_id": f"cpu-{self.seed}-{connection}", "turn_id": f"t{turn}"}
        if op == "before_turn":
            return session | {"current_input": [dialects.item("user", said)]}
        return session | {
            "input_items": [dialects.item("user", said)],
            "output_items": [dialects.item("assistant", reply)],
        }


async def run_op(system: System, op: str, workload: Workload, turns: Turns, clients: int, calls: int) -> dict:
    """`calls` calls of `op` over `clients` connections: latency, throughput, and server CPU per call."""
    connections = [Connection(system.info["mcp_url"], system.secrets["access_key"]) for _ in range(clients)]
    await asyncio.gather(*(c.open() for c in connections))
    latencies: list[float] = []

    async def loop(k: int, connection: Connection) -> None:
        for turn in range(calls // clients):
            arguments = turns.args(op, k, turn) if op.endswith("_turn") else workload.args(op)
            started = time.perf_counter()
            await connection.call(TOOL.get(op, op), arguments)
            latencies.append(time.perf_counter() - started)

    try:
        for connection in connections:  # an unmeasured call opens each session's path
            await connection.call("recall", {"keywords": ["deploy"]})
        since = await db_now(system)
        names = await postgres_names(system)
        before, started = system.cpu_by_process(), time.perf_counter()
        await asyncio.gather(*(loop(k, c) for k, c in enumerate(connections)))
        elapsed = time.perf_counter() - started
        # the work the calls left the workers (vectors, evaluations, relayed events) is theirs too
        await digested(system, since)
        window = time.perf_counter() - started
        after = system.cpu_by_process()
        names |= await postgres_names(system)
    finally:
        for connection in connections:
            connection.close()
    return percentiles(latencies) | {
        "cpu_s": {k: round(v, 3) for k, v in spent(before, after).items()},
        "postgres_ms": {
            k: round(v * 1000 / len(latencies), 2) for k, v in sorted(spent(before, after, names).items()) if v > 0
        },
        "throughput_per_s": round(len(latencies) / elapsed, 1),
        "seconds": round(window, 2),
        "digest_s": round(window - elapsed, 2),
        "calls": len(latencies),
    }


async def postgres_names(system: System) -> dict[int, str]:
    """Postgres processes by whom they work for: a backend by its client's application_name (`memento.<service>`,
    the pools and listeners name themselves), the server's own processes by their type."""
    conn = await asyncpg.connect(system.owner_url(), server_settings={"application_name": "bench"})
    try:
        rows = await conn.fetch("SELECT pid, application_name, backend_type FROM pg_stat_activity")
    finally:
        await conn.close()
    return {
        r["pid"]: r["application_name"].removeprefix("memento.") if r["application_name"] else "server's own"
        for r in rows
        if r["backend_type"] != "client backend" or r["application_name"]
    }


def spent(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], postgres: dict[int, str] | None = None
) -> dict[str, float]:
    """CPU seconds each service spent between two snapshots, process by process (a process that ended in between is
    left out, one that started counts whole). With `postgres`, only Postgres's processes, by whom they work for."""
    out: dict[str, float] = {}
    for pid, (name, seconds) in after.items():
        if postgres is not None:
            if name != "postgres":
                continue
            name = postgres.get(pid, "server's own")
        if name != "bench":
            out[name] = out.get(name, 0.0) + seconds - before.get(pid, (name, 0.0))[1]
    return out


async def db_now(system: System):
    conn = await asyncpg.connect(system.owner_url())
    try:
        return await conn.fetchval("SELECT now()")
    finally:
        await conn.close()


async def digested(system: System, since, timeout: float = 900) -> None:
    """Until what was written since `since` is embedded and evaluated and every event relayed."""
    conn = await asyncpg.connect(system.owner_url())
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            left = await conn.fetchval(
                "SELECT (SELECT count(*) FROM agent_memory.outbox WHERE published_at IS NULL)"
                " + (SELECT count(*) FROM agent_memory.fragments f WHERE f.created_at >= $1 AND (f.quality_score IS"
                "  NULL OR NOT EXISTS (SELECT 1 FROM agent_memory.fragment_embeddings e WHERE e.fragment_id = f.id)))",
                since,
            )
            if not left:
                return
            await asyncio.sleep(0.25)
        raise SystemExit(f"bench: the workers did not digest the calls within {timeout:.0f} s")
    finally:
        await conn.close()


async def idle_rate(system: System, seconds: float) -> dict[str, float]:
    """CPU seconds a second each process spends with no calls."""
    before = system.cpu_by_process()
    await asyncio.sleep(seconds)
    return {k: v / seconds for k, v in spent(before, system.cpu_by_process()).items()}


def per_call(stats: dict, idle: dict[str, float]) -> dict[str, float]:
    """CPU ms per acknowledged call per process, the idle rate over the window subtracted (never below zero)."""
    calls = stats["calls"]
    return {
        k: round(max(0.0, v - idle.get(k, 0.0) * stats["seconds"]) * 1000 / calls, 2) for k, v in stats["cpu_s"].items()
    }


async def embedded_once(system: System, run: str) -> dict:
    """The throughput phase's fragments: how many, how many have exactly one vector, and the most any has."""
    conn = await asyncpg.connect(system.owner_url())
    try:
        deadline = time.monotonic() + 900
        while True:
            row = await conn.fetchrow(
                "SELECT count(*) AS n, count(*) FILTER (WHERE v = 1) AS once, coalesce(max(v), 0) AS most FROM ("
                " SELECT (SELECT count(*) FROM agent_memory.fragment_embeddings e WHERE e.fragment_id = f.id) AS v"
                " FROM agent_memory.fragments f WHERE f.workspace = $1 AND f.content LIKE $2) s",
                WORKSPACE,
                f"bench note {run}-%",
            )
            if row["once"] == row["n"] or time.monotonic() > deadline:
                return dict(row)
            await asyncio.sleep(1)
    finally:
        await conn.close()


async def main_async(args: argparse.Namespace) -> dict:
    system = System(args)
    system.start()
    try:
        results: dict = {
            "n": args.n,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "command": "python -m bench.server_cpu " + " ".join(sys.argv[1:]),
            "clients": args.clients,
            "calls": args.calls,
            "ops": {},
        }
        print(f"bench: bulk-loading {args.n} fragments ...", flush=True)
        loaded = await load(system.owner_url(), system.service_url("embedder"), args.n, WORKSPACE)
        await wait_for_l1(system)
        workload, turns = Workload(loaded["ids"]), Turns(os.urandom(4).hex())
        await asyncio.sleep(args.settle)  # the load's own work done before the idle reading
        idle = await idle_rate(system, args.idle_seconds)
        results["idle_cores"] = {k: round(v, 4) for k, v in sorted(idle.items())}
        print(f"bench: idle, {sum(idle.values()) * 100:.2f} % of a core over {args.idle_seconds:g} s", flush=True)
        for op in args.ops:
            stats = await run_op(system, op, workload, turns, args.clients, args.calls)
            stats["cpu_ms"] = per_call(stats, idle)
            server = sum(v for k, v in stats["cpu_ms"].items() if k != "embedder")
            stats["server_cpu_ms"] = round(server, 2)
            results["ops"][op] = stats
            print(
                f"  {op:16} {stats['throughput_per_s']:>7}/s p50 {stats['p50_ms']} p95 {stats['p95_ms']} ms, "
                f"server CPU {server:.2f} ms a call (+ embedder {stats['cpu_ms'].get('embedder', 0)})",
                flush=True,
            )
        if args.seconds:
            results["throughput"] = await sustained(system, Workload(loaded["ids"]), args, idle)
        return results
    finally:
        system.stop()


async def sustained(system: System, workload: Workload, args: argparse.Namespace, idle: dict[str, float]) -> dict:
    """`remember` as fast as `args.connections` clients go for `args.seconds`; then every fragment embedded once?"""
    connections = [Connection(system.info["mcp_url"], system.secrets["access_key"]) for _ in range(args.connections)]
    await asyncio.gather(*(c.open() for c in connections))
    latencies: list[float] = []
    stop = time.perf_counter() + args.seconds

    async def loop(connection: Connection) -> None:
        while time.perf_counter() < stop:
            arguments = workload.args("remember")
            started = time.perf_counter()
            await connection.call("remember", arguments)
            latencies.append(time.perf_counter() - started)

    before, started = system.cpu_by_process(), time.perf_counter()
    try:
        await asyncio.gather(*(loop(c) for c in connections))
    finally:
        for connection in connections:
            connection.close()
    elapsed = time.perf_counter() - started
    stats = percentiles(latencies) | {"throughput_per_s": round(len(latencies) / elapsed, 1), "seconds": elapsed}
    stats["cpu_s"] = spent(before, system.cpu_by_process())
    stats["calls"] = len(latencies)
    stats["cpu_ms"] = per_call(stats, idle)
    stats["embedded"] = await embedded_once(system, workload.run)
    print(
        f"bench: sustained remember {stats['throughput_per_s']}/s over {args.seconds:g} s with {args.connections} "
        f"clients, p95 {stats['p95_ms']} ms; embedded once: {stats['embedded']}",
        flush=True,
    )
    return stats


def markdown(results: dict) -> str:
    idle = sum(results["idle_cores"].values())
    names = [k for k in (*SERVER, "embedder") if any(k in s["cpu_ms"] for s in results["ops"].values())]
    lines = [
        f"Latest: {results['n']:,} fragments, {results['calls']} calls an operation over {results['clients']} bare "
        f"HTTP connections (one MCP session each), {results['machine']}, every service on the same machine. Produced "
        f"by `{results['command']}` (`bench/results/{results['file']}`). Server CPU per acknowledged call: user + "
        "system of every server process over the window, less its idle rate, per call; the embedder (the model) apart. "
        f"Idle, every service of `make run` used {idle * 100:.2f} % of a core.",
        "",
        "| operation | calls/s | p50 ms | p95 ms | server CPU ms | " + " | ".join(names) + " |",
        "|---|---|---|---|---|" + "---|" * len(names),
    ]
    for op, s in results["ops"].items():
        cells = " | ".join(str(s["cpu_ms"].get(k, 0)) for k in names)
        lines.append(
            f"| {op} | {s['throughput_per_s']} | {s['p50_ms']} | {s['p95_ms']} | **{s['server_cpu_ms']}** | {cells} |"
        )
    split = [
        f"{op}: " + ", ".join(f"{k} {v}" for k, v in sorted(s["postgres_ms"].items(), key=lambda kv: -kv[1]))
        for op, s in results["ops"].items()
        if s.get("postgres_ms")
    ]
    if split:
        lines += [
            "",
            "Postgres's CPU ms per call by whom it worked for (its backends by their client): "
            + "; ".join(split)
            + ".",
        ]
    if "throughput" in results:
        t = results["throughput"]
        lines += [
            "",
            f"Sustained `remember` as fast as the clients go: {t['throughput_per_s']} acknowledged a second, p95 "
            f"{t['p95_ms']} ms; afterwards {t['embedded']['once']} of {t['embedded']['n']} embedded exactly once "
            f"(at most {t['embedded']['most']} vectors for one).",
        ]
    return "\n".join(lines)


def compared(runs: list[tuple[str, dict, dict]]) -> str:
    """Before and after, per store size: server CPU per call with each process's share, throughput and p95."""
    lines = []
    for size, before, after in runs:
        names = [
            k
            for k in (*SERVER, "embedder")
            if any(k in s["cpu_ms"] for r in (before, after) for s in r["ops"].values())
        ]
        lines += [
            f"{size} fragments (`{before['file']}` against `{after['file']}`): server CPU ms per acknowledged call, "
            "each process's share, the embedder (the model) apart; calls/s and p95 ms as the bare clients saw them.",
            "",
            "| operation | code | calls/s | p95 ms | server CPU ms | " + " | ".join(names) + " |",
            "|---|---|---|---|---|" + "---|" * len(names),
        ]
        for op in after["ops"]:
            for code, run in (("before", before), ("after", after)):
                s = run["ops"].get(op)
                if s is not None:
                    cells = " | ".join(str(s["cpu_ms"].get(k, 0)) for k in names)
                    head = f"| {op} | {code} | {s['throughput_per_s']} | {s['p95_ms']} | **{s['server_cpu_ms']}** |"
                    lines.append(f"{head} {cells} |")
        split = [
            f"{op}: "
            + ", ".join(f"{k} {v}" for k, v in sorted(s["postgres_ms"].items(), key=lambda kv: -kv[1]) if v >= 0.1)
            for op, s in after["ops"].items()
            if s.get("postgres_ms")
        ]
        lines += ["", "Postgres's share after, by whom its backends worked for: " + "; ".join(split) + "."]
        for code, run in (("before", before), ("after", after)):
            t = run.get("throughput")
            if t:
                lines.append(
                    f"Sustained `remember`, {code}: {t['throughput_per_s']}/s, p95 {t['p95_ms']} ms, "
                    f"{t['embedded']['once']} of {t['embedded']['n']} embedded exactly once."
                )
        idle = [
            f"{code} {sum(r['idle_cores'].values()) * 100:.2f} %" for code, r in (("before", before), ("after", after))
        ]
        lines += [f"Idle, every service of `make run`, % of a core: {', '.join(idle)}.", ""]
    return "\n".join(lines).rstrip()


def compare(files: list[str]) -> None:
    """--compare SIZE BEFORE.json AFTER.json ...: one file holding every pair, and the before/after block."""
    if len(files) % 3:
        raise SystemExit("bench: --compare takes SIZE BEFORE.json AFTER.json, one triple per store size")
    runs = [
        (files[i], json.loads(Path(files[i + 1]).read_text()), json.loads(Path(files[i + 2]).read_text()))
        for i in range(0, len(files), 3)
    ]
    save({"compared": [{"size": size, "before": b, "after": a} for size, b, a in runs]}, "server-cpu-compared")
    text = compared(runs)
    if not replace_readme_block("server-cpu", text):
        print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", nargs="+", metavar="F", help="SIZE BEFORE.json AFTER.json ...: the block only")
    parser.add_argument("--n", type=int, default=10_000, help="fragments to bulk-load")
    parser.add_argument("--calls", type=int, default=400, help="measured calls per operation")
    parser.add_argument("--clients", type=int, default=4, help="connections per operation")
    parser.add_argument("--ops", type=lambda s: s.split(","), default=OPS)
    parser.add_argument("--idle-seconds", type=float, default=60.0, help="the idle reading's length")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds to wait after the load before it")
    parser.add_argument("--seconds", type=float, default=30.0, help="sustained remember phase (0: none)")
    parser.add_argument("--connections", type=int, default=16, help="clients of the sustained phase")
    parser.add_argument("--data-dir", help="data dir for the started system (default: a fresh temporary one)")
    parser.add_argument("--port", type=int, default=56462, help="gateway port of the started system")
    parser.set_defaults(url=None, key=None)
    args = parser.parse_args()
    if args.compare:
        return compare(args.compare)
    results = asyncio.run(main_async(args))
    save(results, f"server-cpu-{args.n}")
    print(markdown(results))


if __name__ == "__main__":
    main()
