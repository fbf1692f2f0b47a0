"""Seeds 003 and 004 on N bulk-loaded fragments, on the whole system started as bench.run starts it, in one run:

- seed 003 (`protocol`): memento_recall {query} and memento_context {message} through the gateway (official MCP
  client, `?profile=all`) at each concurrency beside the path's `ping`, and memento_context directly at memory-api
  (its target is read there), after a little working memory (5 items, 3 skip entries) is added through the tools;
- seed 004 (`lifecycle`): a turn loop through the gateway (`?profile=lifecycle`), 50 turns a session, each turn
  memory_before_turn with a user message of 200-400 words then memory_after_turn with that answer's input_items and
  an assistant message of 200-400 words; one session, then 8 at once (distinct session ids). Messages come from a
  seeded generator over the corpus's names, with a few facts stated per message ("The orders-api service runs on
  port 4312."), restated across turns and sessions as a project's facts are;
- where each measured call's time went, from the Server-Timing header of its answer (bench.stages): memory-api's
  stages (embedding, fresh rows, pool, statements), its own work, and the hop to the client;
- the consolidator's decay job (seed 003's relevance rescoring and expiry purge) in-process on the system's
  database, twice: the first run rewrites every row whose relevance moved, the second only what moved since.

Figures are printed beside SPEC's targets and the seeds', written to bench/results/dialects-<n>-<time>.json, and
the README's `dialects-<n>` block is refreshed for n = 10000 and 1000000.

    python -m bench.dialects --n 10000
    python -m bench.dialects --n 1000000 --data-dir DIR    # a store bench.run loaded there is reused
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bench import floor, stages
from bench.corpus import ERRORS, PEOPLE, SERVICES, TECH
from bench.load import load
from bench.report import (
    MODEL_COLUMNS,
    RESULTS,
    ROOT,
    TARGETS,
    cores_text,
    model_p95,
    percentiles,
    replace_readme_block,
    resolve_target,
    share,
)
from bench.run import (
    WORKSPACE,
    System,
    Workload,
    cpu_share,
    direct,
    query_embedding_time,
    through_gateway,
    wait_for_l1,
)
from bench.worker_consolidation import row_changes
from memento_consolidator.settings import ConsolidatorSettings
from memento_devtools.launcher import cohosting
from memento_memory_api.recall.question import question
from memento_shared.worker import close_runtime, open_runtime

README_SIZES = (10_000, 1_000_000)
WARM_TURNS = 3  # a session's first turns are unmeasured, as bench.run's first three calls of each client
DECAY_SPEC_S, DECAY_SPEC_N = 60.0, 1_000_000
SEED_004 = "seed 004 §13.3"
# what memory-api logs when a search goes on without its query vector (the embedder did not answer in time)
NO_VECTOR = b'"recall.embedding_unavailable"'
# op -> (SPEC p95 target: ms, a rule of bench.report, or {path: target}; the seed's p95 target in ms; the seed column)
DIALECT_TARGETS: dict[str, tuple] = {
    "ping": (None, None, TARGETS["ping"][1]),
    "memento_recall": ("embed+20", None, "—"),
    "memento_context": ({"memory-api": "model+20"}, None, "—"),  # its question's model p95 + 20 ms (issue 46)
    "memory_before_turn": (50.0, 300.0, f"< 300 ms ({SEED_004})"),
    "memory_after_turn": (80.0, 500.0, f"< 500 ms ({SEED_004})"),
}
PROTOCOL_OPS = {"gateway": ["ping", "memento_recall", "memento_context"], "memory-api": ["ping", "memento_context"]}

# the working memory memento_context reads: active and paused items, and skip entries some questions touch
ITEMS = [
    {
        "category": "active_work",
        "title": "Move orders-api to Postgres 17",
        "content": "Dual-write for a week, then switch reads; the old cluster stays read-only for a month.",
        "priority": 8,
        "tags": ["orders-api", "postgres"],
        "next_action": "Check replication lag on the new cluster",
    },
    {
        "category": "active_work",
        "title": "Fix ECONNRESET retries in billing-worker",
        "priority": 6,
        "tags": ["billing-worker"],
    },
    {
        "category": "standing_decision",
        "title": "Structured JSON logs in every service; never log request bodies",
        "priority": 5,
    },
    {
        "category": "waiting_for",
        "title": "Jae to approve the Vault credential rotation for auth-gateway",
        "status": "paused",
        "priority": 3,
    },
    {
        "category": "session_note",
        "title": "A full search-indexer reindex takes 40 minutes; run it off-peak",
        "priority": 2,
        "tags": ["search-indexer"],
    },
]
SKIPS = [
    {"item": "restarting the ledger service", "reason": "month-end close runs until Friday"},
    {"item": "Kafka upgrade", "reason": "waiting for the next patch release"},
    {"item": "media-resizer autoscaling changes", "reason": "a load test is scheduled for next week"},
]

# seed 004's turns: sentence templates over the corpus's names
FACTS = [
    "The {service} service runs on port {port}.",
    "{service} uses {tech} {version} in production.",
    "{owner} owns {service} and reviews its pull requests.",
    "The {table} table in {service} holds about {rows} thousand rows.",
    "{service} depends on {service2} for {tech} access.",
]
SAID = [
    "I deployed {service} this morning and the {tech} dashboards looked normal for the first hour.",
    "After that the error rate climbed and the logs started showing {error} every few minutes.",
    "The last change to {service} touched the {tech} client and the retry settings.",
    "{person} mentioned that {service2} had a similar problem last month after a config change.",
    "I would rather not roll back yet because the release also fixes the {table} export.",
    "The alert fired at {hh}:{mm} and paged {person}, who silenced it before looking at the graphs.",
    "Our staging environment does not reproduce it, probably because it has far less traffic.",
    "I already tried raising the timeout to {n} seconds and it made no visible difference.",
    "The customer report says checkout hangs for a while and then fails with a generic message.",
    "Please keep the fix small, since we are close to the end of the sprint.",
    "The {service} pods restarted twice overnight, and the second restart lined up with the {tech} backup window.",
    "We saw the same symptoms during the load test in spring, but nobody wrote down what fixed them then.",
    "{person} is on leave this week, so I am covering {service} until Monday.",
    "The runbook for {service} still describes the old {tech} setup and needs an update.",
    "Nothing changed in {service2} this week as far as I can tell from the deploy log.",
]
ASKED = [
    "Can you look at the retry logic in {service} and tell me whether it backs off correctly?",
    "Is there anything in the {tech} configuration that would explain {error}?",
    "What should we check before the next release of {service}?",
    "Do you remember why we picked {tech} for {service2}?",
    "Could the {table} migration from last week be related?",
    "How would you split this work between {person} and me?",
]
ANSWERED = [
    "I checked the {service} configuration and the {tech} client retries {n} times with exponential backoff.",
    "The {error} errors started right after the deploy, so the new connection settings are the likely cause.",
    "We should add an index on the {table} table before the next batch run.",
    "Always run the {tech} migration in a separate deploy step for {service}.",
    "I decided to leave the timeout at {n} seconds until we have more data.",
    "First reproduce the failure in staging with recorded traffic, then compare the {tech} settings between the "
    "two environments, and only then roll forward with the fix.",
    "The health check on the load balancer points at the wrong port, which would explain the intermittent failures.",
    "Let me know if you want me to open a ticket for {person} with the timeline so far.",
    "The deploy finished at {hh}:{mm}, the first {error} appeared {n} minutes later, and the alerts fired shortly "
    "after that.",
    "Nothing in the {service2} logs points at a problem on its side during that window.",
    "If the pool limit is the cause, raising it from {n} to twice that should make the errors disappear within "
    "minutes.",
    "I would not change anything in {tech} itself until we know more.",
    "Going with a feature flag for the new {tech} client lets us turn it off without a deploy.",
    "Never retry a payment request without an idempotency key, or {service} may charge twice.",
    "The graphs show the latency rising before the errors, which points at saturation rather than a bad release.",
]


class DialectWorkload(Workload):
    """bench.run's workload, with seed 003's reads: each takes the next question of recall_text's pool, so no
    measured question repeats one whose embedding is cached."""

    def _args(self, op: str) -> dict:
        if op == "memento_recall":
            return {"query": super()._args("recall_text")["text"]}
        if op == "memento_context":
            return {"message": super()._args("recall_text")["text"]}
        return super()._args(op)


def gateway_client(
    system: System, profile: str, workspace: str = WORKSPACE, seen: stages.LastTiming | None = None
) -> Client:
    """An MCP client of the gateway; with `seen`, each tool call's Server-Timing is kept there (bench.stages)."""
    headers = {"Authorization": f"Bearer {system.secrets['access_key']}", "X-Memento-Workspace": workspace}
    url = f"{system.info['mcp_url']}?profile={profile}"
    http = create_mcp_http_client(headers=headers)
    # the handshake (2025-11-25 sessions), as every earlier run measured: the ping floor exists only there
    return Client(streamable_http_client(url, http_client=seen.attach(http) if seen else http), mode="legacy")


