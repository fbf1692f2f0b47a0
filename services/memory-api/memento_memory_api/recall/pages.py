"""recall's pages: the first page's search keeps its whole ordered answer (ids only) in Redis for a while, and each
cursor names that snapshot and a position in it. Later pages read their ids from the snapshot and the rows as they
are now (through the same filters and row-level security), so fragments written meanwhile never shift a page: no
repeats, no gaps; a fragment deleted meanwhile is simply not there.

A snapshot belongs to the principal that made it (tenant, workspace, agent): a cursor shown to anyone else is
refused as unknown, and so is one whose snapshot has expired or was dropped (a principal keeps MAX_OPEN at once)."""

from __future__ import annotations

import base64
import json
import secrets
import time
from typing import Any

from redis.exceptions import RedisError

from memento_memory_api.context import ToolContext
from memento_shared import keys
from memento_shared.errors import invalid, unavailable

SNAPSHOT_TTL_S = 15 * 60
MAX_SNAPSHOT = 1000  # ids a snapshot keeps: the first page's search looks this far
MAX_OPEN = 20  # snapshots a principal keeps at once: opening one more drops its oldest (~30 KB each in Redis)


def _key(ctx: ToolContext, token: str) -> str:
    return keys.page_snapshot(ctx.scope.tenant_id, token)


def _owner(ctx: ToolContext) -> list[str]:
    return [ctx.scope.tenant_id, ctx.scope.workspace, ctx.scope.agent_id]


def _open_key(ctx: ToolContext) -> str:
    """The principal's open snapshots, by when each was opened."""
    return keys.open_snapshots(ctx.scope.tenant_id, ctx.scope.workspace, ctx.scope.agent_id)


def encode(token: str, offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([token, offset]).encode()).decode().rstrip("=")


async def open_snapshot(ctx: ToolContext, ids: list[str], options: dict[str, Any]) -> str:
    """Keep `ids` (the whole ordered answer) and the first page's `options`; returns the snapshot's token."""
    if ctx.redis is None:
        raise unavailable("paging needs Redis, which is unavailable")
    token = secrets.token_urlsafe(16)
    body = {"owner": _owner(ctx), "ids": ids[:MAX_SNAPSHOT], "options": options}
    opened = _open_key(ctx)
    try:
        # not MULTI (a cluster runs none): two opens racing at the cap may keep one snapshot more for its TTL
        async with ctx.redis.pipeline(transaction=False) as pipe:
            pipe.set(_key(ctx, token), json.dumps(body), ex=SNAPSHOT_TTL_S)
            pipe.zadd(opened, {token: time.time()})
            pipe.zrange(opened, 0, -(MAX_OPEN + 1))  # the oldest past the cap
            pipe.zremrangebyrank(opened, 0, -(MAX_OPEN + 1))
            pipe.expire(opened, SNAPSHOT_TTL_S)
            dropped = (await pipe.execute())[2]
        if dropped:
            await ctx.redis.delete(*(_key(ctx, t.decode() if isinstance(t, bytes) else t) for t in dropped))
    except (RedisError, OSError) as exc:
        raise unavailable("paging needs Redis, which did not answer") from exc
    return token


async def read(ctx: ToolContext, cursor: str) -> tuple[str, int, list[str], dict[str, Any]]:
    """The cursor's snapshot token, position, ids and first-page options; an unknown, expired or foreign cursor is
    INVALID_PARAMETER (the three look alike, so a cursor tells nothing about another caller's search)."""
    try:
        token, offset = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(token, str) or not isinstance(offset, int) or offset < 0:
            raise ValueError
    except (ValueError, TypeError):
        raise invalid("cursor", "is not a cursor recall returned") from None
    if ctx.redis is None:
        raise unavailable("paging needs Redis, which is unavailable")
    try:
        raw = await ctx.redis.get(_key(ctx, token))
    except (RedisError, OSError) as exc:
        raise unavailable("paging needs Redis, which did not answer") from exc
    body = json.loads(raw) if raw else None
    if body is None or body["owner"] != _owner(ctx):
        raise invalid("cursor", "is unknown or has expired; start again without a cursor")
    return token, offset, body["ids"], body["options"]
