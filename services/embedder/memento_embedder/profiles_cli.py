"""`memento-embedder profiles list|switch ID|drop ID`: embedding profiles and the progress of a build.

`switch` starts building a standby profile again (for example to go back after a switch); the running
embedders pick it up within a few seconds and cut over when it is complete. `drop` removes a standby profile,
its vectors and its HNSW index. Reads DATABASE_URL like the services.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from memento_embedder import profiles
from memento_shared.db.pool import create_pool
from memento_shared.db.rls import set_system
from memento_shared.settings import cli_settings


def out(line: object = "") -> None:
    """A CLI's answer goes to stdout (logs go to stderr)."""
    sys.stdout.write(f"{line}\n")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="memento-embedder profiles")
    commands = parser.add_subparsers(dest="action", required=True)
    commands.add_parser("list", help="every profile, its status and build progress")
    switch = commands.add_parser("switch", help="build a standby profile and cut over to it")
    switch.add_argument("id")
    drop = commands.add_parser("drop", help="drop a standby profile with its vectors and index")
    drop.add_argument("id")
    args = parser.parse_args(argv)
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    pool = await create_pool(cli_settings(), "admin", max_size=1)
    try:
        async with pool.acquire() as conn, conn.transaction():
            await set_system(conn)
            if args.action == "list":
                return _print(await profiles.all_profiles(conn))
            row = await profiles.get(conn, args.id)
            if row is None:
                out(f"no embedding profile {args.id}")
                return 1
            if args.action == "switch":
                spec = profiles.ProfileSpec(row["provider"], row["model"], row["dimension"], row["base_url"])
                try:
                    await profiles.start_building(conn, spec)
                except ValueError as exc:
                    out(exc)
                    return 1
                out(f"building {args.id}; the embedders cut over when every fragment has a vector")
                return 0
            if row["status"] != "standby":
                out(f"{args.id} is {row['status']}; only a standby profile can be dropped")
                return 1
            removed = await profiles.drop(conn, args.id)
            out(f"dropped {args.id} and {removed} vector(s)")
            return 0
    finally:
        await pool.close()


def _print(rows: list[Any]) -> int:
    out(f"{'id':<40} {'status':<9} {'provider':<14} {'dim':>5}  progress")
    for r in rows:
        progress = ""
        if r["status"] == "building" and r["build_total"]:
            progress = f"{r['build_done']}/{r['build_total']} ({100 * r['build_done'] / r['build_total']:.0f}%)"
        out(f"{r['id']:<40} {r['status']:<9} {r['provider']:<14} {r['dimension']:>5}  {progress}")
    return 0