async def call(client: Client, tool: str, arguments: dict) -> dict:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise SystemExit(f"bench: {tool} failed: {result.content[0].text}")
    return result.structured_content


class LogCount:
    """Occurrences of `needle` in the lines a log gained since the last call."""

    def __init__(self, path: Path, needle: bytes) -> None:
        self.path, self.needle = path, needle
        self.offset = path.stat().st_size if path.exists() else 0

    def new(self) -> int:
        if not self.path.exists():
            return 0
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        return data.count(self.needle)


async def add_working_memory(system: System) -> dict:
    """ITEMS and SKIPS through the tools, topped up to those counts (a kept store holds an earlier run's)."""
    expires = (datetime.now(UTC) + timedelta(days=7)).isoformat(timespec="seconds")
    async with gateway_client(system, "all") as client:
        items = (await call(client, "memento_item_list", {}))["total"]
        for item in ITEMS[items:]:
            await call(client, "memento_item_create", item)
        skips = (await call(client, "memento_skip_list", {}))["total"]
        for skip in SKIPS[skips:]:
            await call(client, "memento_skip_add", skip | {"expires": expires})
    return {"items": max(items, len(ITEMS)), "skip_entries": max(skips, len(SKIPS))}


# --- seed 004's turn loop ---------------------------------------------------------------------------------------
class Project:
    """One project's facts (each service's port, stack, owner, ...), shared by every session of the run, so facts
    are restated across turns and sessions (memory_after_turn moves a restated fact to the weekly tier)."""

    def __init__(self, seed: str) -> None:
        rng = random.Random(f"{seed}:project")
        self.port = {s: rng.randint(3000, 9999) for s in SERVICES}
        self.owner = {s: rng.choice(PEOPLE) for s in SERVICES}
        self.version = {s: f"{rng.randint(1, 17)}.{rng.randint(0, 9)}" for s in SERVICES}
        self.rows = {s: rng.randint(10, 900) for s in SERVICES}


