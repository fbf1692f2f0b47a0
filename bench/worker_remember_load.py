"""Sustained `remember` load: acknowledged throughput and latency, and embedding lag — from the write's commit to
its vector being stored (so recall by meaning finds it) — p50/p95, next to the embedding model's own rate measured
in the same run, on the whole system started like `make run`.

    python -m bench.worker_remember_load                      # 60 s, as fast as 16 MCP clients go
    python -m bench.worker_remember_load --rate 15            # a steady offered load of 15 writes/s
    python -m bench.worker_remember_load --path memory-api    # skip the gateway (memory-api's internal API)

Lag is read from Postgres: fragment_embeddings.created_at − fragments.created_at (both the writing transaction's
start, so commit-to-commit within a few milliseconds). When the offered load is above what the model can embed,
the backlog grows for the whole run and the lag figures say how far behind it ended, not a steady state.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time

import asyncpg
import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bench.corpus import queries
from bench.report import RESULTS, ROOT, percentiles
from bench.run import System, cpu_share, tool_error
from memento_shared.internal_http import InternalClient
from memento_shared.principal import HEADER, SCOPES, Principal, encode_principal

SPEC = {"remember_p95_ms": 15.0, "throughput_per_s": 500.0, "embedding_share_of_model": 0.8}


async def model_rate(system: System, seconds: float) -> float:
    """Documents per second through the embedder's own /v1/embeddings, batches of 32, the system otherwise idle."""
    texts = queries(4000, seed=7)
    done, started = 0, time.perf_counter()
    async with httpx.AsyncClient(base_url=system.service_url("embedder"), timeout=120) as client:
        while time.perf_counter() - started < seconds:
            batch = texts[done % 3968 : done % 3968 + 32]
            response = await client.post("/v1/embeddings", json={"input": batch, "input_type": "document"})
            response.raise_for_status()
            done += len(batch)
    return done / (time.perf_counter() - started)


class Pacer:
    """A shared start schedule for --rate: each write takes the next slot."""

    def __init__(self, rate: float | None) -> None:
        self.interval = 1.0 / rate if rate else 0.0
        self.next = time.monotonic()

    async def wait(self) -> None:
        if not self.interval:
            return
        slot, self.next = self.next, max(self.next, time.monotonic()) + self.interval
        if (delay := slot - time.monotonic()) > 0:
            await asyncio.sleep(delay)  # pacing the offered load


async def through_gateway(system, workspace, seconds, clients, pacer, counter) -> list[float]:
    headers = {"Authorization": f"Bearer {system.secrets['access_key']}", "X-Memento-Workspace": workspace}
    latencies: list[float] = []
    deadline = time.monotonic() + seconds

    async def loop() -> None:
        async with Client(
            streamable_http_client(system.info["mcp_url"], http_client=create_mcp_http_client(headers=headers))
        ) as client:
            while time.monotonic() < deadline:
                await pacer.wait()
                started = time.perf_counter()
                result = await client.call_tool("remember", note(next(counter)))
                latencies.append(time.perf_counter() - started)
                if result.is_error:
                    raise SystemExit(f"bench: remember failed: {result.content[0].text}")

    await asyncio.gather(*(loop() for _ in range(clients)))
    return latencies


async def direct(system, workspace, seconds, clients, pacer, counter) -> list[float]:
    principal = Principal(tenant_id="default", scopes=SCOPES, workspace=workspace)
    headers = {HEADER: encode_principal(principal, system.secrets["internal_secret"])}
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    client = InternalClient(system.service_url("memory-api"), timeout_s=30)  # the gateway's own client for this hop

    async def loop() -> None:
        while time.monotonic() < deadline:
            await pacer.wait()
            started = time.perf_counter()
            answer = await client.post_json("/v1/tools/remember", {"arguments": note(next(counter))}, headers)
            latencies.append(time.perf_counter() - started)
            error = tool_error(answer)
            if error:
                raise SystemExit(f"bench: remember failed: {error}")

    try:
        await asyncio.gather(*(loop() for _ in range(clients)))
    finally:
        await client.aclose()
    return latencies


def note(n: int) -> dict:
    return {"content": f"load note {n}: the job on node-{n % 97} finished step {n}", "topic": "load", "type": "fact"}


async def lag(owner_url: str, workspace: str, drain_s: float) -> dict:
    conn = await asyncpg.connect(owner_url)
    try:
        total = await conn.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE workspace = $1", workspace)
        deadline = time.monotonic() + drain_s
        while True:
            embedded = await conn.fetchval(
                "SELECT count(*) FROM agent_memory.fragment_embeddings WHERE workspace = $1", workspace
            )
            if embedded >= total or time.monotonic() > deadline:
                break
            await asyncio.sleep(1.0)  # polling the backlog's drain
        rows = await conn.fetch(
            "SELECT extract(epoch FROM e.created_at - f.created_at) AS lag, f.created_at AS written,"
            " e.created_at AS embedded FROM agent_memory.fragments f JOIN agent_memory.fragment_embeddings e"
            " ON e.fragment_id = f.id WHERE f.workspace = $1",
            workspace,
        )
    finally:
        await conn.close()
    lags = [float(r["lag"]) for r in rows]
    first_write = min(r["written"] for r in rows) if rows else None
    last_write = max(r["written"] for r in rows) if rows else None
    window = (last_write - first_write).total_seconds() if rows else 0
    during = sum(1 for r in rows if r["embedded"] <= last_write)
    return {
        "written": total,
        "embedded": len(rows),
        "embedded_during_load_per_s": round(during / window, 1) if window else 0.0,
        "lag_s": {k.replace("_ms", "_s"): round(v / 1000, 2) for k, v in percentiles(lags).items() if k != "count"},
        "drained": len(rows) >= total,
    }


