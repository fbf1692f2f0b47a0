"""Percentiles, the targets table (SPEC.md "Performance" and the seeds' own), JSON results and the tables of
docs/benchmarks.md."""

from __future__ import annotations

import json
import re
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# where the scripts' tables live (the README held them until issue 49); tests/contract/test_docs.py checks its markers
BENCHMARKS_PAGE = ROOT / "docs" / "benchmarks.md"
# no line of README.md or docs/ is longer (tests/contract/test_docs.py); prose is wrapped at the code's 120 columns
LINE_LIMIT = 400
PROSE_COLUMNS = 120
CELL = re.compile(r"(?<!\\)\|")

# op -> (SPEC p95 target in ms or a rule, the seed's target as written). Rules: "embed+20", the query-embedding p95
# of the same run + 20 ms; "ping+10", the `ping` row's p95 at the same path and concurrency + 10 ms
TARGETS = {
    "ping": (None, "— (no tool: the floor under every row)"),
    "remember": (15.0, "500 ms incl. embedding (seed 002)"),
    "recall_keywords": (10.0, "L1 < 1 ms, L2 1–10 ms (seed 000 §4.6)"),
    "recall_keywords_2": (10.0, "L1 < 1 ms, L2 1–10 ms (seed 000 §4.6)"),
    "recall_text": ("embed+20", "200 ms incl. embedding (seed 002)"),
    "link": (10.0, "100 ms (seed 002)"),
    "amend": (10.0, "100 ms (seed 002)"),
    "context": ("model+20", "—"),  # it embeds nothing: 20 ms at one client (issue 46)
    "store_memory": ("embed+20", "500 ms incl. embedding (seed 002)"),
    "supersede_memory": ("ping+10", "100 ms (seed 002)"),
    "search_memories": ("embed+20", "200 ms (seed 002)"),
    "list_recent_memories": ("ping+10", "100 ms (seed 002)"),
}


# what the two model columns of a table mean (bench.floor)
MODEL_COLUMNS = (
    "`model p95`: the model alone on the exact texts the row's calls embedded, right after the row; `÷ model`: the "
    "row's ops/s as a share of the model's single-core throughput on those texts."
)


def model_p95(stats: dict) -> str:
    return str(stats.get("model_p95_ms", "—"))


def share(stats: dict) -> str:
    """The row's throughput as a share of the model's single-core throughput on its texts (bench.floor), or "—"."""
    if "model_throughput_per_s" not in stats:
        return "—"
    return f"{stats['throughput_per_s'] / stats['model_throughput_per_s']:.0%}"


def percentiles(latencies: list[float]) -> dict:
    if not latencies:
        return {}
    ordered = sorted(latencies)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {"count": len(ordered), "p50_ms": at(0.50), "p95_ms": at(0.95), "p99_ms": at(0.99)}


def target_ms(op: str, path: str, level: str, results: dict, stats: dict | None = None) -> float | None:
    return resolve_target(TARGETS[op][0], path, level, results, stats)


def resolve_target(
    target: float | str | None, path: str, level: str, results: dict, stats: dict | None = None
) -> float | None:
    """A p95 target in ms: a number as it is, or a rule read from the same run's results: "embed+20" (the query
    embedding's p95 + 20), "model+20" (the row's own texts' model p95 + 20, bench.floor), "ping+10"."""
    if target == "embed+20":
        return round(results["query_embedding"]["p95_ms"] + 20, 2)
    if target == "model+20":
        return round((stats or {}).get("model_p95_ms", 0.0) + 20, 2)
    if target == "ping+10":
        ping = results["latency"].get(f"ping|{path}|{level}")
        return None if ping is None else round(ping["p95_ms"] + 10, 2)
    return target


def rows(results: dict) -> list[dict]:
    out = []
    for key, stats in results["latency"].items():
        op, path, level = key.split("|")
        target = target_ms(op, path, level, results, stats)
        out.append(
            {
                "op": op,
                "path": path,
                "concurrency": level[1:],
                **stats,
                "target_ms": target,
                "meets": None if target is None else stats["p95_ms"] <= target,
                "seed": TARGETS[op][1],
            }
        )
    return out


def print_table(results: dict) -> None:
    print(
        f"\nMemento benchmark — {results['n']} fragments, {results['ops_per_level']} calls per row, "
        f"{results['machine']}"
    )
    print(
        f"query embedding (the model alone): p50 {results['query_embedding']['p50_ms']} ms, "
        f"p95 {results['query_embedding']['p95_ms']} ms"
    )
    header = (
        f"{'operation':20} {'path':10} {'c':>2} {'p50':>8} {'p95':>8} {'p99':>8} {'ops/s':>7} {'model p95':>9} "
        f"{'÷ model':>7}  {'SPEC p95':>9}  seed"
    )
    print(header)
    print("-" * len(header))
    for r in rows(results):
        target = "—" if r["target_ms"] is None else f"≤{r['target_ms']:g}{' ✓' if r['meets'] else ' ✗'}"
        print(
            f"{r['op']:20} {r['path']:10} {r['concurrency']:>2} {r['p50_ms']:>8} {r['p95_ms']:>8} {r['p99_ms']:>8} "
            f"{r['throughput_per_s']:>7} {model_p95(r):>9} {share(r):>7}  {target:>9}  {r['seed']}"
        )
    if shares := cores_text(results):
        print(shares)
    if results.get("memory_mb"):
        print("memory (PSS MB): " + ", ".join(f"{k} {v}" for k, v in results["memory_mb"].items()))
    if results.get("full_collections"):
        print("full GC collections since start: " + collections_text(results["full_collections"]))
    if results.get("embedding_lag"):
        lag = results["embedding_lag"]
        print(
            f"embedding lag (commit → vector written), {lag['embedded']} remembered fragments: p50 {lag['p50_ms']} ms,"
            f" p95 {lag['p95_ms']} ms, max {lag['max_ms']} ms"
        )


