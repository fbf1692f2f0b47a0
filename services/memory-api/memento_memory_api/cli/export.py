"""`memento export`: a workspace as JSON Lines, one row per line with its `kind` (kinds.py), after a header line.

One read-only REPEATABLE READ transaction under the workspace's principal (admin access: every agent namespace of
the workspace, nothing of any other): a consistent snapshot, taken while the system serves. Rows leave out their
tenant and workspace (the import names them) and their serial ids; vectors only with --vectors."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import asyncpg

from memento_memory_api.cli import kinds
from memento_memory_api.cli.progress import Progress
from memento_memory_api.cli.system import CliError, System, checked_name, err, located, service_pool
from memento_shared.db.rls import set_principal


def add_command(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "export",
        help="write a workspace to JSON Lines (every row of every dialect)",
        description="Write every row of a workspace (fragments with their versions and links, protocol and lifecycle"
        " rows, documents with their versions) as JSON Lines, one object per line with a 'kind' field.",
    )
    parser.add_argument("--tenant", default="default", help="the tenant (default: default, as `make run`'s key)")
    parser.add_argument("--workspace", default="default")
    parser.add_argument("--vectors", action="store_true", help="include the stored embedding vectors")
    parser.add_argument("-o", "--output", type=Path, help="the file to write (default: stdout); written 0600")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    tenant, workspace = checked_name(args.tenant, "--tenant"), checked_name(args.workspace, "--workspace")
    target = args.output.expanduser().resolve() if args.output else None
    if target is not None and target.is_dir():
        raise CliError(f"--output: {target} is a folder; name the file to write")
    with located() as system:
        if target is None:
            counts = asyncio.run(export(system, tenant, workspace, args.vectors, sys.stdout))
        else:
            partial = target.with_name(f".{target.name}.partial")
            partial.unlink(missing_ok=True)
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # memories: as private as the database
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    counts = asyncio.run(export(system, tenant, workspace, args.vectors, out))
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
    summary = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n) or "no rows"
    err(f"exported {tenant}/{workspace}: {summary}" + (f" to {target}" if target else ""))
    return 0


async def export(system: System, tenant: str, workspace: str, vectors: bool, out: IO[str]) -> dict[str, int]:
    async with service_pool(system) as pool, pool.acquire() as conn:
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            await set_principal(conn, tenant_id=tenant, workspace=workspace, agent_id="admin", access="admin")
            return await _write(conn, tenant, workspace, vectors, out)


async def _write(conn: asyncpg.Connection, tenant: str, workspace: str, vectors: bool, out: IO[str]) -> dict[str, int]:
    cols = await kinds.columns(conn)
    wanted = [k for k in kinds.KINDS if vectors or not k.vectors_only]
    scoped = "WHERE tenant_id = $1 AND workspace = $2"  # beside RLS, so the planner can use the scope indexes
    totals = {k.kind: await conn.fetchval(f"SELECT count(*) FROM agent_memory.{k.table} {scoped}", tenant, workspace)
              for k in wanted}  # fmt: skip
    header = {
        "kind": "header",
        "format": kinds.FORMAT,
        "version": kinds.VERSION,
        "tenant": tenant,
        "workspace": workspace,
        "exported_at": datetime.now(UTC).isoformat(),
        "vectors": vectors,
        "counts": totals,
    }
    out.write(json.dumps(header) + "\n")
    progress = Progress("exporting", sum(totals.values()))
    counts: dict[str, int] = {}
    for kind in wanted:
        row = "(to_jsonb(t) - $4::text[])"
        if "kind" in cols.writable[kind.table]:  # a document's own kind, renamed: `kind` names the line's kind
            row = f"({row} - 'kind' || jsonb_build_object('{kinds.OWN_KIND}', t.kind))"
        sql = (
            f"SELECT ({row} || jsonb_build_object('kind', $3::text))::text FROM"
            f" agent_memory.{kind.table} t {scoped} ORDER BY {kind.order}"
        )
        n = 0
        async for record in conn.cursor(sql, tenant, workspace, kind.kind, cols.dropped(kind, vectors), prefetch=500):
            out.write(record[0] + "\n")
            n += 1
            progress.step()
        counts[kind.kind] = n
    progress.close()
    return counts
