"""Read your own writes by meaning (issue 47), through the gateway with the official MCP client, on the whole system
started like `make run`:

- top-1: `remember` a fact, then at once `recall` it in words sharing no content word with it (no word, and no
  word's first five letters); the share of trials whose first call has the fact as its top hit, in a workspace of
  DISTRACTORS facts already embedded. Idle, then while `--writers` other clients (other workspaces: other principals)
  remember as fast as they can. Each trial's fact is forgotten after it, so every trial asks among the same rows.
  How many facts the embedder had embedded before the search started is counted from Postgres (vector created_at).
- cost: the same recall with one fresh row to score and without it, alternating in one run (a fact remembered, the
  recall, then the same recall once the search has written the row's vector back), beside the row's own embedding
  time on the embedder's /v1/embeddings and remember's latency.

    python -m bench.fresh --trials 200 --pairs 100
    python -m bench.fresh --remember-only 200    # remember's latency alone, idle (run on another checkout to compare)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sys
import time
from collections.abc import AsyncIterator

import asyncpg
import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bench.report import RESULTS, ROOT, percentiles
from bench.run import System

# (fact, question): no content word in common, nor a word's first five letters (checked by `check_pairs`)
PAIRS = [
    ("We picked arq for background jobs because it is asyncio-native", "which task queue library did the team adopt?"),
    ("Production Postgres runs version 18 with pgvector", "what database engine release is deployed live?"),
    ("Alice owns the billing service on-call rotation", "who gets paged when invoicing breaks?"),
    ("Deploys freeze every Friday after noon", "when are releases to servers blocked each week?"),
    ("The staging cluster lives in Frankfurt", "in which German city do we run the pre-release servers?"),
    ("Use ruff for linting and formatting Python code", "which tool checks our source style?"),
    ("The mobile app targets iOS 17 and Android 14", "what phone operating systems does the handset client support?"),
    ("Customer data must stay inside the European Union", "what residency rule applies to user records?"),
    (
        "Backups are taken nightly and kept for thirty days",
        "what is our data copy schedule and retention period?",
    ),
    ("Grafana dashboards show latency per endpoint", "where can someone view response times by route?"),
    ("The design system uses Inter as its typeface", "which font do screens render text with?"),
    ("Bob prefers tabs over spaces in Makefiles", "how does that engineer like indentation in build recipes?"),
    ("Our CI pipeline runs on GitHub Actions", "which service executes automated checks for pull requests?"),
    ("Secrets are stored in HashiCorp Vault", "where do credentials and tokens live?"),
    ("The search index rebuild takes four hours", "how long does regenerating lookup structures last?"),
    ("Payments are processed by Stripe", "which vendor handles card charges?"),
    ("Error budgets allow 0.1 percent failed requests", "what reliability tolerance is accepted for outages?"),
    ("The API rate limit is 100 calls per minute per key", "how many requests can one client make before throttling?"),
    ("New hires get a laptop on their first day", "when does equipment arrive for newcomers?"),
    ("Emails are sent through Amazon SES", "which provider delivers outgoing messages to inboxes?"),
    ("The frontend is written in TypeScript with React", "what language and framework power the web UI?"),
    ("Logs are retained for fourteen days in Loki", "how long do we keep application output traces?"),
    ("Feature flags are managed with LaunchDarkly", "which product toggles functionality for subsets of users?"),
    ("The office closes for two weeks in August", "when is the summer shutdown of the workplace?"),
    (
        "Redis holds sessions and expires them after one hour",
        "which in-memory store keeps signed-in user state, and what is its timeout?",
    ),
    ("Invoices are generated on the first of each month", "what date do bills get produced?"),
    ("The data warehouse is Snowflake", "where does analytics querying happen?"),
    ("Kubernetes clusters autoscale between three and twelve nodes", "how many machines can the orchestrator grow to?"),
    ("Translations are handled by an agency in Lisbon", "who localizes product copy into other languages?"),
    ("The CEO approves budgets above fifty thousand euros", "who signs off large spending?"),
    ("Sprint reviews happen every second Thursday", "how often are agile cycle showcases held?"),
    ("Passwords need at least twelve characters", "what length rule applies to login secrets?"),
    ("The support team answers tickets within four hours", "how quickly do helpdesk agents respond?"),
    ("Images are resized by a Lambda function on upload", "what processes pictures when users add them?"),
    ("We migrated from Jenkins last spring", "which older automation server did we leave behind?"),
    ("The recommendation model retrains weekly on Sundays", "how often is the suggestion algorithm refreshed?"),
    ("Dark mode ships in version 3.2", "which release adds a night theme?"),
    ("Vendor contracts renew automatically in January", "when do supplier agreements roll over?"),
    ("The warehouse in Rotterdam stores spare parts", "where are replacement components kept?"),
    ("Marketing uses HubSpot for campaigns", "which platform runs promotional outreach?"),
    (
        "The chatbot escalates to a human after three failed answers",
        "at what point does the virtual agent transfer a customer to a person?",
    ),
    ("Mobile crashes are reported through Sentry", "where do app failures get tracked?"),
    ("The team standup is at 9:30 every morning", "what time is the daily sync meeting?"),
    ("GDPR deletion requests must be fulfilled within thirty days", "how fast must erasure asks be honoured?"),
    (
        "Load tests run against a copy of production on Tuesdays",
        "which weekday is reserved for performance stress trials?",
    ),
    ("The VPN is required for the admin console", "what must be connected before opening the management panel?"),
    ("Our domain names are registered with Gandi", "which company do we buy our web addresses from?"),
    ("Coffee beans are ordered from a roaster in Ghent", "where does the espresso supply come from?"),
    ("Parental leave is sixteen weeks at full pay", "how much time off do mothers and fathers get after a birth?"),
    ("The legacy monolith still serves the checkout page", "which old system renders the purchase flow?"),
]
DISTRACTORS = [  # no time named (a "when" question lifts rows that name one), no word of any question's
    "The parking garage has two levels",
    "Lunch is catered by a nearby bakery",
    "The printer on floor two jams often",
    "Plants in the lobby need indirect light",
    "Conference rooms are named after rivers",
    "Recycling bins are sorted by colour",
    "Our mascot is an orange fox",
    "The cafeteria offers vegan options",
    "The rooftop terrace has a grill",
    "Bicycle racks stand near the entrance",
    "Hoodies and mugs are given to visitors",
    "Whiteboards hang in every corridor",
    "The lobby sofa is green velvet",
    "A piano sits in the lounge",
    "The gym has two rowing ergometers",
    "Umbrellas are lent at reception",
    "Fresh fruit sits near the stairs",
    "The aquarium holds tropical fish",
    "Chess sets wait in the quiet corner",
]
STOP_PREFIX = 5


def content_words(text: str) -> set[str]:
    from memento_memory_api.recall.lexical import terms

    return set(terms(text))


def shared(a: set[str], b: set[str]) -> set[str]:
    """Words of `a` that `b` holds too, or whose first STOP_PREFIX letters a word of `b` begins with."""
    return a & b | {x for x in a for y in b if len(x) >= STOP_PREFIX and x[:STOP_PREFIX] == y[:STOP_PREFIX]}


def check_pairs() -> None:
    """Every pair shares no content word (nor a word's first STOP_PREFIX letters), and no distractor any question's."""
    asked = set().union(*(content_words(q) for _, q in PAIRS))
    for fact, question in PAIRS:
        if both := shared(content_words(fact), content_words(question)):
            raise SystemExit(f"bench: {fact!r} and {question!r} share {sorted(both)}")
    for distractor in DISTRACTORS:
        if both := shared(content_words(distractor), asked):
            raise SystemExit(f"bench: distractor {distractor!r} shares {sorted(both)} with a question")


async def model_margins(system: System) -> list[float]:
    """Per pair, the model's cosine of the question to its fact less its cosine to the nearest distractor, through the
    embedder's /v1/embeddings: a pair the model itself would not rank first once embedded tests the model, not this."""
    async with httpx.AsyncClient(base_url=system.service_url("embedder"), timeout=120) as http:

        async def vectors(texts: list[str], kind: str) -> list[list[float]]:
            answer = await http.post("/v1/embeddings", json={"input": texts, "input_type": kind})
            answer.raise_for_status()
            return [d["embedding"] for d in answer.json()["data"]]

        facts = await vectors([f for f, _ in PAIRS], "document")
        questions = await vectors([q for _, q in PAIRS], "query")
        others = await vectors(DISTRACTORS, "document")

    def dot(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    return [dot(q, f) - max(dot(q, o) for o in others) for q, f in zip(questions, facts, strict=True)]


@contextlib.asynccontextmanager
async def client(system: System, workspace: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {system.secrets['access_key']}", "X-Memento-Workspace": workspace}
    transport = streamable_http_client(system.info["mcp_url"], http_client=create_mcp_http_client(headers=headers))
    async with Client(transport, read_timeout_seconds=120) as found:
        yield found


async def call(mcp: Client, tool: str, arguments: dict) -> tuple[dict, float]:
    started = time.perf_counter()
    result = await mcp.call_tool(tool, arguments)
    elapsed = time.perf_counter() - started
    if result.is_error:
        raise SystemExit(f"bench: {tool} failed: {result.content[0].text}")
    return result.structured_content, elapsed


async def remember(mcp: Client, content: str) -> tuple[dict, float]:
    return await call(mcp, "remember", {"content": content, "topic": "notes", "type": "fact"})


async def recall(mcp: Client, text: str) -> tuple[dict, float]:
    return await call(mcp, "recall", {"text": text, "includeLinks": False})


async def seed(system: System, workspace: str) -> None:
    """The distractors, embedded before any trial (memory_stats' backlog drained)."""
    async with client(system, workspace) as mcp:
        for content in DISTRACTORS:
            await remember(mcp, content)
        deadline = time.monotonic() + 300
        while (await call(mcp, "memory_stats", {}))[0]["embeddingBacklog"] and time.monotonic() < deadline:
            await asyncio.sleep(0.5)  # polling the embedder's backlog


async def trials(system: System, workspace: str, count: int, label: str) -> dict:
    """`count` trials: remember, recall at once, forget. Top-1 share, recall's and remember's latency, and how many
    facts already had their vector from the embedder when the recall started (its created_at before the recall)."""
    hits, partial, embedded_before, same, recalls, remembers = 0, 0, 0, 0, [], []
    conn = await asyncpg.connect(system.owner_url())
    try:
        async with client(system, workspace) as mcp:
            for n in range(count):
                fact, question = PAIRS[n % len(PAIRS)]
                stored, took = await remember(mcp, f"{fact} (note {label}-{n})")
                remembers.append(took)
                asked_at = await conn.fetchval("SELECT clock_timestamp()")
                found, took = await recall(mcp, question)
                recalls.append(took)
                top = found["fragments"][0]["id"] if found["fragments"] else None
                hits += top == stored["id"]
                partial += found.get("meaningSearch") == "partial"
                written = await embedded_at(conn, stored["id"])
                embedded_before += written is not None and written < asked_at
                # the same question once the fact's vector is in the index: the order the first call had to match
                await embedded_at(conn, stored["id"], wait_s=10)
                again, _ = await recall(mcp, question)
                same += [f["id"] for f in again["fragments"][:5]] == [f["id"] for f in found["fragments"][:5]]
                await call(mcp, "forget", {"id": stored["id"], "force": True})
    finally:
        await conn.close()
    return {
        "trials": count,
        "top1": hits,
        "top1_share": round(hits / count, 4),
        "partial_answers": partial,
        "embedded_by_the_embedder_before_the_recall": embedded_before,
        "same_top5_once_embedded": same,
        "recall": percentiles(recalls),
        "remember": percentiles(remembers),
    }


async def embedded_at(conn: asyncpg.Connection, fragment_id: str, wait_s: float = 0.0):
    """When the fragment's vector for its current content was written (None: not yet), waiting up to `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        written = await conn.fetchval(
            "SELECT e.created_at FROM agent_memory.fragment_embeddings e JOIN agent_memory.fragments f"
            " ON f.id = e.fragment_id AND f.content_hash = e.content_hash WHERE f.id = $1",
            fragment_id,
        )
        if written is not None or time.monotonic() >= deadline:
            return written
        await asyncio.sleep(0.01)  # polling the write-back


async def cost(system: System, workspace: str, count: int) -> dict:
    """The same recall with one fresh row to score and without it, alternating: remember a fact, recall (the row is
    fresh: scored and written back), wait for the write-back, recall again (no fresh row). The question is the same
    throughout (its vector cached after the first), so the difference is the fresh row's part. Each fact's own
    embedding time is measured in the same round, on the embedder's /v1/embeddings, one call as the search makes."""
    question = PAIRS[0][1]
    with_fresh, without, remembers, own = [], [], [], []
    conn = await asyncpg.connect(system.owner_url())
    http = httpx.AsyncClient(base_url=system.service_url("embedder"), timeout=60)
    try:
        async with client(system, workspace) as mcp:
            await recall(mcp, question)  # the question's vector, cached from here on
            for n in range(count):
                fact = f"{PAIRS[1 + n % (len(PAIRS) - 1)][0]} (cost note {n})"
                stored, took = await remember(mcp, fact)
                remembers.append(took)
                with_fresh.append((await recall(mcp, question))[1])
                await embedded_at(conn, stored["id"], wait_s=10)  # written back: the row is in the index now
                without.append((await recall(mcp, question))[1])
                started = time.perf_counter()
                answer = await http.post("/v1/embeddings", json={"input": [fact], "input_type": "document"})
                answer.raise_for_status()
                own.append(time.perf_counter() - started)
    finally:
        await conn.close()
        await http.aclose()
    added = [a - b for a, b in zip(with_fresh, without, strict=True)]
    beyond = [a - o for a, o in zip(added, own, strict=True)]  # what the search adds beyond the row's own embedding
    return {
        "pairs": count,
        "recall_with_one_fresh_row": percentiles(with_fresh),
        "recall_without": percentiles(without),
        "added": percentiles(added),
        "added_beyond_own_embedding": percentiles(beyond),
        "fresh_row_own_embedding": percentiles(own),
        "remember": percentiles(remembers),
    }


async def writers(system: System, count: int, stop: asyncio.Event) -> int:
    """`count` clients remembering as fast as they can, each in a workspace of its own, until `stop`."""
    done = 0

    async def one(k: int) -> None:
        nonlocal done
        async with client(system, f"fresh-load-{k}") as mcp:
            n = 0
            while not stop.is_set():
                await remember(mcp, f"load note {k}-{n}: the job on node-{n % 97} finished step {n}")
                n += 1
                done += 1

    await asyncio.gather(*(one(k) for k in range(count)))
    return done


async def backlog(system: System) -> dict:
    """Rows of every workspace still waiting for their vector, and the oldest's wait."""
    conn = await asyncpg.connect(system.owner_url())
    try:
        row = await conn.fetchrow(
            "SELECT count(*) AS n, extract(epoch FROM now() - min(f.created_at))::float8 AS oldest"
            " FROM agent_memory.fragments f WHERE NOT EXISTS (SELECT 1 FROM agent_memory.fragment_embeddings e"
            " WHERE e.fragment_id = f.id AND e.content_hash = f.content_hash)"
        )
    finally:
        await conn.close()
    return {"rows": row["n"], "oldest_s": round(row["oldest"] or 0.0, 1)}


async def remember_only(system: System, count: int) -> dict:
    async with client(system, f"fresh-remember-{int(time.time())}") as mcp:
        took = [(await remember(mcp, f"{PAIRS[n % len(PAIRS)][0]} (remember {n})"))[1] for n in range(count)]
    return {"remember": percentiles(took)}


async def main_async(args: argparse.Namespace) -> dict:
    check_pairs()
    system = System(args)
    system.start()
    run = int(time.time())
    out: dict = {
        "command": "python -m bench.fresh " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    }
    try:
        if args.remember_only:
            return out | await remember_only(system, args.remember_only)
        workspace = f"fresh-{run}"
        margins = await model_margins(system)
        out["model_margin_min"] = round(min(margins), 4)
        if min(margins) <= 0:
            print(f"bench: the model itself ranks a distractor first for {sum(m <= 0 for m in margins)} pairs")
        print(f"bench: seeding {len(DISTRACTORS)} distractors and waiting for their vectors ...", flush=True)
        await seed(system, workspace)
        print(f"bench: {args.pairs} alternating recalls with and without one fresh row ...", flush=True)
        out["cost"] = await cost(system, f"fresh-cost-{run}", args.pairs)
        if args.cost_only:
            return out
        print(f"bench: {args.trials} trials, idle ...", flush=True)
        out["idle"] = await trials(system, workspace, args.trials, "idle")
        print(f"bench: {args.trials} trials while {args.writers} other clients write ...", flush=True)
        stop = asyncio.Event()
        load = asyncio.create_task(writers(system, args.writers, stop))
        await asyncio.sleep(args.warmup)  # the backlog builds before the trials start
        try:
            out["under_load"] = await trials(system, workspace, args.trials, "load")
            out["under_load"]["backlog_at_end"] = await backlog(system)
        finally:
            stop.set()
            out["under_load"]["other_writes"] = await load
        out["writers"] = args.writers
        return out
    finally:
        system.stop()


def report(r: dict) -> None:
    print(f"\nRead your own writes by meaning, {r['machine']}")
    if "cost" not in r:
        print(f"remember p50 / p95 ms: {r['remember']['p50_ms']} / {r['remember']['p95_ms']}")
        return
    for phase in [p for p in ("idle", "under_load") if p in r]:
        t = r[phase]
        print(
            f"{phase:11} top-1 on the first call {t['top1']}/{t['trials']} ({t['top1_share']:.1%}); embedded by the"
            f" embedder before the recall {t['embedded_by_the_embedder_before_the_recall']}; same top 5 once embedded"
            f" {t['same_top5_once_embedded']}; partial answers"
            f" {t['partial_answers']}; recall p50/p95 {t['recall']['p50_ms']}/{t['recall']['p95_ms']} ms; remember"
            f" p50/p95 {t['remember']['p50_ms']}/{t['remember']['p95_ms']} ms"
        )
    if load := r.get("under_load"):
        print(f"under load: {load['other_writes']} other writes; backlog at the end {load['backlog_at_end']}")
    c = r["cost"]
    names = ("recall_with_one_fresh_row", "recall_without", "added", "fresh_row_own_embedding",
             "added_beyond_own_embedding", "remember")  # fmt: skip
    for name in names:
        print(f"{name:28} p50 {c[name]['p50_ms']:>8} ms   p95 {c[name]['p95_ms']:>8} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=100, help="alternating recalls with and without a fresh row")
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds of other writes before the trials")
    parser.add_argument("--remember-only", type=int, default=0, help="only remember's latency, this many calls")
    parser.add_argument("--cost-only", action="store_true", help="only the alternating recalls")
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir")
    parser.add_argument("--port", type=int, default=56472)
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    report(results)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"fresh-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nbench: results written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