def markdown(results: dict) -> str:
    lines = [
        f"Latest: {results['n']:,} fragments, {results['ops_per_level']} calls per row, {results['machine']}, "
        f"every service on the same machine. Produced by `{results['command']}` "
        f"(`bench/results/{results['file']}`). Query embedding alone: p50 {results['query_embedding']['p50_ms']} ms, "
        f"p95 {results['query_embedding']['p95_ms']} ms. {MODEL_COLUMNS}",
        "",
        "| operation | path | clients | p50 ms | p95 ms | p99 ms | ops/s | model p95 ms | ÷ model | SPEC p95 | seed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows(results):
        target = "—" if r["target_ms"] is None else f"≤ {r['target_ms']:g} {'✓' if r['meets'] else '✗'}"
        lines.append(
            f"| {r['op']} | {r['path']} | {r['concurrency']} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} "
            f"| {r['throughput_per_s']} | {model_p95(r)} | {share(r)} | {target} | {r['seed']} |"
        )
    if shares := cores_text(results):
        lines += ["", shares]
    if results.get("embedding_lag"):
        lag = results["embedding_lag"]
        lines += [
            "",
            f"Embedding lag (commit → vector written) over the {lag['embedded']} fragments `remember` stored "
            f"in this run: p50 {lag['p50_ms']} ms, p95 {lag['p95_ms']} ms, max {lag['max_ms']} ms.",
        ]
    if results.get("memory_mb"):
        lines += ["", "Memory (PSS, MB): " + ", ".join(f"{k} {v}" for k, v in results["memory_mb"].items()) + "."]
    if results.get("full_collections"):
        lines += [
            "",
            "Full (generation 2) GC collections since each service started, startup's own included: "
            + collections_text(results["full_collections"])
            + ".",
        ]
    return "\n".join(lines)


def cores_text(results: dict) -> str:
    """Where the time of the rows that embed went at the highest concurrency: the cores each process used (the model
    runs in the embedder; 2 cores in all), beside the share of the model's own throughput the row reached."""
    top = max((int(k.rsplit("|c", 1)[1]) for k in results["latency"]), default=1)
    parts = []
    for key, stats in results["latency"].items():
        op, path, level = key.split("|")
        if level == f"c{top}" and "model_throughput_per_s" in stats and stats.get("cores"):
            used = ", ".join(f"{name} {cores}" for name, cores in sorted(stats["cores"].items(), key=lambda p: -p[1]))
            parts.append(f"{op} ({path}, {share(stats)} of the model's throughput): {used}")
    return (f"Cores used per process at {top} clients: " + "; ".join(parts) + ".") if parts else ""


def collections_text(collections: dict[str, dict]) -> str:
    return ", ".join(f"{name} {c['count']} ({c['total_ms']} ms in all)" for name, c in collections.items())


def replace_readme_block(name: str, markdown_text: str) -> bool:
    """Put `markdown_text` between docs/benchmarks.md's `<!-- bench:NAME:start/end -->` markers, shaped by
    `fit_lines`; False if they are absent. (The name is older than the page: the blocks were the README's.)"""
    page = BENCHMARKS_PAGE
    start, end = f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"
    text = page.read_text()
    if start not in text or end not in text:
        return False
    head, rest = text.split(start, 1)
    page.write_text(head + start + "\n" + fit_lines(markdown_text) + "\n" + end + rest.split(end, 1)[1])
    return True


def fit_lines(markdown_text: str) -> str:
    """The same markdown with every line within LINE_LIMIT: prose lines over PROSE_COLUMNS are wrapped (markdown
    renders a paragraph's line breaks as spaces), and a table with a row over the limit is written turned, its
    columns as rows (LoCoMo's per-conversation table has a column per method, ~900 characters a row)."""
    out: list[str] = []
    table: list[str] = []
    for line in [*markdown_text.split("\n"), ""]:
        if line.startswith("|"):
            table.append(line)
            continue
        if table:
            out += _turned(table) if max(map(len, table)) > LINE_LIMIT else table
            table = []
        out += _wrapped(line)
    return "\n".join(out[:-1])


def _wrapped(line: str) -> list[str]:
    if len(line) <= PROSE_COLUMNS:
        return [line]
    indent = "  " if line.startswith("- ") else ""
    return textwrap.wrap(line, PROSE_COLUMNS, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


def _turned(table: list[str]) -> list[str]:
    """A markdown table's rows as columns; the separator row (`|---|`) is left out and written anew."""
    rows = [[cell.strip() for cell in CELL.split(line.strip())[1:-1]] for line in table]
    rows = [rows[0], *rows[2:]]
    width = max(map(len, rows))
    columns = [[row[i] if i < len(row) else "" for row in rows] for i in range(width)]
    lines = ["| " + " | ".join(column) + " |" for column in columns]
    return [lines[0], "|" + "---|" * len(columns[0]), *lines[1:]]


def save(results: dict, prefix: str) -> Path:
    """`results` as bench/results/<prefix>-<timestamp>.json (its name also in results["file"]), said on stdout."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    results["file"] = path.name
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"\nbench: results written to {path.relative_to(ROOT)}")
    return path


def write_results(results: dict, update_readme: bool) -> Path:
    path = save(results, f"latency-{results['n']}")
    if update_readme:  # one README table per store size (10k and 1M); other sizes only write their JSON
        replace_readme_block(f"latency-{results['n']}", markdown(results))
    return path