def sentence(template: str, rng: random.Random, project: Project) -> str:
    service, service2 = rng.sample(SERVICES, 2)
    return template.format(
        service=service,
        service2=service2,
        tech=rng.choice(TECH),
        error=rng.choice(ERRORS),
        person=rng.choice(PEOPLE),
        owner=project.owner[service],
        port=project.port[service],
        version=project.version[service],
        rows=project.rows[service],
        table=rng.choice(["orders", "events", "users", "invoices", "sessions"]),
        n=rng.randint(2, 90),
        hh=f"{rng.randint(0, 23):02d}",
        mm=f"{rng.randint(0, 59):02d}",
    )


def message_text(rng: random.Random, project: Project, pools: list[list[str]], facts: int) -> str:
    """200-400 words: `facts` stated facts at random places among sentences drawn from `pools` in turn, each pool's
    templates used once before any is used again, and no sentence twice."""
    words = rng.randint(200, 400)
    parts = [sentence(template, rng, project) for template in rng.sample(FACTS, facts)]
    decks: dict[int, list[str]] = {}
    i = 0
    while sum(len(p.split()) for p in parts) < words:
        pool = pools[i % len(pools)]
        deck = decks.setdefault(id(pool), [])
        if not deck:
            deck += rng.sample(pool, len(pool))
        text = sentence(deck.pop(), rng, project)
        if text not in parts:
            parts.insert(rng.randrange(len(parts) + 1), text)
        i += 1
    return " ".join(parts)


