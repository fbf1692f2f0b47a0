"""Embedder event handlers: embed a fragment's content into the active profile, idempotently."""

from __future__ import annotations

from memento_shared.db.rls import set_system
from memento_shared.worker import Runtime


async def embed_fragment(envelope: dict, rt: Runtime) -> None:
    fragment_id = envelope["payload"]["fragment_id"]
    profile = rt.state["profile_id"]
    async with rt.pool.acquire() as conn, conn.transaction():
        await set_system(conn)
        row = await conn.fetchrow(
            "SELECT f.content, f.content_hash, e.content_hash AS embedded_hash FROM agent_memory.fragments f"
            " LEFT JOIN agent_memory.fragment_embeddings e ON e.fragment_id = f.id AND e.profile_id = $2"
            " WHERE f.id = $1",
            fragment_id,
            profile,
        )
    if row is None or row["embedded_hash"] == row["content_hash"]:
        return  # deleted since, or this content is already embedded: a re-delivered event is a no-op
    vector = await rt.state["batcher"].embed_document(row["content"])
    async with rt.pool.acquire() as conn, conn.transaction():
        await set_system(conn)
        # Written only if the content is still what was embedded; a concurrent amend re-embeds on its own event.
        await conn.execute(
            "INSERT INTO agent_memory.fragment_embeddings (fragment_id, profile_id, tenant_id, workspace, agent_id,"
            " content_hash, embedding) SELECT id, $2, tenant_id, workspace, agent_id, content_hash, $4"
            " FROM agent_memory.fragments WHERE id = $1 AND content_hash = $3"
            " ON CONFLICT (fragment_id, profile_id) DO UPDATE SET embedding = EXCLUDED.embedding,"
            " content_hash = EXCLUDED.content_hash, agent_id = EXCLUDED.agent_id, created_at = now()",
            fragment_id,
            profile,
            row["content_hash"],
            vector,
        )


HANDLERS = {
    "fragment.stored": embed_fragment,
    "fragment.amended": embed_fragment,
}
