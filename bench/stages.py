"""Where a row's time goes, from the Server-Timing header memory-api puts on every tool call (and the gateway relays
on its JSON answers, adding `gateway`): docs/operations.md "Where one call's time went".

Each measured call keeps what its client waited (`observed`) beside the header's figures; a row then shows, per
stage, the median and p95 over its calls, and two remainders: `other`, memory-api's own work (its `total` minus its
stages), and `hop`, what the client waited beyond memory-api's `total` (client, network and, through the gateway,
the gateway's own handling: `gateway` minus `total` of it).
"""

from __future__ import annotations

from typing import Any

import httpx

from bench.report import percentiles

HEADER = "server-timing"
STAGES = ("embed", "fresh", "pool", "db")
COLUMNS = ("observed", "total", *STAGES, "other", "hop")  # the table's, in order


def parse(header: str | None) -> dict[str, float] | None:
    """`name;dur=ms, ...` as {name: ms}; None without a header."""
    if not header:
        return None
    figures = {}
    for part in header.split(","):
        name, _, rest = part.strip().partition(";")
        if rest.startswith("dur="):
            figures[name] = float(rest[4:])
    return figures


class LastTiming:
    """The Server-Timing of the last response an httpx client received that had one (an MCP client's tool call: the
    session's other requests carry none). A client makes one call at a time here, so it is that call's."""

    def __init__(self) -> None:
        self.header: str | None = None

    def attach(self, client: httpx.AsyncClient) -> httpx.AsyncClient:
        client.event_hooks["response"] = [*client.event_hooks["response"], self._seen]
        return client

    async def _seen(self, response: httpx.Response) -> None:
        if HEADER in response.headers:
            self.header = response.headers[HEADER]

    def take(self) -> str | None:
        header, self.header = self.header, None
        return header


def summary(calls: list[tuple[float, str | None]]) -> dict[str, Any]:
    """Per column, p50 and p95 in ms over the calls that carried a header: (observed seconds, header) each."""
    rows = []
    for observed, header in calls:
        figures = parse(header)
        if figures is None or "total" not in figures:
            continue
        row = {"observed": observed * 1000, "total": figures["total"], **{s: figures.get(s, 0.0) for s in STAGES}}
        row["other"] = row["total"] - sum(row[s] for s in STAGES)
        row["hop"] = row["observed"] - row["total"]
        if "gateway" in figures:
            row["gateway_own"] = figures["gateway"] - figures["total"]
        rows.append(row)
    if not rows:
        return {}
    out: dict[str, Any] = {"calls": len(rows), "untimed_calls": len(calls) - len(rows)}
    for column in [*COLUMNS, *(["gateway_own"] if "gateway_own" in rows[0] else [])]:
        stats = percentiles([r[column] / 1000 for r in rows if column in r])
        out[column] = {"p50_ms": round(stats["p50_ms"], 1), "p95_ms": round(stats["p95_ms"], 1)}
    return out


def cells(stages: dict[str, Any]) -> list[str]:
    """A row's COLUMNS as `p50 / p95` cells."""
    return [f"{stages[c]['p50_ms']:g} / {stages[c]['p95_ms']:g}" for c in COLUMNS]


def table_lines(rows: list[tuple[str, str, str, dict[str, Any]]]) -> list[str]:
    """A markdown table of (operation, path, clients, summary) rows."""
    lines = [
        "| operation | path | clients | calls | " + " | ".join(f"{c} ms" for c in COLUMNS) + " |",
        "|---|---|---|---|" + "---|" * len(COLUMNS),
    ]
    for op, path, clients, stages in rows:
        lines.append(f"| {op} | {path} | {clients} | {stages['calls']} | " + " | ".join(cells(stages)) + " |")
    return lines