def conversation(seed: str, session: str, turns: int, project: Project) -> list[tuple[str, str]]:
    """(user message, assistant message) per turn, the same for the same seed and session."""
    rng = random.Random(f"{seed}:{session}")
    return [
        (
            message_text(rng, project, [SAID, SAID, ASKED], rng.randint(2, 4)),
            message_text(rng, project, [ANSWERED], rng.randint(1, 2)),
        )
        for _ in range(turns)
    ]


def item(role: str, text: str) -> dict:
    part = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}


async def session_loop(
    system: System, session: str, talk: list[tuple[str, str]], before: list[float], after: list[float], timed: dict
) -> None:
    """One client's session, as a seed-004 client runs it: before_turn, the model (here: the prepared answer),
    after_turn with before's input_items. `timed` gets (latency, Server-Timing) per measured call of each."""
    seen = stages.LastTiming()
    async with gateway_client(system, "lifecycle", seen=seen) as client:
        for turn, (said, reply) in enumerate(talk):
            seen.take()
            started = time.perf_counter()
            prepared = await call(
                client, "memory_before_turn", {"session_id": session, "current_input": [item("user", said)]}
            )
            between = time.perf_counter()
            before_timing = seen.take()
            await call(
                client,
                "memory_after_turn",
                {
                    "session_id": session,
                    "turn_id": prepared["turn_id"],
                    "input_items": prepared["input_items"],
                    "output_items": [item("assistant", reply)],
                },
            )
            if turn >= WARM_TURNS:
                before.append(between - started)
                after.append(time.perf_counter() - between)
                timed["before"].append((before[-1], before_timing))
                timed["after"].append((after[-1], seen.take()))


async def db_now(system: System) -> datetime:
    conn = await asyncpg.connect(system.owner_url())
    try:
        return await conn.fetchval("SELECT now()")
    finally:
        await conn.close()


async def written_since(system: System, since: datetime, timeout: float = 900) -> dict:
    """The fragments written in the workspace since `since` (Postgres' clock), once each has its vector: turns' facts
    are embedded by the workers after the call, and the next phase should not pay for this one's backlog."""
    started = time.perf_counter()
    conn = await asyncpg.connect(system.owner_url())
    try:
        while True:
            row = await conn.fetchrow(
                "SELECT count(*) AS n, count(*) FILTER (WHERE topic = 'lifecycle') AS facts,"
                " count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM agent_memory.fragment_embeddings e"
                "  WHERE e.fragment_id = f.id)) AS unembedded"
                " FROM agent_memory.fragments f WHERE f.tenant_id = 'default' AND f.workspace = $1"
                " AND f.created_at >= $2",
                WORKSPACE,
                since,
            )
            if row["unembedded"] == 0 or time.perf_counter() - started > timeout:
                break
            await asyncio.sleep(1)
        return {
            "fragments": row["n"],
            "facts": row["facts"],
            "not_embedded_after_wait": row["unembedded"],
            "embedding_wait_s": round(time.perf_counter() - started, 1),
        }
    finally:
        await conn.close()


