"""The capacity model: cores, memory and shards for 1k / 10k / 100k active agents, from the repository's own figures.

    python -m bench.capacity                       # print the tables
    python -m bench.capacity --write-docs          # and refresh the block in docs/scaling.md
    python -m bench.capacity --calls-per-minute 12 --mix remember=0.5,recall_text=0.5 --fragments-per-agent 5000

Inputs, each the newest of its kind (the table says which file):
- bench/results/storage-10000-*.json (bench.storage): bytes per fragment in rows, B-tree/GIN indexes, HNSW, L1;
- bench/results/remember-load-*.json (bench.worker_remember_load): CPU per acknowledged remember in every process,
  the model's documents per second, each service's memory;
- bench/results/latency-10000-*.json (bench.run): the query embedding's time (the model per recall by text), memory;
- bench/data/cpu_per_call.json: CPU per call of the other tools, as bench/README.md reports them, with sources.

The model is linear: CPU per call times calls per second, over a target utilisation; memory per replica times
replicas; data per fragment times fragments. It holds while the figures measured on two cores at 10k fragments hold
per call at scale, which is not proven here (docs/scaling.md says what is not).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from bench.report import fit_lines

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CPU_FILE = ROOT / "bench" / "data" / "cpu_per_call.json"
DOCS = ROOT / "docs" / "scaling.md"
BLOCK = re.compile(r"(<!-- capacity:begin -->\n).*?(<!-- capacity:end -->)", re.S)
COMPONENTS = ("gateway", "memory_api", "postgres", "valkey", "workers", "model")
AGENTS = (1_000, 10_000, 100_000)
# sizing rules, stated in the output: a Citus worker of NODE_CORES cores and NODE_RAM_GB of memory, half of it for
# the cache that should hold every index; a Valkey primary uses one core for commands and holds VALKEY_GB
NODE_CORES, NODE_RAM_GB = 16, 64
VALKEY_CORE, VALKEY_GB = 0.8, 25
SERVICE_CORES_PER_REPLICA = 1.0  # gateway and memory-api replicas, as the HPAs scale them on CPU
MIN_REPLICAS = 2


def newest(pattern: str) -> Path:
    found = sorted(RESULTS.glob(pattern), key=lambda p: p.name.rsplit("-", 2)[-2:])
    if not found:
        raise SystemExit(f"bench.capacity: no bench/results/{pattern}; run the benchmark that writes it")
    return found[-1]


@dataclass
class Inputs:
    per_fragment: dict[str, float]  # rows, indexes, hnsw, l1_redis (bytes)
    cpu: dict[str, dict[str, float]]  # tool -> component -> ms per call
    assumed: dict[str, list[str]]  # tool -> components whose figure was not measured for that tool
    memory_mb: dict[str, float]  # PSS per service process
    model_ms_per_token: dict[str, float]  # document, query
    sources: dict[str, str]


def load_inputs() -> Inputs:
    storage_path, remember_path, latency_path = (
        newest("storage-10000-*.json"),
        newest("remember-load-*.json"),
        newest("latency-10000-*.json"),
    )
    storage = json.loads(storage_path.read_text())
    remember = json.loads(remember_path.read_text())
    latency = json.loads(latency_path.read_text())
    table = json.loads(CPU_FILE.read_text())["tools"]
    per_remember = remember["cpu_ms_per_remember"]
    document_ms = 1000 / remember["model_documents_per_s"]
    query_ms = latency["query_embedding"]["p50_ms"]
    cpu = {
        "remember": {
            "gateway": per_remember["gateway"],
            "memory_api": per_remember["memory_api"],
            "postgres": per_remember["postgres"],
            "valkey": per_remember["valkey-server"],
            "workers": per_remember["embedder"] + per_remember["evaluator"] + per_remember["consolidator"],
            "model": document_ms,
        }
    }
    assumed: dict[str, list[str]] = {"remember": []}
    for tool, row in table.items():
        cpu[tool], assumed[tool] = {}, []
        for part in COMPONENTS[:-1]:
            value = row[part]
            if value is None:  # not measured for this tool: the keyword recall's figure stands in
                value = table["recall_keywords"][part]
                assumed[tool].append(part)
            cpu[tool][part] = float(value)
        cpu[tool]["model"] = query_ms if row["model_ms"] == "query_embedding" else float(row["model_ms"])
    from bench.corpus import fragments, queries
    from memento_shared.text.tokenizer import count_tokens

    document_tokens = statistics.mean(count_tokens(f["content"]) for f in fragments(2000))
    query_tokens = statistics.mean(count_tokens(q) for q in queries(500))
    memory = {**latency["memory_mb"]}
    return Inputs(
        per_fragment=storage["bytes_per_fragment"],
        cpu=cpu,
        assumed=assumed,
        memory_mb=memory,
        model_ms_per_token={"document": document_ms / document_tokens, "query": query_ms / query_tokens},
        sources={
            "storage": storage_path.name,
            "remember": remember_path.name,
            "latency": latency_path.name,
            "cpu": str(CPU_FILE.relative_to(ROOT)),
            "document_tokens": f"{document_tokens:.1f}",
            "query_tokens": f"{query_tokens:.1f}",
            "document_ms": f"{document_ms:.1f}",
            "query_ms": f"{query_ms:.1f}",
        },
    )


def parse_mix(text: str) -> dict[str, float]:
    mix = {k: float(v) for k, v in (part.split("=") for part in text.split(","))}
    total = sum(mix.values())
    return {k: v / total for k, v in mix.items()}


def plan(inputs: Inputs, agents: int, args: argparse.Namespace) -> dict[str, float]:
    calls = agents * args.calls_per_minute / 60
    mix = parse_mix(args.mix)
    unknown = set(mix) - set(inputs.cpu)
    if unknown:
        raise SystemExit(f"bench.capacity: --mix: no CPU figures for {sorted(unknown)}; known: {sorted(inputs.cpu)}")
    cores = {c: calls * sum(share * inputs.cpu[t][c] for t, share in mix.items()) / 1000 / args.utilisation
             for c in COMPONENTS}  # fmt: skip
    fragments = agents * args.fragments_per_agent
    data = {k: fragments * inputs.per_fragment[k] / 2**30 for k in ("rows", "indexes", "hnsw", "l1_redis")}
    replicas = {
        "gateway": max(MIN_REPLICAS, math.ceil(cores["gateway"] / SERVICE_CORES_PER_REPLICA)),
        "memory_api": max(MIN_REPLICAS, math.ceil(cores["memory_api"] / SERVICE_CORES_PER_REPLICA)),
        "workers": max(1, math.ceil((cores["workers"] + cores["model"]) / 2)),  # a worker pod: 2 cores (OMP)
    }
    service_gb = (
        replicas["gateway"] * inputs.memory_mb["gateway"]
        + replicas["memory_api"] * inputs.memory_mb["memory_api"]
        + replicas["workers"] * (inputs.memory_mb["embedder"] + inputs.memory_mb["evaluator"])
    ) / 1024
    cached = data["indexes"] + data["hnsw"]  # what should stay in memory for searches to stay fast
    nodes = max(1, math.ceil(cores["postgres"] / NODE_CORES), math.ceil(cached / (NODE_RAM_GB / 2)))
    primaries = max(1, math.ceil(cores["valkey"] / VALKEY_CORE), math.ceil(data["l1_redis"] / VALKEY_GB))
    return {
        "agents": agents,
        "calls_per_s": calls,
        **{f"{c}_cores": v for c, v in cores.items()},
        **{f"{k}_gb": v for k, v in data.items()},
        "service_gb": service_gb,
        "gateway_replicas": replicas["gateway"],
        "memory_api_replicas": replicas["memory_api"],
        "worker_replicas": replicas["workers"],
        "postgres_nodes": nodes,
        "shard_count": max(32, 4 * nodes),
        "valkey_primaries": primaries,
    }


def markdown(inputs: Inputs, args: argparse.Namespace) -> str:
    rows = [plan(inputs, n, args) for n in args.agents]
    mix = ", ".join(f"{k} {v:.0%}" for k, v in parse_mix(args.mix).items())
    out = [
        f"Each active agent makes {args.calls_per_minute:g} calls a minute ({mix}) and keeps "
        f"{args.fragments_per_agent:,} fragments; cores are sized for {args.utilisation:.0%} utilisation. Generated by "
        "`python -m bench.capacity` from "
        f"`{inputs.sources['storage']}`, `{inputs.sources['remember']}`, `{inputs.sources['latency']}` and "
        f"`{inputs.sources['cpu']}`.",
        "",
        "| active agents | calls/s | gateway cores (replicas) | memory-api cores (replicas) | workers + model cores "
        "(pods) | Postgres cores | Valkey cores | service memory GB | rows / indexes / HNSW GB | L1 GB | Citus workers "
        "(shards) | Valkey primaries |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['agents']:,} | {r['calls_per_s']:,.0f} | {r['gateway_cores']:.1f} ({r['gateway_replicas']}) "
            f"| {r['memory_api_cores']:.1f} ({r['memory_api_replicas']}) "
            f"| {r['workers_cores'] + r['model_cores']:.1f} ({r['worker_replicas']}) | {r['postgres_cores']:.1f} "
            f"| {r['valkey_cores']:.1f} | {r['service_gb']:.1f} "
            f"| {r['rows_gb']:.1f} / {r['indexes_gb']:.1f} / {r['hnsw_gb']:.1f} | {r['l1_redis_gb']:.1f} "
            f"| {r['postgres_nodes']} ({r['shard_count']}) | {r['valkey_primaries']} |"
        )
    out += [
        "",
        "The figures it starts from (server side, per call, ms of CPU; * not measured for that tool, the keyword "
        "recall's figure stands in):",
        "",
        "| tool | gateway | memory-api | Postgres | Valkey | workers | model |",
        "|---|---|---|---|---|---|---|",
    ]
    for tool, row in inputs.cpu.items():
        cells = [f"{row[c]:.1f}{'*' if c in inputs.assumed[tool] else ''}" for c in COMPONENTS]
        out.append(f"| {tool} | " + " | ".join(cells) + " |")
    pf = inputs.per_fragment
    out += [
        "",
        f"Bytes per fragment at 10k (`{inputs.sources['storage']}`): rows {pf['rows']:,.0f}, B-tree/GIN indexes "
        f"{pf['indexes']:,.0f}, HNSW {pf['hnsw']:,.0f}, L1 in Valkey {pf['l1_redis']:,.0f}. Model time per token: "
        f"{inputs.model_ms_per_token['document']:.2f} ms embedding a stored fragment ({inputs.sources['document_ms']} "
        f"ms per fragment of {inputs.sources['document_tokens']} tokens on average), "
        f"{inputs.model_ms_per_token['query']:.2f} ms embedding a question ({inputs.sources['query_ms']} ms per "
        f"question of {inputs.sources['query_tokens']} tokens); tokens counted with the service's tokenizer on the "
        "bench corpus. Memory per process (PSS, MB): "
        + ", ".join(f"{k} {v:.0f}" for k, v in sorted(inputs.memory_mb.items()))
        + ".",
        "",
        f"Sizing rules: a gateway or memory-api replica per {SERVICE_CORES_PER_REPLICA:g} core (at least "
        f"{MIN_REPLICAS}), a worker pod per 2 cores; a Citus worker of {NODE_CORES} cores and {NODE_RAM_GB} GB, half "
        "of it cache that should hold every index and HNSW graph, shards 4 per worker (at least 32); a Valkey primary "
        f"per {VALKEY_CORE:g} core of commands or {VALKEY_GB} GB of L1.",
    ]
    return fit_lines("\n".join(out))  # the docs' line limit (bench/report.py)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=lambda s: [int(x) for x in s.split(",")], default=list(AGENTS))
    parser.add_argument("--calls-per-minute", type=float, default=6.0, help="tool calls per active agent a minute")
    parser.add_argument("--mix", default="remember=0.3,recall_text=0.4,recall_keywords=0.3")
    parser.add_argument("--fragments-per-agent", type=int, default=2000)
    parser.add_argument("--utilisation", type=float, default=0.6, help="target CPU utilisation")
    parser.add_argument("--write-docs", action="store_true", help="refresh the block in docs/scaling.md")
    args = parser.parse_args()
    text = markdown(load_inputs(), args)
    print(text)
    if args.write_docs:
        page = DOCS.read_text()
        if not BLOCK.search(page):
            raise SystemExit("bench.capacity: docs/scaling.md has no <!-- capacity:begin --> block")
        DOCS.write_text(BLOCK.sub(lambda m: m[1] + text + "\n" + m[2], page))
        print(f"\nbench.capacity: {DOCS.relative_to(ROOT)} refreshed")


if __name__ == "__main__":
    main()
