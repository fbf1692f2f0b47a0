"""The L1 keyword index's Redis layout, shared by memory-api (writes, reads, rebuild) and the consolidator
(expiry): one set per (tenant, workspace, agent, keyword) of fragment ids, plus a marker that says the index is
complete. If Redis loses its data the marker goes with it, and memory-api rebuilds from Postgres."""

from __future__ import annotations

READY_KEY = "memento:l1:ready"
REBUILD_LOCK = "memento:l1:rebuilding"


def key(tenant_id: str, workspace: str, agent_id: str, keyword: str) -> str:
    return f"memento:l1:{{{tenant_id}}}:{workspace}:{agent_id}:{keyword}"


async def remove(redis, tenant_id: str, workspace: str, agent_id: str, fragment_id: str, keywords: list[str]) -> None:
    """Drop one fragment from its keyword sets (forget, amend, expiry). Callers treat Redis errors as non-fatal."""
    if redis is None or not keywords:
        return
    async with redis.pipeline(transaction=False) as pipe:
        for keyword in keywords:
            pipe.srem(key(tenant_id, workspace, agent_id, keyword), fragment_id)
        await pipe.execute()
