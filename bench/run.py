"""`make bench`: latency and throughput of each tool through the gateway (official MCP client) and directly at
memory-api, at several concurrencies, on N bulk-loaded fragments. Prints every figure beside SPEC.md's target
and the seed's, writes JSON to bench/results/, and refreshes the README table.

    python -m bench.run --n 10000 --concurrency 1,8 --ops 200
    python -m bench.run --url http://127.0.0.1:56332/mcp --key KEY   # an already running system (no bulk load)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from prometheus_client.parser import text_string_to_metric_families

from bench import floor, stages
from bench.corpus import TOPICS, fragments, keyword_pool, queries
from bench.load import load
from bench.report import percentiles, print_table, write_results
from memento_devtools.embedded import spawn
from memento_shared.internal_http import Answer, InternalClient
from memento_shared.principal import HEADER, SCOPES, Principal, encode_principal

ROOT = Path(__file__).resolve().parents[1]
WORKSPACE = "bench"


class System:
    """The system under test: started like `make run` in a fresh data dir, or an existing one."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.process: subprocess.Popen | None = None
        self.info: dict = {}
        self.secrets: dict = {}

    def start(self) -> None:
        if self.args.url:
            self.info = {"mcp_url": self.args.url}
            self.secrets = {"access_key": self.args.key}
            return
        data_dir = Path(self.args.data_dir or tempfile.mkdtemp(prefix="memento-bench-"))
        env = {**os.environ, "MEMENTO_DATA_DIR": str(data_dir), "PORT": str(self.args.port)}
        self.log = data_dir.parent / f"{data_dir.name}.launcher.log"
        # dies with the bench (SIGINT: the launcher's own clean shutdown), so an interrupted run leaves no system
        self.process = spawn(
            [sys.executable, "-m", "memento_devtools.launcher"],
            log_path=self.log,
            env=env,
            death_signal=signal.SIGINT,
            cwd=ROOT,
        )
        deadline = time.monotonic() + 300
        while not (data_dir / "run.json").exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"bench: the system did not start; see {self.log}")
            time.sleep(0.2)
        self.info = json.loads((data_dir / "run.json").read_text())
        self.secrets = json.loads((data_dir / "secrets.json").read_text())

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(120)

    def owner_url(self) -> str:
        parts = urlsplit(self.info["database_url"])
        return parts._replace(
            netloc=f"postgres:{self.secrets['postgres_owner_password']}@{parts.hostname}:{parts.port}"
        ).geturl()

    def service_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.info['ports'][name]}"

    def _per_component(self, measure) -> dict[str, float]:
        """Sum `measure(process)` over the system's processes, grouped by service (Postgres backends included)."""
        out: dict[str, float] = {}
        for name, value in self._per_process(measure).values():
            out[name] = out.get(name, 0) + value
        return out

    def _per_process(self, measure) -> dict[int, tuple[str, float]]:
        """`measure(process)` of each of the system's processes by pid, with the service it belongs to."""
        if self.process is None:
            return {}
        out: dict[int, tuple[str, float]] = {}
        for child in psutil.Process(self.process.pid).children(recursive=True):
            try:
                cmd = " ".join(child.cmdline())
                if "multiprocessing" in cmd:  # the embedder's document process (and its resource tracker)
                    cmd = " ".join(child.parent().cmdline())
                name = next(
                    (
                        s
                        for s in ("gateway", "memory_api", "embedder", "evaluator", "consolidator")
                        if f"memento_{s}" in cmd
                    ),
                    "gateway+memory_api" if "memento_devtools.cohost" in cmd else child.name(),
                )
                out[child.pid] = (name, measure(child))
            except psutil.Error:
                continue
        return out

    def cpu_by_process(self) -> dict[int, tuple[str, float]]:
        """CPU seconds (user + system) used so far by each process, with its service."""
        return self._per_process(lambda p: sum(p.cpu_times()[:2]))

    def memory(self) -> dict[str, float]:
        """Proportional set size per service, MiB: shared pages split among the processes mapping them. Every
        Postgres backend maps the shared buffers, so summing their resident sizes counted those pages once per
        backend (7.9 GB "RSS" for a server with 3 GB of shared buffers)."""

        def pss(p: psutil.Process) -> float:
            try:
                return p.memory_full_info().pss / 2**20
            except (AttributeError, psutil.AccessDenied):
                return p.memory_info().rss / 2**20

        return {k: round(v, 1) for k, v in sorted(self._per_component(pss).items())}

    def full_collections(self) -> dict[str, dict]:
        """Per service, the generation 2 collections timed so far (memento_gc_pause_seconds): a full collection
        holds every request in flight, so their count and time say what the p99 rows owe the collector."""
        out = {}
        for name in sorted(self.info.get("ports", {})):  # every service the launcher started settles its heap
            try:
                text = httpx.get(self.service_url(name) + "/metrics", timeout=10, trust_env=False).text
            except httpx.HTTPError:
                continue
            values = {
                s.name: s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
                if s.name.startswith("memento_gc_pause_seconds_") and s.labels.get("generation") == "2"
            }
            if values:
                count = values.get("memento_gc_pause_seconds_count", 0)
                total = values.get("memento_gc_pause_seconds_sum", 0)
                out[name] = {"count": int(count), "total_ms": round(1000 * total, 1)}
        return out

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) used so far per service; the caller's own process is reported as `bench`."""
        out = self._per_component(lambda p: sum(p.cpu_times()[:2]))
        out["bench"] = sum(psutil.Process().cpu_times()[:2])
        return out


