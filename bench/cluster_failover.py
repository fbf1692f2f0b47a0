"""The Valkey Cluster failover run, longer than the test's: `python -m bench.cluster_failover --seconds 90`.

An embedded PostgreSQL, a three-primary Valkey Cluster (one replica each) for the state role and a Valkey for the
queue role, memory-api and the gateway in this process on loopback sockets with REDIS_WAIT_REPLICAS=1, and `--clients`
MCP clients (the official SDK) writing in turn a durable `remember` and a session-scope one. Every `--seconds /
(failovers + 1)` seconds the primary holding the tenant's slot is killed (SIGKILL), its replica promoted, and the dead
node restarted as its replica. At the end: writes acknowledged and refused, acknowledged writes missing (L1 once it is
ready again, working memory), how long each failover left the slot without a primary, how long clients saw refusals,
and latency outside and around failovers. Written to bench/results/cluster-failover-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from redis.crc import key_slot

from bench.report import percentiles, save
from memento_devtools.embedded import free_port, start_postgres, start_valkey, start_valkey_cluster
from memento_gateway.app import create_app as create_gateway
from memento_gateway.settings import GatewaySettings
from memento_memory_api.app import create_app as create_memory_api
from memento_memory_api.settings import MemoryApiSettings
from memento_shared import keys, l1, redis_client, working_memory
from memento_shared.db.migrate import migrate
from memento_shared.http import make_server
from memento_shared.settings import DatabaseSettings

TENANT = "default"  # the access key's (the operator's) tenant
ACCESS_KEY = "bench-failover-" + "k" * 16


async def serve(app) -> tuple[object, asyncio.Task, str]:
    port = free_port()
    server = make_server(app, "127.0.0.1", port)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            raise SystemExit("bench: a service did not start")
        await asyncio.sleep(0.01)
    return server, task, f"http://127.0.0.1:{port}"


async def stop(server, task) -> None:
    server.should_exit = True
    try:
        async with asyncio.timeout(10):
            await task
    except TimeoutError:
        server.force_exit = True
        await task


class Run:
    def __init__(self) -> None:
        self.acked: list[tuple[str, str]] = []
        self.acked_session: list[str] = []
        self.refused = 0
        self.calls: list[tuple[float, float, bool]] = []  # (start, seconds, acknowledged)
        self.failovers: list[dict] = []
        self.stopping = False


async def writer(run: Run, url: str, name: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {ACCESS_KEY}"})
    async with Client(streamable_http_client(url + "/mcp", http_client=http)) as client:
        i = 0
        while not run.stopping:
            keyword = f"{name}x{i}"
            durable = {"content": f"{name} fact {i}", "topic": "failover", "type": "fact", "keywords": [keyword]}
            note = {"content": f"{name} note {i}", "topic": "failover", "type": "fact", "scope": "session"}
            for arguments in (durable, note):
                started = time.monotonic()
                try:
                    result = await client.call_tool("remember", arguments)
                    ok = not result.is_error
                except Exception:
                    ok = False
                run.calls.append((started, time.monotonic() - started, ok))
                if not ok:
                    run.refused += 1
                    continue
                stored = json.loads(result.content[0].text)
                if "scope" in arguments:
                    run.acked_session.append(stored["id"])
                else:
                    run.acked.append((stored["id"], keyword))
            i += 1
            await asyncio.sleep(0.01)


def fail_over(cluster) -> dict:
    doomed = cluster.primary_for_slot(key_slot(keys.tag(TENANT).encode()))
    killed = time.monotonic()
    cluster.kill_and_promote(doomed)
    promoted = time.monotonic()
    cluster.restart(doomed)
    return {
        "killed": killed,
        "promoted_s": round(promoted - killed, 3),
        "replica_back_s": round(time.monotonic() - killed, 3),
    }


async def verify(run: Run, cluster) -> dict:
    state = redis_client.client(cluster.url, timeout=10)
    try:
        deadline = time.monotonic() + 120
        while not await state.exists(l1.READY_KEY) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        missing_l1 = [
            fid
            for fid, keyword in run.acked
            if await state.zscore(l1.key(TENANT, "default", "default", keyword), fid) is None
        ]
        lists = [k.decode() async for k in state.scan_iter(match="memento:wm:*", count=1000)]
        entries = {e["id"] for k in lists for e in await working_memory.entries(state, k)}
        missing_session = [e for e in run.acked_session if e not in entries]
        return {"l1_ready": bool(await state.exists(l1.READY_KEY)), "missing_l1": len(missing_l1),
                "missing_working_memory": len(missing_session)}  # fmt: skip
    finally:
        await state.aclose()


def refusal_windows(run: Run) -> list[float]:
    """For each failover, seconds from the first refused call after the kill to the last one before calls succeed."""
    windows = []
    for failover in run.failovers:
        after = sorted(c for c in run.calls if c[0] >= failover["killed"] - 1)
        refused = [c for c in after if not c[2]]
        if refused:
            first = refused[0][0]
            back = next((c[0] for c in after if c[2] and c[0] > first), first)
            windows.append(round(back - first, 3))
        else:
            windows.append(0.0)
    return windows


async def main_async(args: argparse.Namespace) -> dict:
    root = Path(tempfile.mkdtemp(prefix="memento-failover-"))
    password = secrets.token_urlsafe(12)
    pg = start_postgres(root / "pg", owner_password=password)
    cluster = start_valkey_cluster(root / "cluster", password=password)
    queue = start_valkey(root / "queue", password=password)
    run = Run()
    try:
        pg.create_database("memento")
        env = {
            "DATABASE_URL": pg.url("memento_app", password, "memento"),
            "MIGRATION_DATABASE_URL": pg.url(database="memento"),
            "REDIS_URL": cluster.url,
            "REDIS_QUEUE_URL": queue.url,
            "REDIS_WAIT_REPLICAS": "1",
            "MEMENTO_INTERNAL_SECRET": secrets.token_hex(16),
            "MEMENTO_ACCESS_KEY": ACCESS_KEY,
            "MEMENTO_DATA_DIR": str(root / "gateway"),
        }
        await migrate(DatabaseSettings(**env))
        api = await serve(create_memory_api(MemoryApiSettings(**env)))
        gateway = await serve(create_gateway(GatewaySettings(**env, MEMORY_API_URL=api[2])))
        try:
            writers = [asyncio.create_task(writer(run, gateway[2], f"w{n}")) for n in range(args.clients)]
            period = args.seconds / (args.failovers + 1)
            for _ in range(args.failovers):
                await asyncio.sleep(period)
                run.failovers.append(await asyncio.to_thread(fail_over, cluster))
            await asyncio.sleep(period)
            run.stopping = True
            await asyncio.gather(*writers)
            checked = await verify(run, cluster)
        finally:
            await stop(*gateway[:2])
            await stop(*api[:2])
    finally:
        cluster.stop()
        queue.stop()
        pg.stop()
    near = [c for c in run.calls if any(-1 <= c[0] - f["killed"] <= 10 for f in run.failovers)]
    calm = [c for c in run.calls if c not in near and c[2]]
    return {
        "command": "python -m bench.cluster_failover " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "seconds": args.seconds,
        "clients": args.clients,
        "writes_acknowledged": {"durable": len(run.acked), "working_memory": len(run.acked_session)},
        "writes_refused": run.refused,
        **checked,
        "failovers": [{k: v for k, v in f.items() if k != "killed"} for f in run.failovers],
        "refusal_window_s": refusal_windows(run),
        "latency_calm": percentiles([c[1] for c in calm]),
        "latency_within_10s_of_a_failover": percentiles([c[1] for c in near if c[2]]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=90)
    parser.add_argument("--failovers", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    print(json.dumps(results, indent=2))
    save(results, "cluster-failover")
    if results["missing_l1"] or results["missing_working_memory"]:
        raise SystemExit("bench: acknowledged writes were lost")


if __name__ == "__main__":
    main()
