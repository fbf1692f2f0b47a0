"""What `context` loaded into a session, so that recall's excludeSeen can leave it out: a Redis set per session,
kept as long as the session's working memory (SESSION_TTL_MINUTES after its last write)."""

from __future__ import annotations

from redis.exceptions import RedisError

from memento_memory_api.context import ToolContext
from memento_shared import keys
from memento_shared.errors import unavailable

_key = keys.seen  # (tenant, session id)


async def record(ctx: ToolContext, session_id: str, ids: list[str]) -> None:
    """Best effort: context still answers when Redis does not (excludeSeen then leaves out less)."""
    if not ids or ctx.redis is None:
        return
    key = _key(ctx.scope.tenant_id, session_id)
    try:
        async with ctx.redis.pipeline(transaction=False) as pipe:
            pipe.sadd(key, *ids)
            pipe.expire(key, ctx.settings.session_ttl_minutes * 60)
            await pipe.execute()
    except (RedisError, OSError):
        pass


async def ids(ctx: ToolContext, session_id: str) -> set[str]:
    if ctx.redis is None:
        raise unavailable("excludeSeen needs Redis, which is unavailable")
    try:
        members = await ctx.redis.smembers(_key(ctx.scope.tenant_id, session_id))
    except (RedisError, OSError) as exc:
        raise unavailable("excludeSeen needs Redis, which did not answer") from exc
    return {m.decode() if isinstance(m, bytes) else m for m in members}