def cpu_share(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
    """Cores used per service between two `cpu_seconds` snapshots (a process that ended in between is left out)."""
    return {k: round((after[k] - before.get(k, 0)) / seconds, 2) for k in sorted(after) if after[k] > before.get(k, 0)}


class Workload:
    """Arguments for each measured operation; every call is a realistic, valid request."""

    def __init__(self, ids: list[str], seed: int = 11, query_seed: int = 2, query_tag: str = "") -> None:
        self.ids = ids
        self.rng = random.Random(seed)
        self.keywords = keyword_pool()
        self.queries = iter(queries(100_000, seed=query_seed, tag=query_tag))
        # store_memory's texts: the loaded fragments' wording (their templates, other values), so its `similar` has
        # neighbours to rank
        self.facts = [f["content"].rsplit(" (#", 1)[0] for f in fragments(1000, seed=seed + 100)]
        self.counter = 0
        self.superseded = 0
        self.conflicts = 0  # calls answered CONFLICT in the current row
        # in every written text, so a run on a kept store writes new content: a repeat of an earlier run's text
        # would measure remember's duplicate path and amend's no-op instead of the writes
        self.run = secrets.token_hex(4)
        self.asked: dict[str, list[tuple[str, str]]] = {}  # op -> what its calls asked the model to read (bench.floor)

    def args(self, op: str) -> dict:
        arguments = self._args(op)
        if (text := floor.embedded(op, arguments)) is not None:
            self.asked.setdefault(op, []).append(text)
        return arguments

    def _args(self, op: str) -> dict:
        self.counter += 1
        n = self.counter
        if op == "remember":
            return {
                "content": f"bench note {self.run}-{n}: {self.rng.choice(self.keywords)} changed at step {n}",
                "topic": self.rng.choice(TOPICS),
                "type": "fact",
            }
        if op == "recall_keywords":
            return {"keywords": [self.rng.choice(self.keywords)]}
        if op == "recall_keywords_2":
            # two keywords: L1 answers those holding both, and L2 (any keyword) runs whenever they are fewer than 50
            return {"keywords": self.rng.sample(self.keywords, 2)}
        if op == "recall_text":
            return {"text": next(self.queries)}
        if op == "link":
            return {
                "fromId": self.ids[(2 * n) % len(self.ids)],
                "toId": self.ids[(2 * n + 1) % len(self.ids)],
                "relationType": "related",
            }
        if op == "amend":
            content = f"amended bench note {self.run}-{n} {self.rng.random():.6f}"
            return {"id": self.rng.choice(self.ids), "content": content}
        if op == "context":
            return {}
        if op == "store_memory":
            return {
                "content": f"{self.rng.choice(self.facts)} (stored {self.run}-{n})",
                "source": ("explicit", "extracted")[n % 2],
            }
        if op == "supersede_memory":
            # pairs counted from the end of the list (link's come from its start), each id in one pair only: no
            # memory is superseded twice and no chain closes a cycle
            self.superseded += 1
            k = 2 * self.superseded
            return {"old_memory_id": self.ids[1 - k], "new_memory_id": self.ids[-k]}
        if op == "search_memories":
            return {"query": next(self.queries)}
        if op == "list_recent_memories":
            return {}
        raise ValueError(op)


TOOL = {"recall_keywords": "recall", "recall_keywords_2": "recall", "recall_text": "recall"}
# `ping` is the path without a tool: an MCP ping through the gateway, GET /livez at memory-api. Every tool pays it
# before its own work, so the targets are read against it.
OPS = [
    "ping",
    "remember",
    "recall_keywords",
    "recall_keywords_2",
    "recall_text",
    "link",
    "amend",
    "context",
    # seed 002's dialect (the `simple` profile)
    "store_memory",
    "supersede_memory",
    "search_memories",
    "list_recent_memories",
]
# ops that write to loaded fragments: skipped when attached to a running system (no ids known)
ON_IDS = ("link", "amend", "supersede_memory")


async def through_gateway(
    system: System, workload: Workload, op: str, concurrency: int, ops: int, timings: list | None = None
) -> list[float]:
    """Each measured call's latency; with `timings`, also (latency, its answer's Server-Timing) there (bench.stages)."""
    headers = {"Authorization": f"Bearer {system.secrets['access_key']}", "X-Memento-Workspace": WORKSPACE}
    latencies: list[float] = []

    async def client_loop(count: int) -> None:
        # every dialect's tools in one session: seed 000's and seed 002's (`simple`)
        url = system.info["mcp_url"] + "?profile=all"
        seen = stages.LastTiming()
        http = seen.attach(create_mcp_http_client(headers=headers))
        transport = streamable_http_client(url, http_client=http)
        # the handshake (2025-11-25 sessions), as every earlier run measured: the ping floor exists only there
        async with Client(transport, mode="legacy") as client:
            for i in range(count + 3):  # the first three warm the session and connection, unmeasured
                seen.take()
                started = time.perf_counter()
                if op == "ping":
                    await client.send_ping()
                    result = None
                else:
                    result = await client.call_tool(TOOL.get(op, op), workload.args(op))
                if i >= 3:
                    latencies.append(time.perf_counter() - started)
                    if timings is not None:
                        timings.append((latencies[-1], seen.take()))
                if result is not None and result.is_error:
                    if "CONFLICT" not in result.content[0].text:
                        raise SystemExit(f"bench: {op} failed: {result.content[0].text}")
                    workload.conflicts += 1

    await asyncio.gather(*(client_loop(ops // concurrency) for _ in range(concurrency)))
    return latencies


def tool_error(answer: Answer) -> dict | None:
    """The error of a memory-api tool answer, if any. Tool errors come back as HTTP 200 with an `error` body, so the
    status alone would let a failing call pass for a fast one."""
    return json.loads(answer.content).get("error") if answer.status == 200 else {"code": f"HTTP {answer.status}"}


async def direct(
    system: System, workload: Workload, op: str, concurrency: int, ops: int, timings: list | None = None
) -> list[float]:
    """As through_gateway, at memory-api's tool route."""
    secret = system.secrets["internal_secret"]
    latencies: list[float] = []
    # the client the gateway itself uses for this hop, so the figures compare
    client = InternalClient(system.service_url("memory-api"), timeout_s=30)

    async def loop(count: int) -> None:
        for i in range(count + 3):
            principal = Principal(tenant_id="default", scopes=SCOPES, workspace=WORKSPACE)
            headers = {HEADER: encode_principal(principal, secret)}
            started = time.perf_counter()
            if op == "ping":
                answer = await client.get("/livez")
            else:
                arguments = {"arguments": workload.args(op)}
                answer = await client.post_json(f"/v1/tools/{TOOL.get(op, op)}", arguments, headers)
            if i >= 3:
                latencies.append(time.perf_counter() - started)
                if timings is not None:
                    timings.append((latencies[-1], answer.headers.get(stages.HEADER)))
            error = tool_error(answer)  # /livez's answer has no `error` either
            if error and error.get("code") != "CONFLICT":
                raise SystemExit(f"bench: {op} failed: {error}")
            if error:
                workload.conflicts += 1

    try:
        await asyncio.gather(*(loop(ops // concurrency) for _ in range(concurrency)))
    finally:
        await client.aclose()
    return latencies


async def query_embedding_time(system: System, count: int) -> list[float]:
    """The model's own query-embedding time, measured in the same run (SPEC: recall by text ≤ this + 20 ms)."""
    latencies = []
    texts = queries(count + 3, seed=99)
    client = InternalClient(system.service_url("embedder"), timeout_s=30)  # as memory-api calls it
    try:
        for i, text in enumerate(texts):
            started = time.perf_counter()
            answer = await client.post_json("/v1/embeddings", {"input": [text], "input_type": "query"})
            if answer.status != 200:
                raise SystemExit(f"bench: the embedder answered HTTP {answer.status}")
            if i >= 3:
                latencies.append(time.perf_counter() - started)
    finally:
        await client.aclose()
    return latencies


async def embedding_lag(system: System, run: str, timeout: float = 600) -> dict:
    """Commit → vector written, for every fragment `remember` stored during the run: both timestamps come from
    Postgres's clock (fragments.created_at, fragment_embeddings.created_at), so no clock skew enters."""
    import asyncpg

    conn = await asyncpg.connect(system.owner_url())
    try:
        deadline = time.monotonic() + timeout
        while True:
            missing = await conn.fetchval(
                "SELECT count(*) FROM agent_memory.fragments f WHERE f.workspace = $1 AND f.content LIKE $2"
                " AND NOT EXISTS (SELECT 1 FROM agent_memory.fragment_embeddings e WHERE e.fragment_id = f.id)",
                WORKSPACE,
                f"bench note {run}-%",
            )
            if missing == 0 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        row = await conn.fetchrow(
            "SELECT count(*) AS n, percentile_cont(0.5) WITHIN GROUP (ORDER BY lag) AS p50,"
            " percentile_cont(0.95) WITHIN GROUP (ORDER BY lag) AS p95, max(lag) AS max FROM ("
            "  SELECT extract(epoch FROM e.created_at - f.created_at)::float8 * 1000 AS lag"
            "  FROM agent_memory.fragments f"
            "  JOIN agent_memory.fragment_embeddings e ON e.fragment_id = f.id"
            "  WHERE f.workspace = $1 AND f.content LIKE $2) s",
            WORKSPACE,
            f"bench note {run}-%",
        )
        return {
            "embedded": row["n"],
            "not_embedded_after_wait": missing,
            "p50_ms": round(row["p50"] or 0, 1),
            "p95_ms": round(row["p95"] or 0, 1),
            "max_ms": round(row["max"] or 0, 1),
        }
    finally:
        await conn.close()


async def wait_for_l1(system: System) -> None:
    from redis.asyncio import from_url

    from memento_shared import l1

    redis = from_url(system.info["redis_url"])
    try:
        await redis.delete(l1.READY_KEY)  # the bulk load bypassed L1: have memory-api rebuild it from Postgres
        deadline = time.monotonic() + 600
        while not await redis.exists(l1.READY_KEY):
            if time.monotonic() > deadline:
                raise SystemExit("bench: L1 was not rebuilt in time")
            await asyncio.sleep(0.5)
    finally:
        await redis.aclose()


async def main_async(args: argparse.Namespace) -> dict:
    global WORKSPACE  # every step reads it; --workspace points them all at another one
    WORKSPACE = args.workspace
    system = System(args)
    system.start()
    try:
        results: dict = {
            "n": args.n,
            "ops_per_level": args.ops,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "command": "python -m bench.run " + " ".join(sys.argv[1:]),
            "load": {},
            "latency": {},
        }
        if args.url:
            ids = []
            print("bench: attached to a running system; loading through remember", flush=True)
        else:
            print(f"bench: bulk-loading {args.n} fragments ...", flush=True)
            loaded = await load(system.owner_url(), system.service_url("embedder"), args.n, WORKSPACE)
            ids = loaded.pop("ids")
            results["load"] = loaded
            await wait_for_l1(system)
        workload = Workload(ids or ["frag-0000000000000000"])
        if args.warmup and not args.url:
            # A store in service has its indexes in Postgres' cache; a freshly started one reads them from the OS
            # cache (or disk) during the first calls. Other questions than the measured ones, so no measured query
            # finds its embedding cached.
            warm = Workload(workload.ids, seed=12, query_seed=3, query_tag="w")
            for op in (
                "recall_keywords",
                "recall_keywords_2",
                "recall_text",
                "context",
                "search_memories",
                "list_recent_memories",
            ):
                await direct(system, warm, op, 1, args.warmup)
            print(f"bench: warmed up with {args.warmup} unmeasured calls of each read", flush=True)
        results["warmup_calls_per_read"] = 0 if args.url else args.warmup
        results["query_embedding"] = percentiles(await query_embedding_time(system, min(args.ops, 100)))
        paths = [("gateway", through_gateway)] + ([] if args.url else [("memory-api", direct)])
        for concurrency in args.concurrency:
            for path, fn in paths:
                for op in OPS:
                    if op in ON_IDS and not ids:
                        continue
                    workload.conflicts = 0
                    cpu_before = system.cpu_seconds()
                    started = time.perf_counter()
                    latencies = await fn(system, workload, op, concurrency, args.ops)
                    elapsed = time.perf_counter() - started
                    stats = percentiles(latencies) | {"throughput_per_s": round(len(latencies) / elapsed, 1)}
                    if not args.url:  # where the row's time went: cores each process used meanwhile
                        stats["cores"] = cpu_share(cpu_before, system.cpu_seconds(), elapsed)
                    if workload.conflicts:  # warm-up calls included
                        stats["conflicts"] = workload.conflicts
                    if (texts := workload.asked.pop(op, [])) and not args.url:
                        stats |= await floor.model_alone(system.service_url("embedder"), texts)
                    results["latency"][f"{op}|{path}|c{concurrency}"] = stats
                    print(
                        f"  {op:20} {path:10} c={concurrency}: p50 {stats['p50_ms']} ms, p95 {stats['p95_ms']} ms"
                        + (f", {stats['conflicts']} CONFLICT" if "conflicts" in stats else ""),
                        flush=True,
                    )
        results["memory_mb"] = system.memory()
        if not args.url:
            results["full_collections"] = system.full_collections()
            results["embedding_lag"] = await embedding_lag(system, workload.run)
        return results
    finally:
        system.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="fragments to bulk-load (10k default; 1000000 for 1M)")
    parser.add_argument("--ops", type=int, default=200, help="measured calls per operation and concurrency level")
    parser.add_argument(
        "--warmup", type=int, default=100, help="unmeasured recall and context calls first (other questions)"
    )
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8])
    parser.add_argument("--url", help="MCP URL of a running system (skips the bulk load)")
    parser.add_argument("--key", help="access key for --url")
    parser.add_argument("--data-dir", help="data dir for the started system (default: a fresh temporary one)")
    parser.add_argument("--port", type=int, default=56432, help="gateway port of the started system")
    parser.add_argument("--no-readme", action="store_true", help="do not refresh its table in docs/benchmarks.md")
    parser.add_argument(
        "--workspace",
        default=WORKSPACE,
        help="the workspace loaded and asked (another bench's kept data dir: bench.relevance_latency --bulk loads"
        " locomo-conv-26)",
    )
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    print_table(results)
    write_results(results, update_readme=not args.no_readme and not args.url)


if __name__ == "__main__":
    main()