async def turn_loop(system: System, seed: str, run: str, sessions: int, turns: int, project: Project) -> dict:
    since = await db_now(system)
    before: list[float] = []
    after: list[float] = []
    names = [f"bench-{run}-s{sessions}-{k}" for k in range(sessions)]
    talks = {name: conversation(seed, name, turns, project) for name in names}
    timed: dict[str, list] = {"before": [], "after": []}
    cpu_before, started = system.cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(session_loop(system, name, talk, before, after, timed) for name, talk in talks.items()))
    elapsed = time.perf_counter() - started
    rate = round(len(before) / elapsed, 1)
    cores = cpu_share(cpu_before, system.cpu_seconds(), elapsed)
    return {
        "before": percentiles(before)
        | {"throughput_per_s": rate, "cores": cores, "stages": stages.summary(timed["before"])},
        "after": percentiles(after) | {"throughput_per_s": rate, "stages": stages.summary(timed["after"])},
        # what before_turn embedded, turn by turn (the measured turns'): its user message's question
        "asked": [said for talk in talks.values() for said, _ in talk[WARM_TURNS:]],
        "written": await written_since(system, since),
        "seconds": round(elapsed, 1),
    }


# --- the decay job ----------------------------------------------------------------------------------------------
async def decay_runs(system: System) -> dict:
    from memento_consolidator.decay import decay

    settings = ConsolidatorSettings(DATABASE_URL=system.info["database_url"], REDIS_URL=system.info["redis_url"])
    rt = await open_runtime("consolidator", settings, max_jobs=1)
    conn = await asyncpg.connect(system.owner_url())
    try:
        rows = await conn.fetchval("SELECT count(*) FROM agent_memory.fragments")
    finally:
        await conn.close()
    runs = []
    try:
        for label in ("first", "second"):
            before = await row_changes(system.owner_url())
            started = time.perf_counter()
            try:
                result = await decay(rt)
            except asyncpg.PostgresError as exc:  # the store's schema, not the figures: the rest of the run stands
                print(f"bench: the decay job failed: {exc}", flush=True)
                return {"rows": rows, "error": f"{type(exc).__name__}: {exc}"}
            wall = time.perf_counter() - started
            changes = {k: v - before[k] for k, v in (await row_changes(system.owner_url(), settle_s=11)).items()}
            runs.append({"run": label, "wall_s": round(wall, 2), **result, "fragment_rows": changes})
            print(f"bench: decay {label} run {wall:.1f} s, {result['rescored']} of {rows} rows rescored", flush=True)
    finally:
        await close_runtime(rt)
    return {"rows": rows, "batch_size": settings.protocol_decay_batch_size, "runs": runs}


