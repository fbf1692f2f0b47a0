"""`memento search QUERY`, `memento show ID`, `memento forget ID`: a workspace's memories from a shell or a script.

search and forget run memory-api's own `recall` and `forget` handlers in this process (the same recall cascade,
the same delete with its L1 clean-up), acting in the workspace with admin access (every agent namespace);
show reads the row, its versions and links. All under row-level security as the service role. --json prints the
answer (or {"error": {...}}) as one JSON object on stdout; the exit code is 1 on an error."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import asyncpg

from memento_memory_api.cli.system import CliError, System, checked_name, located, service_pool
from memento_memory_api.uow import Scope, UnitOfWorkFactory
from memento_shared import redis_client
from memento_shared.db.rls import transaction_as
from memento_shared.errors import MementoError, not_found
from memento_shared.principal import SCOPES, Principal

if TYPE_CHECKING:
    from memento_memory_api.context import ToolContext

# what `show` reads besides fragments, in this order: one id names one row of one of them
_OTHER = (("document", "doc_items"), ("wm_item", "wm_items"), ("skip_entry", "skip_entries"),
          ("identity_snapshot", "identity_snapshots"))  # fmt: skip
_HIDDEN = ["tenant_id", "workspace", "tsv", "content_key", "embedding"]


def add_commands(subparsers: argparse._SubParsersAction[Any]) -> None:
    search = subparsers.add_parser("search", help="recall memories by text (keywords and meaning)")
    search.add_argument("query", metavar="QUERY")
    search.add_argument("--limit", type=int, default=10, help="at most this many memories (1-100; default 10)")
    search.add_argument("--include-superseded", action="store_true")
    show = subparsers.add_parser("show", help="one memory with its versions and links (or a document, item, ...)")
    show.add_argument("id", metavar="ID")
    forget = subparsers.add_parser("forget", help="delete one memory (anchors and permanent ones need --force)")
    forget.add_argument("id", metavar="ID")
    forget.add_argument("--force", action="store_true", help="also an anchor or a permanent-tier memory")
    for parser, handler in ((search, _search), (show, _show), (forget, _forget)):
        parser.add_argument("--tenant", default="default")
        parser.add_argument("--workspace", default="default")
        parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
        parser.set_defaults(handler=lambda args, handler=handler: _run(handler, args))


def _run(handler: Callable[..., Awaitable[tuple[Any, str]]], args: argparse.Namespace) -> int:
    tenant, workspace = checked_name(args.tenant, "--tenant"), checked_name(args.workspace, "--workspace")
    try:
        with located() as system:
            answer, text = asyncio.run(handler(system, tenant, workspace, args))
    except MementoError as exc:
        if not args.json:
            raise CliError(exc.message) from None
        _print(exc.to_body())
        return 1
    if args.json:
        _print(answer)
    else:
        sys.stdout.write(text)
    return 0


def _print(value: Any) -> None:
    sys.stdout.write(json.dumps(value, default=str, ensure_ascii=False) + "\n")


@contextlib.asynccontextmanager
async def _context(system: System, tenant: str, workspace: str) -> AsyncIterator[ToolContext]:
    """What memory-api gives a handler, for the workspace with admin access (a signed principal is only needed to
    cross the process boundary; this is the process)."""
    # imported here: the tools and their clients are heavy, and `memento-admin` loads this module too
    from memento_memory_api import tools  # noqa: F401  (binds the handlers)
    from memento_memory_api.access import AccessRecorder
    from memento_memory_api.app import load_active_profile
    from memento_memory_api.context import ToolContext
    from memento_memory_api.embedding_client import EmbeddingClient
    from memento_shared.consolidation import utility_half_life_days

    settings = system.settings
    redis = redis_client.client(system.redis_url, timeout=settings.redis_timeout_s) if system.redis_url else None
    async with service_pool(system) as pool:
        embedder = EmbeddingClient(settings.embedder_url)
        access = AccessRecorder(pool, utility_half_life_days(settings))
        access.start()
        try:
            yield ToolContext(
                principal=Principal(tenant_id=tenant, scopes=SCOPES, workspace=workspace, subject="memento-cli"),
                scope=Scope(tenant, workspace, "admin", "admin"),
                uow=UnitOfWorkFactory(pool),
                redis=redis,
                embedder=embedder,
                profile=await load_active_profile(pool),
                settings=settings,
                access=access,
            )
        finally:
            await access.stop()
            await embedder.aclose()
            if redis is not None:
                await redis.aclose()


async def _search(system: System, tenant: str, workspace: str, args: argparse.Namespace) -> tuple[Any, str]:
    from memento_memory_api.tools.registry import HANDLERS
    from memento_shared.tools.registry import TOOLS

    if not 1 <= args.limit <= 100:
        raise CliError("--limit: must be between 1 and 100")
    arguments = {"text": args.query, "includeLinks": False, "tokenBudget": 100_000, "pageSize": args.limit,
                 "includeSuperseded": args.include_superseded}  # fmt: skip
    async with _context(system, tenant, workspace) as ctx:
        answer = await HANDLERS["recall"](ctx, TOOLS["recall"].parse(arguments))
    found = answer.get("fragments", [])
    lines = [f"{f['id']}  {f.get('type', '')}  {f.get('topic', '')}: {_one_line(f.get('content', ''))}" for f in found]
    return answer, "".join(f"{line}\n" for line in lines) or "no memories found\n"


async def _forget(system: System, tenant: str, workspace: str, args: argparse.Namespace) -> tuple[Any, str]:
    from memento_memory_api.tools.registry import HANDLERS
    from memento_shared.tools.registry import TOOLS

    async with _context(system, tenant, workspace) as ctx:
        try:
            answer = await HANDLERS["forget"](ctx, TOOLS["forget"].parse({"id": args.id, "force": args.force}))
        except MementoError as exc:
            if exc.field != "force":
                raise
            message = f"{args.id} is an anchor or permanent-tier memory; pass --force to delete it"
            raise MementoError(exc.code, message, field="force") from None
    return answer, f"forgot {args.id}\n"


async def _show(system: System, tenant: str, workspace: str, args: argparse.Namespace) -> tuple[Any, str]:
    async with service_pool(system) as pool, pool.acquire() as conn:
        async with transaction_as(conn, tenant_id=tenant, workspace=workspace, agent_id="admin", access="admin"):
            found = await _row(conn, "fragments", args.id)
            if found is not None:
                answer = {"kind": "fragment", "row": found, **await _fragment_extras(conn, args.id)}
            else:
                answer = None
                for kind, table in _OTHER:
                    found = await _row(conn, table, args.id)
                    if found is not None:
                        answer = {"kind": kind, "row": found}
                        if kind == "document":
                            answer["versions"] = await _rows(
                                conn,
                                "SELECT version_num, content_hash, commit_id, created_at, content FROM"
                                " agent_memory.doc_versions WHERE item_id = $1 ORDER BY version_num",
                                args.id,
                            )
                        break
    if answer is None:
        raise not_found(f"memory {args.id!r}")
    return answer, _describe(answer)


async def _row(conn: asyncpg.Connection, table: str, row_id: str) -> dict[str, Any] | None:
    text = await conn.fetchval(
        f"SELECT (to_jsonb(t) - $2::text[])::text FROM agent_memory.{table} t WHERE id = $1", row_id, _HIDDEN
    )
    return json.loads(text) if text else None


async def _rows(conn: asyncpg.Connection, sql: str, *params: Any) -> list[dict[str, Any]]:
    return [json.loads(r[0]) for r in await conn.fetch(f"SELECT to_jsonb(q)::text FROM ({sql}) q", *params)]


async def _fragment_extras(conn: asyncpg.Connection, fragment_id: str) -> dict[str, Any]:
    versions = await _rows(
        conn,
        "SELECT content, topic, keywords, type, importance, amended_at, amended_by FROM agent_memory.fragment_versions"
        " WHERE fragment_id = $1 ORDER BY amended_at, id",
        fragment_id,
    )
    links = await _rows(
        conn,
        "SELECT from_id, to_id, relation_type, agent_id, created_at FROM agent_memory.fragment_links"
        " WHERE from_id = $1 OR to_id = $1 ORDER BY created_at, id",
        fragment_id,
    )
    return {"versions": versions, "links": links}


def _one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _describe(answer: dict[str, Any]) -> str:
    row = answer["row"]
    lines = [f"{answer['kind']} {row['id']}"]
    lines += [f"  {key}: {value}" for key, value in row.items() if key != "id"]
    for version in answer.get("versions", []):
        when = version.get("amended_at") or version.get("created_at")
        label = f"version {version['version_num']}" if "version_num" in version else "earlier version"
        lines.append(f"  {label} ({when}): {_one_line(version.get('content', ''))}")
    for link in answer.get("links", []):
        lines.append(f"  link: {link['from_id']} -{link['relation_type']}-> {link['to_id']}")
    return "".join(f"{line}\n" for line in lines)
