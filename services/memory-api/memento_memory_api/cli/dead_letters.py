"""`memento-admin dead-letters list|show|replay`: events a worker gave up on, with the error, and their replay.

Reads DATABASE_URL and REDIS_URL like the services. `replay` re-enqueues the original event on the queue that
failed it and marks the row replayed in the same transaction, so a failed enqueue leaves it open; if the replay
fails again, the worker opens the row again with the new error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Coroutine
from typing import Any

from memento_shared.db import dead_letters
from memento_shared.db.pool import create_pool
from memento_shared.db.rls import set_system
from memento_shared.enqueue import wake
from memento_shared.events import queue_key
from memento_shared.settings import cli_settings
from memento_shared.worker import create_queue_pool


def out(line: object = "") -> None:
    """A CLI's answer goes to stdout (logs go to stderr)."""
    sys.stdout.write(f"{line}\n")


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser("dead-letters", help="list, inspect and replay dead-lettered events")
    commands = parser.add_subparsers(dest="action", required=True)
    listing = commands.add_parser("list", help="open dead letters (oldest first)")
    listing.add_argument("--queue", help="only this worker queue (embedder, evaluator, consolidator)")
    listing.add_argument("--all", action="store_true", help="include replayed ones")
    listing.add_argument("--limit", type=int, default=100)
    listing.set_defaults(handler=lambda args: _run(_list(args)))
    show = commands.add_parser("show", help="one dead letter in full, as JSON")
    show.add_argument("id", type=int)
    show.set_defaults(handler=lambda args: _run(_show(args)))
    replay = commands.add_parser("replay", help="re-enqueue dead letters on their queue")
    target = replay.add_mutually_exclusive_group(required=True)
    target.add_argument("ids", type=int, nargs="*", default=[], help="dead letter ids")
    target.add_argument("--all-open", action="store_true", help="every open dead letter (with --queue: on it)")
    replay.add_argument("--queue")
    replay.set_defaults(handler=lambda args: _run(_replay(args)))


def _run(coro: Coroutine[Any, Any, int]) -> int:
    return asyncio.run(coro)


async def _list(args: argparse.Namespace) -> int:
    pool = await create_pool(cli_settings(), "admin", max_size=1)
    try:
        async with pool.acquire() as conn, conn.transaction():
            await set_system(conn)
            rows = await dead_letters.list_open(conn, queue=args.queue, include_replayed=args.all, limit=args.limit)
    finally:
        await pool.close()
    out(f"{'id':>6}  {'created_at':<25} {'queue':<12} {'event_type':<22} {'tries':>5}  {'replayed':<8} error")
    for r in rows:
        replayed = "yes" if r["replayed_at"] else "no"
        error = r["error"].splitlines()[0][:80] if r["error"] else ""
        out(
            f"{r['id']:>6}  {r['created_at'].isoformat(timespec='seconds'):<25} {r['queue']:<12}"
            f" {r['event_type']:<22} {r['attempts']:>5}  {replayed:<8} {error}"
        )
    out(f"{len(rows)} dead letter(s)")
    return 0


async def _show(args: argparse.Namespace) -> int:
    pool = await create_pool(cli_settings(), "admin", max_size=1)
    try:
        async with pool.acquire() as conn, conn.transaction():
            await set_system(conn)
            row = await dead_letters.get(conn, args.id)
    finally:
        await pool.close()
    if row is None:
        out(f"dead letter {args.id} not found")
        return 1
    out(json.dumps({k: row[k] for k in row.keys()}, default=str, indent=2))
    return 0


async def _replay(args: argparse.Namespace) -> int:
    settings = cli_settings()
    pool = await create_pool(settings, "admin", max_size=1)
    queue = await create_queue_pool(settings)
    replayed, missing = [], []
    try:
        ids = args.ids
        if args.all_open:
            async with pool.acquire() as conn, conn.transaction():
                await set_system(conn)
                ids = [r["id"] for r in await dead_letters.list_open(conn, queue=args.queue, limit=100_000)]
        for dead_letter_id in ids:
            async with pool.acquire() as conn, conn.transaction():
                await set_system(conn)
                row = await dead_letters.claim_replay(conn, dead_letter_id)
                if row is None:
                    missing.append(dead_letter_id)
                    continue
                await queue.enqueue_job(
                    "handle_event",
                    dead_letters.envelope_of(row),
                    _job_id=dead_letters.replay_job_id(row),
                    _queue_name=queue_key(row["queue"]),
                )
                await wake(queue, queue_key(row["queue"]))
            replayed.append(dead_letter_id)
    finally:
        await queue.aclose()
        await pool.close()
    out(f"replayed {len(replayed)}: {' '.join(map(str, replayed)) or '-'}")
    if missing:
        out(f"not found or already replayed: {' '.join(map(str, missing))}")
    return 0 if not missing else 1
