"""L1: one Redis set per (tenant, workspace, agent, keyword) holding fragment ids (seed 000 §4.1).

L1 only proposes candidate ids; rows are always read back from Postgres under RLS, so a stale or foreign
id in Redis can never surface what the caller may not see. Redis errors skip L1 (§9.1).
"""

from __future__ import annotations

import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


def key(tenant_id: str, workspace: str, agent_id: str, keyword: str) -> str:
    return f"memento:l1:{{{tenant_id}}}:{workspace}:{agent_id}:{keyword}"


async def index(
    redis: Redis | None, tenant_id: str, workspace: str, agent_id: str, fragment_id: str, keywords: list[str]
) -> None:
    if redis is None or not keywords:
        return
    try:
        async with redis.pipeline(transaction=False) as pipe:
            for keyword in keywords:
                pipe.sadd(key(tenant_id, workspace, agent_id, keyword), fragment_id)
            await pipe.execute()
    except (RedisError, OSError) as exc:
        log.warning("l1.index_failed", extra={"error_type": type(exc).__name__})


async def lookup(
    redis: Redis | None, tenant_id: str, workspace: str, agents: list[str], keywords: list[str]
) -> list[str] | None:
    """Ids holding every keyword, per visible agent namespace; None when L1 is unavailable."""
    if redis is None or not keywords:
        return None
    try:
        async with redis.pipeline(transaction=False) as pipe:
            for agent in agents:
                pipe.sinter([key(tenant_id, workspace, agent, k) for k in keywords])
            results = await pipe.execute()
    except (RedisError, OSError) as exc:
        log.warning("l1.lookup_failed", extra={"error_type": type(exc).__name__})
        return None
    ids: list[str] = []
    for members in results:
        ids.extend(m.decode() if isinstance(m, bytes) else m for m in members)
    return ids