# --- the run ----------------------------------------------------------------------------------------------------
async def main_async(args: argparse.Namespace) -> dict:
    # the started system's consolidator runs no decay of its own (PROTOCOL_DECAY_CRON, every 6 h): one at its hour
    # would rescore the store just before the measured first run
    os.environ["PROTOCOL_DECAY_CRON"] = ""
    system = System(args)
    system.start()
    try:
        results: dict = {
            "n": args.n,
            "ops_per_level": args.ops,
            "turns_per_session": args.turns,
            "measured_from_turn": WARM_TURNS + 1,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "command": "python -m bench.dialects " + " ".join(sys.argv[1:]),
            "latency": {},
            "turns": {},
        }
        print(f"bench: bulk-loading {args.n} fragments ...", flush=True)
        loaded = await load(system.owner_url(), system.service_url("embedder"), args.n, WORKSPACE)
        results["load"] = loaded | {"ids": len(loaded["ids"])}
        await wait_for_l1(system)
        if args.decay_only:  # the decay job alone, on the loaded store
            results["decay"] = await decay_runs(system)
            return results
        workload = DialectWorkload([])
        seed = args.seed or workload.run  # a new run writes new facts on a kept store, as bench.run's writes do
        results["message_seed"] = seed
        results["working_memory"] = await add_working_memory(system)
        if args.warmup:  # as bench.run: indexes cached, with other questions than the measured ones
            warm = DialectWorkload([], seed=12, query_seed=3, query_tag="w")
            for op in ("memento_recall", "memento_context"):
                await direct(system, warm, op, 1, args.warmup)
            print(f"bench: warmed up with {args.warmup} unmeasured calls of each read", flush=True)
        results["warmup_calls_per_read"] = args.warmup
        results["query_embedding"] = percentiles(await query_embedding_time(system, min(args.ops, 100)))
        project = Project(seed)
        # co-hosted (make run's default), memory-api's lines are in the gateway's log
        log_name = "gateway.log" if cohosting(os.environ) else "memory-api.log"
        no_vector = LogCount(Path(system.info["logs"]) / log_name, NO_VECTOR)

        # seed 003
        paths = {"gateway": through_gateway, "memory-api": direct}
        for concurrency in args.concurrency:
            for path, ops in PROTOCOL_OPS.items():
                for op in ops:
                    timed: list = []
                    cpu_before, started = system.cpu_seconds(), time.perf_counter()
                    latencies = await paths[path](system, workload, op, concurrency, args.ops, timed)
                    elapsed = time.perf_counter() - started
                    stats = percentiles(latencies)
                    stats["throughput_per_s"] = round(len(latencies) / elapsed, 1)
                    stats["cores"] = cpu_share(cpu_before, system.cpu_seconds(), elapsed)
                    if op != "ping":
                        stats["stages"] = stages.summary(timed)
                    if missing := no_vector.new():  # warm-up calls included
                        stats["no_query_vector"] = missing
                    if texts := workload.asked.pop(op, []):
                        stats |= await floor.model_alone(system.service_url("embedder"), texts)
                    results["latency"][f"{op}|{path}|c{concurrency}"] = stats
                    print(f"  {op:20} {path:10} c={concurrency}: p50 {stats['p50_ms']} ms, p95 {stats['p95_ms']} ms")

        # seed 004
        for sessions in args.concurrency:
            phase = await turn_loop(system, seed, workload.run, sessions, args.turns, project)
            if missing := no_vector.new():  # unmeasured turns included
                phase["before"]["no_query_vector"] = missing
            asked = [("query", question(said, floor.QUESTION_TOKENS)) for said in phase.pop("asked")]
            phase["before"] |= await floor.model_alone(system.service_url("embedder"), asked)
            results["latency"][f"memory_before_turn|gateway|c{sessions}"] = phase.pop("before")
            results["latency"][f"memory_after_turn|gateway|c{sessions}"] = phase.pop("after")
            results["turns"][f"c{sessions}"] = phase
            for op in ("memory_before_turn", "memory_after_turn"):
                stats = results["latency"][f"{op}|gateway|c{sessions}"]
                print(f"  {op:20} gateway    s={sessions}: p50 {stats['p50_ms']} ms, p95 {stats['p95_ms']} ms")
            print(f"  {phase['written']['facts']} facts written in {sessions * args.turns} turns", flush=True)

        results["decay"] = await decay_runs(system)
        results["memory_mb"] = system.memory()
        return results
    finally:
        system.stop()


# --- the figures ------------------------------------------------------------------------------------------------
def rows(results: dict) -> list[dict]:
    out = []
    for key, stats in results["latency"].items():
        op, path, level = key.split("|")
        spec, seed_ms, seed = DIALECT_TARGETS[op]
        target = resolve_target(spec.get(path) if isinstance(spec, dict) else spec, path, level, results, stats)
        out.append(
            {
                "op": op,
                "path": path,
                "concurrency": level[1:],
                **stats,
                "target_ms": target,
                "meets": None if target is None else stats["p95_ms"] <= target,
                "seed": seed if seed_ms is None else f"{seed} {'✓' if stats['p95_ms'] < seed_ms else '✗'}",
            }
        )
    return out


