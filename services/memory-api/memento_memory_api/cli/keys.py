"""`memento-admin keys create|list|revoke`: per-tenant API keys for MCP clients.

A key is bound to a tenant, the workspaces and agents it may act in, scopes (read, write, admin) and tool profiles.
`create` prints the key once: only its SHA-256 is stored. Revoking takes effect on every gateway within 30 s
(they remember a verified key that long). Reads DATABASE_URL like the services.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from memento_memory_api.repositories import api_keys
from memento_shared.db.pool import create_pool
from memento_shared.db.rls import set_system
from memento_shared.principal import SCOPES
from memento_shared.settings import cli_settings
from memento_shared.tools.registry import PROFILES

NAME = re.compile(r"^[A-Za-z0-9_.*-]{1,64}$")


def out(line: object = "") -> None:
    sys.stdout.write(f"{line}\n")


def _name(value: str) -> str:
    if not NAME.match(value):
        raise argparse.ArgumentTypeError(f"{value!r}: 1-64 letters, digits, '_', '.', '-' (or '*')")
    return value


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser("keys", help="create, list and revoke per-tenant API keys")
    commands = parser.add_subparsers(dest="action", required=True)
    create = commands.add_parser("create", help="a new key (printed once)")
    create.add_argument("--tenant", required=True, type=_name)
    create.add_argument("--name", default="", help="what the key is for")
    create.add_argument("--workspace", action="append", type=_name, help="allowed workspace (repeat; default all)")
    create.add_argument("--agent", action="append", type=_name, help="allowed agent id (repeat; default all)")
    create.add_argument("--scope", action="append", choices=SCOPES, help="repeat; default read and write")
    create.add_argument("--profile", action="append", choices=(*PROFILES, "all"), help="bound tool profile (repeat)")
    create.add_argument("--expires-days", type=int, help="the key stops working after this many days")
    create.set_defaults(handler=lambda args: asyncio.run(_create(args)))
    listing = commands.add_parser("list", help="keys and what they are bound to (never the keys themselves)")
    listing.add_argument("--tenant", type=_name)
    listing.add_argument("--all", action="store_true", help="include revoked keys")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=lambda args: asyncio.run(_list(args)))
    revoke = commands.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("id")
    revoke.set_defaults(handler=lambda args: asyncio.run(_revoke(args)))


async def _system(work: Callable[[Any], Awaitable[Any]]) -> Any:
    pool = await create_pool(cli_settings(), "admin", max_size=1)
    try:
        async with pool.acquire() as conn, conn.transaction():
            await set_system(conn)
            return await work(conn)
    finally:
        await pool.close()


async def _create(args: argparse.Namespace) -> int:
    expires = datetime.now(UTC) + timedelta(days=args.expires_days) if args.expires_days else None
    new = await _system(
        lambda conn: api_keys.insert(
            conn,
            tenant_id=args.tenant,
            name=args.name,
            workspaces=args.workspace or ["*"],
            agents=args.agent or ["*"],
            scopes=sorted(set(args.scope or ["read", "write"])),
            profiles=args.profile or [],
            expires_at=expires,
        )
    )
    out(f"id:  {new.id}")
    out(f"key: {new.key}")
    out("Store the key now: it is not shown again. Clients send it as 'Authorization: Bearer <key>'.")
    return 0


async def _list(args: argparse.Namespace) -> int:
    rows = await _system(lambda conn: api_keys.list_keys(conn, args.tenant, args.all))
    if args.json:
        out(json.dumps([dict(r) for r in rows], default=str, indent=2))
        return 0
    out(f"{'id':<16}  {'tenant':<16} {'scopes':<18} {'profiles':<16} {'state':<8} name")
    for r in rows:
        state = "revoked" if r["revoked_at"] else "expired" if _expired(r["expires_at"]) else "active"
        scopes, profiles = ",".join(r["scopes"]), ",".join(r["profiles"]) or "-"
        out(f"{r['id']:<16}  {r['tenant_id']:<16} {scopes:<18} {profiles:<16} {state:<8} {r['name']}")
    out(f"{len(rows)} key(s)")
    return 0


def _expired(expires_at: datetime | None) -> bool:
    return expires_at is not None and expires_at <= datetime.now(UTC)


async def _revoke(args: argparse.Namespace) -> int:
    if await _system(lambda conn: api_keys.revoke(conn, args.id)):
        out(f"revoked {args.id}")
        return 0
    out(f"no active key {args.id}")
    return 1