async def main_async(args: argparse.Namespace) -> dict:
    system = System(args)
    system.start()
    workspace = f"load-{int(time.time())}"
    try:
        print(f"bench: measuring the embedding model's own rate for {args.model_seconds:g} s ...", flush=True)
        rate = await model_rate(system, args.model_seconds)
        print(f"bench: {rate:.1f} documents/s; now {args.seconds:g} s of remember ...", flush=True)
        counter = iter(range(10**9))
        run = through_gateway if args.path == "gateway" else direct
        cpu_before, started = system.cpu_seconds(), time.perf_counter()
        latencies = await run(system, workspace, args.seconds, args.clients, Pacer(args.rate), counter)
        elapsed = time.perf_counter() - started
        cpu_after = system.cpu_seconds()
        cores = cpu_share(cpu_before, cpu_after, elapsed)
        # CPU per acknowledged write, every process (the MCP clients are this one, `bench`): what two cores divide by.
        # From the CPU seconds themselves (over 1 s): `cores` is rounded to two places.
        writes = max(1, len(latencies))
        cpu_ms = {k: round(v * 1000 / writes, 2) for k, v in cpu_share(cpu_before, cpu_after, 1).items()}
        print(f"bench: {len(latencies)} writes acknowledged; waiting up to {args.drain:g} s for embeddings ...")
        embedding = await lag(system.owner_url(), workspace, args.drain)
        return {
            "command": "python -m bench.worker_remember_load " + " ".join(sys.argv[1:]),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "path": args.path,
            "clients": args.clients,
            "offered_rate": args.rate,
            "seconds": round(elapsed, 1),
            "model_documents_per_s": round(rate, 1),
            "remember": percentiles(latencies) | {"throughput_per_s": round(len(latencies) / elapsed, 1)},
            "embedding": embedding,
            "cores_during_load": cores,
            "cpu_ms_per_remember": cpu_ms,
            "memory_mb": system.memory(),
        }
    finally:
        system.stop()


def report(r: dict) -> None:
    rem, emb = r["remember"], r["embedding"]
    share = emb["embedded_during_load_per_s"] / r["model_documents_per_s"] if r["model_documents_per_s"] else 0
    print(f"\nSustained remember, {r['seconds']} s, {r['clients']} clients via {r['path']}, {r['machine']}")
    print(f"{'figure':38} {'measured':>12}   SPEC target")
    print(f"{'remember acknowledged /s':38} {rem['throughput_per_s']:>12}   >= {SPEC['throughput_per_s']:g}/s")
    latency = f"{rem['p50_ms']} / {rem['p95_ms']}"
    print(f"{'remember p50 / p95 ms':38} {latency:>12}   p95 <= {SPEC['remember_p95_ms']:g} ms")
    print(f"{'embedding model alone, documents/s':38} {r['model_documents_per_s']:>12}   (measured in this run)")
    print(
        f"{'embedded during the load /s':38} {emb['embedded_during_load_per_s']:>12}"
        f"   >= {SPEC['embedding_share_of_model']:.0%} of the model ({share:.0%})"
    )
    lag = emb["lag_s"]
    print(f"{'embedding lag p50 / p95 s':38} {lag.get('p50_s')} / {lag.get('p95_s')}   (no SPEC figure)")
    cores = ", ".join(f"{k} {v}" for k, v in sorted(r.get("cores_during_load", {}).items(), key=lambda kv: -kv[1]))
    print(f"{'cores used during the load':38} {cores}")
    if cpu := r.get("cpu_ms_per_remember"):
        total, cpus, target = sum(cpu.values()), os.cpu_count() or 1, SPEC["throughput_per_s"]
        budget = f"{target:g}/s on {cpus} cores needs <= {cpus * 1000 / target:g}"
        print(f"{'CPU per acknowledged remember, ms':38} {total:>12.2f}   {budget} (clients {cpu.get('bench', 0):g})")
        print(f"{'ceiling at that cost on these cores /s':38} {cpus * 1000 / total:>12.1f}")
    print(f"{'embedded / written':38} {emb['embedded']} / {emb['written']}{'' if emb['drained'] else ' (not drained)'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rate", type=float, help="offered writes per second (default: as fast as clients go)")
    parser.add_argument("--path", choices=("gateway", "memory-api"), default="gateway")
    parser.add_argument("--model-seconds", type=float, default=10)
    parser.add_argument("--drain", type=float, default=900, help="seconds to wait for the embedding backlog")
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir")
    parser.add_argument("--port", type=int, default=56452)
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    report(results)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"remember-load-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nbench: results written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