STAGES_TEXT = (
    "Where the time goes: every call's Server-Timing (memory-api's stages, docs/operations.md), each cell p50 / p95 "
    "over the row's calls in ms. `observed`: what the client waited; `embed`: waiting for the question's vector "
    "(queue included); `fresh`: for the vectors of the caller's rows not embedded yet; `pool`: for a connection; "
    "`db`: statements not overlapped by an embedding; `other`: memory-api's own work (`total` minus its stages); "
    "`hop`: `observed` minus `total` (the gateway, the network and the client)."
)


def stage_rows(results: dict) -> list[tuple[str, str, str, dict]]:
    """(operation, path, clients, bench.stages summary) of the rows whose calls carried Server-Timing."""
    return [
        (*key.split("|")[:2], key.rsplit("|c", 1)[1], stats["stages"])
        for key, stats in results["latency"].items()
        if stats.get("stages")
    ]


def mark(row: dict) -> str:
    return "—" if row["target_ms"] is None else f"≤ {row['target_ms']:g} {'✓' if row['meets'] else '✗'}"


def notes(results: dict) -> list[str]:
    """The lines under the table: searches without their query vector, the turn loop's writes, the decay job,
    memory."""
    lines = []
    for key, stats in results["latency"].items():
        if stats.get("no_query_vector"):
            op, path, level = key.split("|")
            lines.append(
                f"{op} ({path}, {level[1:]} clients): {stats['no_query_vector']} calls (unmeasured ones included) "
                "searched without the query vector: the embedder did not answer in time (memory-api waits 10 s)."
            )
    for level, phase in results["turns"].items():
        written = phase["written"]
        turns = int(level[1:]) * results["turns_per_session"]
        missing = written["not_embedded_after_wait"]
        lines.append(
            f"Turn loop, {level[1:]} session(s) × {results['turns_per_session']} turns in {phase['seconds']} s: "
            f"{written['facts']} new facts ({written['facts'] / turns:.1f} a turn), their vectors written "
            f"{written['embedding_wait_s']} s after the last turn"
            + (f" ({missing} still without one)." if missing else ".")
        )
    decay = results["decay"]
    if "error" in decay:
        lines.append(f"Decay job: failed on this store ({decay['error']}).")
        return lines + memory(results)
    first, second = decay["runs"]
    scaled = DECAY_SPEC_S * results["n"] / DECAY_SPEC_N
    verdict = (
        f"{'✓' if max(first['wall_s'], second['wall_s']) <= DECAY_SPEC_S else '✗'}"
        if results["n"] >= DECAY_SPEC_N
        else f"{scaled:g} s at this size if linear"
    )
    lines.append(
        f"Decay job (consolidator `decay`, in-process, {decay['rows']:,} fragment rows in batches of "
        f"{decay['batch_size']}): first run {first['wall_s']} s ({first['rescored']:,} rows rescored, "
        f"{first['expired_memories']} expired memories purged), second {second['wall_s']} s "
        f"({second['rescored']:,} rescored); SPEC ≤ {DECAY_SPEC_S:g} s at 1M ({verdict})."
    )
    return lines + memory(results)


def memory(results: dict) -> list[str]:
    if not results.get("memory_mb"):
        return []
    return ["Memory (PSS, MB): " + ", ".join(f"{k} {v}" for k, v in results["memory_mb"].items()) + "."]


def print_report(results: dict) -> None:
    print(
        f"\nMemento dialects benchmark — {results['n']} fragments, {results['ops_per_level']} calls per seed-003 row, "
        f"{results['turns_per_session']} turns a session (from turn {results['measured_from_turn']} measured), "
        f"{results['machine']}"
    )
    embedding = results["query_embedding"]
    print(f"query embedding (the model alone): p50 {embedding['p50_ms']} ms, p95 {embedding['p95_ms']} ms")
    header = (
        f"{'operation':20} {'path':10} {'c':>2} {'p50':>8} {'p95':>8} {'p99':>8} {'ops/s':>7} {'model p95':>9} "
        f"{'÷ model':>7}  {'target':>9}  seed"
    )
    print(header)
    print("-" * len(header))
    for r in rows(results):
        print(
            f"{r['op']:20} {r['path']:10} {r['concurrency']:>2} {r['p50_ms']:>8} {r['p95_ms']:>8} {r['p99_ms']:>8} "
            f"{r['throughput_per_s']:>7} {model_p95(r):>9} {share(r):>7}  {mark(r):>10}  {r['seed']}"
        )
    if timed := stage_rows(results):
        print(f"\n{'where the time goes (p50/p95 ms)':36} {'c':>2} " + " ".join(f"{c:>13}" for c in stages.COLUMNS))
        for op, path, clients, summary in timed:
            print(f"{op + ' ' + path:36} {clients:>2} " + " ".join(f"{cell:>13}" for cell in stages.cells(summary)))
    for line in [*notes(results), cores_text(results)]:
        print(line)


