"""Recall-by-text latency of the shipped relevance order against plain fusion, alternating (issue 28, item 6: "the
latency rows of recall by text unchanged within the run's noise").

The system is started like `make run` (bench.run's System) and N LoCoMo conversations are stored through the gateway
as bench.locomo stores them (`remember`, `"{speaker} ({date}): {text}"`, topic = session, source = dia id). Then
bench.ab's two memory-api apps (shipped: the default RECALL_* settings; plain: OFF, the engine's lists fused by RRF)
ask every question with evidence alternately, A B B A, for R rounds, with the query embedding alone timed beside.

Sanity, before the figures are trusted: the first questions' ids from each app equal the gateway's for the same
settings (the system restarted with plain's environment at the end for plain's), the store has rows with a thread
(what the neighbour statement reads), and the neighbour index was scanned while the apps ran.

    python -m bench.relevance_latency                      # 2 conversations, 3 rounds, a fresh data dir
    python -m bench.relevance_latency --conversations 1 --rounds 1 --data-dir /tmp/rl   # quicker; reusable store
    python -m bench.relevance_latency --conversations 1 --bulk 1000000 --data-dir DIR       # beside a million

With `--bulk N`, each conversation's workspace first gets N fragments bulk-loaded beside it (bench.load: COPY, in
threads of 40 as sessions write them; most of an hour for a million, reused from a kept data dir): the searches and
the neighbour reads then run over a store of that size. With `--corpus-queries N`, N of bench.corpus's questions per
workspace (the bulk fragments' own vocabulary, as `bench.run` asks them; their full-text side is the heavy one) are
compared the same way after the LoCoMo questions.

    python -m bench.relevance_latency --conversations 1 --bulk 1000000 --corpus-queries 100 --data-dir DIR

With `--workspace W` the conversation is stored and asked in workspace W instead of its own: a store `bench.run --n
1000000 --data-dir DIR` left (workspace "bench") serves as the million without loading another.

    python -m bench.relevance_latency --conversations 1 --bulk 1000000 --workspace bench --data-dir DIR

With `--control`, the shipped app runs plain's settings too (bench.ab): the difference it prints is what the method
reads when the two apps differ in nothing, the run's own noise beside which a shipped − plain difference is read.

    python -m bench.relevance_latency --conversations 1 --control --data-dir /tmp/rl

With `--pin` (Linux), once the turns are stored and embedded, the embedder (every thread of it and of its children) is
held to the first CPU and every other process of the run, this one and PostgreSQL included, to the rest: what a
deployment whose model has a CPU of its own sees (the embedder's own pod). Without it, the work a recall does beside
the model (the lexical and neighbour reads) shares the machine's two cores with it and slows it.

    python -m bench.relevance_latency --conversations 1 --pin --data-dir /tmp/rl
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import asyncpg
import psutil

from bench.ab import APPS, ARGUMENTS, OFF, App, alternate, apps_on, describe
from bench.corpus import queries as corpus_queries
from bench.load import load
from bench.locomo import DATA, Tools, git_state, store, turns, wait_embedded, with_evidence
from bench.report import save
from bench.run import System


def questions(sample: dict) -> list[str]:
    """The questions bench.locomo asks: those with string evidence."""
    return [qa["question"] for qa in with_evidence(sample)]


async def counts(owner_url: str, workspace: str) -> tuple[int, int]:
    """(the conversation's turns stored in `workspace`, every fragment there): the turns carry their dia id as
    source, bulk rows none."""
    conn = await asyncpg.connect(owner_url)
    try:
        row = await conn.fetchrow(
            "SELECT count(*) FILTER (WHERE source IS NOT NULL) AS turns, count(*) AS rows"
            " FROM agent_memory.fragments WHERE workspace = $1",
            workspace,
        )
        return row["turns"], row["rows"]
    finally:
        await conn.close()


def workspace_of(sample: dict, named: str | None = None) -> str:
    """Where a conversation is stored and asked: `named` (--workspace), else its own workspace."""
    return named or "locomo-" + sample["sample_id"]


async def store_all(system: System, data: list[dict], bulk: int = 0, named: str | None = None) -> dict:
    """Each conversation stored through the gateway (skipped when a kept data dir already holds it), embedded; with
    `bulk`, after that many fragments were bulk-loaded into its workspace."""
    owner, out = system.owner_url(), {}
    for sample in data:
        workspace = workspace_of(sample, named)
        items = turns(sample["conversation"])
        if bulk:  # a kept data dir's rows are reused (bench.load)
            started = time.perf_counter()
            await load(owner, system.service_url("embedder"), bulk, workspace)
            print(f"bench: {workspace}: bulk fragments ready in {time.perf_counter() - started:.0f}s", flush=True)
        started = time.perf_counter()
        stored = (await counts(owner, workspace))[0]
        if stored < len(items):
            stored = len(await store(system, items, workspace))
        store_s = time.perf_counter() - started
        stored, rows = await counts(owner, workspace)
        waited = await wait_embedded(owner, workspace, rows)  # every row, the bulk ones too, has its vector
        out[workspace] = {
            "bulk": rows - stored,
            "turns": len(items),
            "stored": stored,
            "store_s": round(store_s, 1),
            "embed_wait_s": round(waited, 1),
        }
        print(f"bench: {workspace}: {stored} turns stored in {store_s:.0f}s, embedded {waited:.0f}s later", flush=True)
    return out


async def store_facts(owner_url: str, workspaces: list[str]) -> dict:
    """What the neighbour statement reads: rows with a thread, and how often its index has been scanned so far."""
    conn = await asyncpg.connect(owner_url)
    try:
        row = await conn.fetchrow(
            "SELECT count(*) AS rows, count(*) FILTER (WHERE thread IS NOT NULL) AS threaded,"
            " count(DISTINCT (workspace, thread)) FILTER (WHERE thread IS NOT NULL) AS threads,"
            " count(*) FILTER (WHERE updated_at > created_at) AS updated"
            " FROM agent_memory.fragments WHERE workspace = ANY($1)",
            workspaces,
        )
        scans = await conn.fetchval(
            "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes WHERE indexrelname = 'fragments_thread_idx'"
        )
        return {**dict(row), "thread_index_scans": int(scans)}
    finally:
        await conn.close()


async def gateway_ids(system: System, sample_questions: dict[str, list[str]]) -> dict[str, list[list[str]]]:
    out = {}
    for workspace, texts in sample_questions.items():
        async with Tools(system, workspace) as tools:
            out[workspace] = [[f["id"] for f in (await tools.call("recall", {"text": t, **ARGUMENTS}))["fragments"]]
                              for t in texts]  # fmt: skip
    return out


def flat(answers: dict[str, list[list[str]]]) -> list[list[str]]:
    return [ids for w in sorted(answers) for ids in answers[w]]


def same(a: dict[str, list[list[str]]], b: dict[str, list[list[str]]]) -> int:
    """How many questions got the same ids, in the same order, in both."""
    return sum(x == y for x, y in zip(flat(a), flat(b), strict=True))


async def restart_plain(args: argparse.Namespace, system: System) -> System:
    """The system again on the same data dir with plain's environment, for the gateway's plain answers."""
    system.stop()
    (Path(args.data_dir) / "run.json").unlink(missing_ok=True)  # the restart writes its own
    saved = dict(os.environ)
    os.environ.update(OFF)
    try:
        plain = System(args)
        plain.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return plain


def pin(system: System) -> dict:
    """--pin: the embedder's processes on the first CPU, the run's others (this one too) on the rest. Each thread is
    set (affinity is per thread); threads and processes started later inherit their parent's (PostgreSQL's
    backends the postmaster's)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("bench: --pin needs at least two CPUs")
    model, rest = {cpus[0]}, set(cpus[1:])
    launcher = psutil.Process(system.process.pid)
    tree = [launcher, *launcher.children(recursive=True)]
    embedder: set[int] = set()
    for process in tree:
        with contextlib.suppress(psutil.Error):  # one that ended meanwhile
            if "memento_embedder" in process.cmdline():  # python -m memento_embedder
                embedder |= {process.pid, *(child.pid for child in process.children(recursive=True))}
    if not embedder:
        raise SystemExit("bench: --pin found no embedder process under the launcher")
    for process in [*tree, psutil.Process()]:
        with contextlib.suppress(psutil.Error):
            for thread in process.threads():
                with contextlib.suppress(OSError):  # a thread that ended meanwhile
                    os.sched_setaffinity(thread.id, model if process.pid in embedder else rest)
    return {"embedder_cpus": sorted(model), "other_cpus": sorted(rest), "embedder_processes": len(embedder)}


async def main_async(args: argparse.Namespace) -> dict:
    if not args.data_dir:
        args.data_dir = tempfile.mkdtemp(prefix="memento-relevance-latency-")
    data = json.loads(args.data.read_text())[: args.conversations]
    if args.workspace and len(data) > 1:
        raise SystemExit("bench: --workspace holds one conversation (--conversations 1)")
    asked = [(workspace_of(s, args.workspace), q) for s in data for q in questions(s)]
    sample_questions = {workspace_of(s, args.workspace): questions(s)[: args.sanity] for s in data}
    system = System(args)
    system.start()
    try:
        stored = await store_all(system, data, args.bulk, args.workspace)
        owner = system.owner_url()
        before = await store_facts(owner, list(stored))
        pinned = pin(system) if args.pin else None
        expected, got = {}, {}
        async with apps_on(system, args.control) as apps:
            first = {name: await app.ids(sample_questions) for name, app in apps.items()}
            measured = await alternate(apps, system, asked, args.rounds, args.warmup)
            by_corpus = None
            if args.corpus_queries:  # the bulk corpus's own vocabulary: what bench.run asks at a million
                worded = [(w, q) for w in stored for q in corpus_queries(args.corpus_queries, tag="rl-")]
                by_corpus = await alternate(apps, system, worded, args.rounds, warmup=10)
            # the gateway and the app asked at the same moment: one question's answer changed between the start and
            # the end of a trial run on a settled store (no row's updated_at moved), so moments are not compared
            if not args.control:  # the gateway runs the defaults
                expected["shipped"] = await gateway_ids(system, sample_questions)
                got["shipped"] = await apps["shipped"].ids(sample_questions)
        await asyncio.sleep(1.5)  # Postgres publishes a backend's index counters shortly after its transactions
        after = await store_facts(owner, list(stored))
        if not args.no_plain_check:
            system = await restart_plain(args, system)
            expected["plain"] = await gateway_ids(system, sample_questions)
            async with AsyncExitStack() as stack:
                got["plain"] = await (await App("plain", system, OFF).start(stack)).ids(sample_questions)
    finally:
        system.stop()
    sanity = {
        name: {"questions": len(flat(expected[name])), "same_ids_as_gateway": same(expected[name], got[name])}
        for name in expected
    }
    differ = len(flat(first["shipped"])) - same(first["shipped"], first["plain"])
    changed = len(flat(first["shipped"])) - same(first["shipped"], got["shipped"]) if "shipped" in got else None
    results = {
        "command": "python -m bench.relevance_latency " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "git": git_state(),
        "conversations": [s["sample_id"] for s in data],
        "store": stored,
        "pinned": pinned,
        **measured,
        "corpus_queries": by_corpus,
        "sanity": {
            **sanity,
            "sample_questions_where_shipped_and_plain_differ": differ,
            "sample_questions_whose_shipped_answer_changed_during_the_run": changed,
            "rows_updated_after_insert": after["updated"],
            "rows": after["rows"],
            "rows_with_thread": after["threaded"],
            "threads": after["threads"],
            "thread_index_scans_while_measuring": after["thread_index_scans"] - before["thread_index_scans"],
        },
    }
    return results


def table(results: dict) -> str:
    lines = [
        f"recall {{text}} (includeLinks false), {results['questions']} LoCoMo questions x {results['rounds']} rounds, "
        f"{results['calls_per_app']} calls per app, A B B A per question; memory-api in-process, query-embedding cache "
        "emptied before each call",
        "",
        *describe(results),
    ]
    if results.get("corpus_queries"):
        c = results["corpus_queries"]
        lines += [
            "",
            f"bench.corpus's questions (the bulk fragments' own vocabulary, as bench.run asks them): "
            f"{c['questions']} x {c['rounds']} rounds, {c['calls_per_app']} calls per app",
            "",
            *describe(c),
        ]
    if results.get("pinned"):
        p = results["pinned"]
        lines.append(f"pinned: the embedder ({p['embedder_processes']} processes) on CPU {p['embedder_cpus']}, every "
                     f"other process of the run on {p['other_cpus']}")  # fmt: skip
    s = results["sanity"]
    for name in ("shipped", "plain"):
        if name in s:
            lines.append(
                f"sanity {name}: {s[name]['same_ids_as_gateway']}/{s[name]['questions']} same ids as the gateway"
            )
    lines.append(
        f"sanity neighbours: {s['rows_with_thread']}/{s['rows']} rows with a thread ({s['threads']} threads); thread "
        f"index scanned {s['thread_index_scans_while_measuring']} times while measuring; shipped and plain differ on "
        f"{s['sample_questions_where_shipped_and_plain_differ']} of the sample questions"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=2, help="the first N LoCoMo conversations (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="times every question is asked, A B B A each time")
    parser.add_argument("--warmup", type=int, default=30, help="unmeasured questions first (A B B A each)")
    parser.add_argument("--sanity", type=int, default=3, help="questions per conversation checked against the gateway")
    parser.add_argument("--no-plain-check", action="store_true", help="skip the restart that checks plain's ids")
    parser.add_argument("--bulk", type=int, default=0, help="fragments bulk-loaded beside each conversation first")
    parser.add_argument(
        "--workspace",
        help="store and ask the conversation in this workspace (another bench's kept store: bench.run --n 1000000"
        " loads workspace 'bench', so --workspace bench --bulk 1000000 reuses it)",
    )
    parser.add_argument(
        "--corpus-queries", type=int, default=0, help="also N of bench.corpus's questions per workspace, alternating"
    )
    parser.add_argument("--data", type=Path, default=DATA, help="LoCoMo JSON (default ../shared/data/locomo-dev.json)")
    parser.add_argument("--data-dir", help="data dir for the system (default a fresh temporary one; reused if given)")
    parser.add_argument("--port", type=int, default=56447, help="gateway port of the started system")
    parser.add_argument("--control", action="store_true", help="plain's settings in both apps: the method's own noise")
    parser.add_argument("--pin", action="store_true", help="the embedder on a CPU of its own while measuring (Linux)")
    args = parser.parse_args()
    args.url, args.key = None, None  # System: always a started one (the apps need the store's URLs and secret)
    results = asyncio.run(main_async(args))
    print("\n" + table(results))
    save(results, "relevance-latency")
    ok = all(v["same_ids_as_gateway"] == v["questions"] for k, v in results["sanity"].items() if k in APPS)
    # under --control both apps run the same settings, so their answers must be the same
    differ = results["sanity"]["sample_questions_where_shipped_and_plain_differ"]
    if not ok or results["sanity"]["rows_with_thread"] == 0 or (args.control and differ):
        raise SystemExit("bench: a sanity check failed (see above): the figures may not measure what they claim")


if __name__ == "__main__":
    main()
