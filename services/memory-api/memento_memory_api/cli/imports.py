"""`memento import FILE`: a `memento export` file, the official MCP memory server's memory.jsonl (--from
mcp-memory) or a mem0 export (--from mem0) into a workspace. The file is read and checked whole first, then written
in one transaction with its outbox events (load.py), so the embedder makes the new memories searchable by meaning.
Into a fresh data dir too: its database and schema are made as `make run` makes them."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg

from memento_memory_api.cli import kinds, sources
from memento_memory_api.cli.load import Loader
from memento_memory_api.cli.system import System, checked_name, err, located, service_pool
from memento_memory_api.uow import Scope, UnitOfWorkFactory
from memento_shared import redis_client
from memento_shared.db.rls import set_system


def add_command(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "import",
        help="read a workspace export, an MCP memory server memory.jsonl or a mem0 export into a workspace",
        description="Import FILE into a workspace. Idempotent: importing the same file again adds nothing. Ids are"
        " kept unless another tenant's or workspace's row holds them; then they are remapped and every reference"
        " rewritten.",
    )
    parser.add_argument("file", metavar="FILE", type=Path)
    parser.add_argument("--tenant", default="default")
    parser.add_argument("--workspace", default="default")
    parser.add_argument("--from", dest="source", choices=sources.SOURCES, default="memento",
                        help="what FILE is (default: memento, a `memento export` file)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    tenant, workspace = checked_name(args.tenant, "--tenant"), checked_name(args.workspace, "--workspace")
    path = args.file.expanduser()
    if args.source == "memento":
        records = sources.read(path, args.source, 0)  # checked before any server is touched
    with located(create=True) as system:
        if args.source != "memento":
            records = sources.read(path, args.source, system.settings.memory_max_chars)
        counts = asyncio.run(load(system, tenant, workspace, records))
    summary = {k: counts[k] for k in sorted(counts)}
    if args.json:
        sys.stdout.write(json.dumps({"tenant": tenant, "workspace": workspace, "counts": summary}) + "\n")
    else:
        sys.stdout.write(f"imported {path} into {tenant}/{workspace}\n")
        for name, n in summary.items():
            sys.stdout.write(f"  {n:>7}  {name}\n")
    return 0


def _taken_in(pool: asyncpg.Pool) -> Callable[[str, str], Awaitable[bool]]:
    """Whether any tenant's row of a table holds an id (as the system principal: the import's own sees one tenant)."""

    async def taken(table: str, row_id: str) -> bool:
        async with pool.acquire() as conn, conn.transaction():
            await set_system(conn)
            return bool(await conn.fetchval(f"SELECT true FROM agent_memory.{table} WHERE id = $1", row_id))

    return taken


async def load(system: System, tenant: str, workspace: str, records: list[Any]) -> dict[str, int]:
    redis = redis_client.client(system.redis_url, timeout=system.settings.redis_timeout_s) if system.redis_url else None
    try:
        async with service_pool(system) as pool:
            async with UnitOfWorkFactory(pool)(Scope(tenant, workspace, "admin", "admin")) as uow:
                loader = Loader(uow, await kinds.columns(uow.conn), redis, taken=_taken_in(pool))
                counts = await loader.load(records)
    finally:
        if redis is not None:
            await redis.aclose()
    if not records:
        err("the file holds no rows")
    return dict(counts)