def markdown(results: dict) -> str:
    embedding = results["query_embedding"]
    lines = [
        f"Latest: {results['n']:,} fragments, {results['ops_per_level']} calls per seed-003 row, "
        f"{results['turns_per_session']} turns a session (the first {WARM_TURNS} unmeasured), {results['machine']}, "
        f"every service on the same machine. Produced by `{results['command']}` (`bench/results/{results['file']}`). "
        f"Query embedding alone: p50 {embedding['p50_ms']} ms, p95 {embedding['p95_ms']} ms. {MODEL_COLUMNS} "
        "memory_before_turn embeds its user message's question. For the turn rows `clients` counts sessions and "
        "ops/s is turns a second; memento_context's target is read at memory-api.",
        "",
        "| operation | path | clients | p50 ms | p95 ms | p99 ms | ops/s | model p95 ms | ÷ model | target p95 "
        "| seed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows(results):
        lines.append(
            f"| {r['op']} | {r['path']} | {r['concurrency']} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} "
            f"| {r['throughput_per_s']} | {model_p95(r)} | {share(r)} | {mark(r)} | {r['seed']} |"
        )
    if timed := stage_rows(results):
        lines += ["", STAGES_TEXT, "", *stages.table_lines(timed)]
    shares = [cores_text(results)] if cores_text(results) else []
    return "\n".join([*lines, "", *(f"{line}\n" for line in [*notes(results), *shares])]).rstrip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="fragments to bulk-load (10k default; 1000000 for 1M)")
    parser.add_argument("--ops", type=int, default=200, help="measured calls per seed-003 row")
    parser.add_argument("--turns", type=int, default=50, help="turns a session (the first three unmeasured)")
    parser.add_argument("--warmup", type=int, default=100, help="unmeasured memento_recall and memento_context first")
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8])
    parser.add_argument("--seed", help="the turn messages' seed (default: the run's, so a kept store gets new facts)")
    parser.add_argument("--data-dir", help="data dir for the started system (default: a fresh temporary one)")
    parser.add_argument("--port", type=int, default=56472, help="gateway port of the started system")
    parser.add_argument("--no-readme", action="store_true", help="do not refresh its block in docs/benchmarks.md")
    parser.add_argument("--decay-only", action="store_true", help="only the decay job's two runs (no README block)")
    parser.set_defaults(url=None, key=None)  # bench.run's System: always a started system here
    args = parser.parse_args()
    if args.turns <= WARM_TURNS:
        parser.error(f"--turns: more than the {WARM_TURNS} unmeasured ones")
    results = asyncio.run(main_async(args))
    if args.decay_only:
        results["file"] = f"dialects-decay-{args.n}-{time.strftime('%Y%m%d-%H%M%S')}.json"
        (RESULTS / results["file"]).write_text(json.dumps(results, indent=2, default=str) + "\n")
        print(f"bench: results written to bench/results/{results['file']}")
        return
    results["file"] = f"dialects-{args.n}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    print_report(results)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / results["file"]
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    if args.n in README_SIZES and not args.no_readme:
        replace_readme_block(f"dialects-{args.n}", markdown(results))
    print(f"\nbench: results written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
