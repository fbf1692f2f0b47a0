"""The console's reads. Each runs in one transaction acting as the caller (row-level security decides what exists:
another tenant's id is simply not found) and names the tenant and workspace in its SQL for the planner, as the
repositories do. Searches go through the recall engine every dialect uses."""

from __future__ import annotations

from typing import Any

from memento_memory_api.console.plain import row, rows
from memento_memory_api.context import ToolContext
from memento_memory_api.recall import engine
from memento_memory_api.recall.filters import Filters
from memento_memory_api.repositories import api_keys, documents, working_memory
from memento_memory_api.repositories import fragments as repo
from memento_shared.errors import invalid, not_found

PAGE = 50
GRAPH_NODES = 40
LIST_COLUMNS = repo.F_COLUMNS + ", f.utility_score"
TRI_STATE = ("hide", "include", "only")  # superseded / expired: leave out (default), show too, show only those


def _tri(params: dict[str, Any], name: str) -> str:
    choice = params.get(name) or "hide"
    if choice not in TRI_STATE:
        raise invalid(name, f"one of {', '.join(TRI_STATE)}")
    return choice


def _text(params: dict[str, Any], name: str, limit: int = 200) -> str | None:
    given = params.get(name)
    if given in (None, ""):
        return None
    if not isinstance(given, str) or len(given) > limit:
        raise invalid(name, f"text of at most {limit} characters")
    return given.strip() or None


def _page(params: dict[str, Any]) -> int:
    given = params.get("page", 1)
    if not isinstance(given, int) or isinstance(given, bool) or not 1 <= given <= 10_000:
        raise invalid("page", "a whole number from 1")
    return given


def _tags(params: dict[str, Any]) -> list[str] | None:
    given = _text(params, "tags")
    return [t.strip().lower() for t in given.split(",") if t.strip()] if given else None


LIST_SQL = (
    f"SELECT {LIST_COLUMNS} FROM agent_memory.fragments f WHERE f.tenant_id = $1 AND f.workspace = $2"
    " AND ($3::text IS NULL OR f.agent_id = $3) AND ($4::text IS NULL OR f.type = $4)"
    f" AND ($5::text IS NULL OR f.topic = $5) AND {repo.tagged('f', '$6')} AND ($7::text IS NULL OR f.ttl_tier = $7)"
    " AND CASE $8::text WHEN 'hide' THEN f.superseded_by IS NULL WHEN 'only' THEN f.superseded_by IS NOT NULL"
    " ELSE true END"
    " AND CASE $9::text WHEN 'hide' THEN (f.expires_at IS NULL OR f.expires_at > now())"
    " WHEN 'only' THEN f.expires_at <= now() ELSE true END"
    " ORDER BY f.created_at DESC, f.id DESC LIMIT $10 OFFSET $11"
)


async def memories(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:
    """Every dialect's memories in one list, filtered; with `q`, ranked by the engine's full-text and meaning search
    (which, as in every dialect, never returns an expired row)."""
    agent, kind, topic = _text(params, "agent", 64), _text(params, "type", 32), _text(params, "topic")
    tier, tags, query = _text(params, "tier", 16), _tags(params), _text(params, "q", 1000)
    superseded, expired, page = _tri(params, "superseded"), _tri(params, "expired"), _page(params)
    scope = ctx.scope
    if query:
        filters = Filters(topic=topic, type=kind, tags=tags, superseded=superseded != "hide")
        search = engine.Query(text=query, filters=filters)
        async with engine.searching(ctx, search) as (_, found):
            best = found.best_score() or 1.0
            ranked = found.fused()
        picked = []
        for fragment_id, score in ranked:
            r = found.rows[fragment_id]
            if (agent and r["agent_id"] != agent) or (tier and r["ttl_tier"] != tier):
                continue
            if superseded == "only" and r["superseded_by"] is None:
                continue
            picked.append(row(r) | {"score": round(score / best, 4)})
        start = (page - 1) * PAGE
        return {"memories": picked[start : start + PAGE], "page": page, "more": len(picked) > start + PAGE}
    async with ctx.uow(scope) as uow:
        found = await uow.conn.fetch(
            LIST_SQL, scope.tenant_id, scope.workspace, agent, kind, topic, tags, tier, superseded, expired,
            PAGE + 1, (page - 1) * PAGE,
        )  # fmt: skip
    return {"memories": rows(found[:PAGE]), "page": page, "more": len(found) > PAGE}


LINKS_SQL = (
    "SELECT l.from_id, l.to_id, l.relation_type, l.created_at, o.topic, o.type, o.content"
    " FROM agent_memory.fragment_links l JOIN agent_memory.fragments o"
    "   ON o.id = CASE WHEN l.from_id = $1 THEN l.to_id ELSE l.from_id END"
    " WHERE l.from_id = $1 OR l.to_id = $1 ORDER BY l.created_at, l.id"
)


async def memory(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:
    fragment_id = _text(params, "id", 64)
    if not fragment_id:
        raise invalid("id", "a memory id")
    async with ctx.uow(ctx.scope) as uow:
        found = await repo.get(uow.conn, fragment_id)
        if found is None:
            raise not_found(f"memory {fragment_id!r}")
        versions = await repo.versions(uow.conn, fragment_id)
        links = await uow.conn.fetch(LINKS_SQL, fragment_id)
        older = await repo.predecessors(uow.conn, fragment_id)
    return {
        "memory": row(found),
        "versions": [{"version": n} | row(v) for n, v in enumerate(versions, start=1)],
        "links": rows(links),
        "supersedes": older,
    }


EDGES_SQL = (
    "SELECT DISTINCT l.from_id, l.to_id, l.relation_type FROM agent_memory.fragment_links l"
    " WHERE l.from_id = ANY($1::text[]) OR l.to_id = ANY($1::text[]) LIMIT 200"
)


async def graph(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:
    """The memory's neighbourhood: two hops over links in either direction, at most GRAPH_NODES memories."""
    fragment_id = _text(params, "id", 64)
    if not fragment_id:
        raise invalid("id", "a memory id")
    async with ctx.uow(ctx.scope) as uow:
        if await repo.get(uow.conn, fragment_id) is None:
            raise not_found(f"memory {fragment_id!r}")
        seen, frontier, edges = {fragment_id}, [fragment_id], set()
        for _ in range(2):
            found = await uow.conn.fetch(EDGES_SQL, frontier)
            frontier = []
            for e in found:
                for end in (e["from_id"], e["to_id"]):
                    if end not in seen and len(seen) < GRAPH_NODES:
                        seen.add(end)
                        frontier.append(end)
                if e["from_id"] in seen and e["to_id"] in seen:
                    edges.add((e["from_id"], e["to_id"], e["relation_type"]))
            if not frontier:
                break
        nodes = await repo.rows_by_ids(uow.conn, sorted(seen))
    visible = {n["id"] for n in nodes}
    return {
        "center": fragment_id,
        "nodes": [{"id": n["id"], "topic": n["topic"], "type": n["type"], "content": n["content"]} for n in nodes],
        "edges": [{"from": f, "to": t, "relation": r} for f, t, r in sorted(edges) if f in visible and t in visible],
    }


async def documents_list(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:
    async with ctx.uow(ctx.scope) as uow:
        found = await documents.page(uow.conn, ctx.scope, None, 200)
    return {"documents": rows(found)}


OUTLINE_SQL = (
    "SELECT DISTINCT ON (heading_path) heading_path, anchor, chunk_index FROM agent_memory.doc_chunks"
    " WHERE item_id = $1 AND version_num = $2 ORDER BY heading_path, chunk_index"
)
VERSIONS_SQL = (
    "SELECT version_num, created_at, commit_id, length(content) AS chars FROM agent_memory.doc_versions"
    " WHERE item_id = $1 ORDER BY version_num DESC"
)


async def document(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:
    item_id = _text(params, "id", 64)
    if not item_id:
        raise invalid("id", "a document id")
    async with ctx.uow(ctx.scope) as uow:
        item = await documents.item(uow.conn, item_id)
        if item is None:
            raise not_found(f"document {item_id!r}")
        latest = await documents.version(uow.conn, item_id)
        versions = await uow.conn.fetch(VERSIONS_SQL, item_id)
        outline = await uow.conn.fetch(OUTLINE_SQL, item_id, latest["version_num"]) if latest else []
    ordered = sorted(outline, key=lambda r: r["chunk_index"])
    return {
        "document": row(item),
        "content": latest["content"] if latest else "",
        "versions": rows(versions),
        "outline": [{"path": list(r["heading_path"]), "anchor": r["anchor"]} for r in ordered if r["heading_path"]],
    }


WM_ITEMS_SQL = (
    f"SELECT {working_memory.ITEM_COLUMNS} FROM agent_memory.wm_items WHERE tenant_id = $1 AND workspace = $2"
    " ORDER BY status, priority DESC, created_at DESC LIMIT 200"
)


async def working(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:
    async with ctx.uow(ctx.scope) as uow:
        items = await uow.conn.fetch(WM_ITEMS_SQL, ctx.scope.tenant_id, ctx.scope.workspace)
        skips = await working_memory.skips(uow.conn, ctx.scope)
    return {"items": rows(items), "skips": rows(skips)}


OVER_TIME_SQL = (
    "SELECT date_trunc('day', created_at) AS day, type, ttl_tier, count(*) AS n FROM agent_memory.fragments"
    " WHERE tenant_id = $1 AND workspace = $2 AND ($3::text[] IS NULL OR agent_id = ANY($3))"
    " AND created_at > now() - interval '30 days' GROUP BY 1, 2, 3 ORDER BY 1"
)
RUNS_SQL = (
    "SELECT trigger, started_at, finished_at FROM agent_memory.consolidation_runs"
    " WHERE tenant_id = $1 AND workspace = $2 ORDER BY started_at DESC LIMIT 5"
)


async def stats(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:
    scope, agents = ctx.scope, ctx.visible_agents()
    async with ctx.uow(scope) as uow:
        figures = await repo.stats(uow.conn, scope, agents, ctx.profile.id)
        over_time = await uow.conn.fetch(OVER_TIME_SQL, scope.tenant_id, scope.workspace, agents)
        runs = await uow.conn.fetch(RUNS_SQL, scope.tenant_id, scope.workspace)
    figures.pop("last_consolidation", None)
    days: dict[str, dict[str, Any]] = {}
    for r in over_time:
        day = days.setdefault(r["day"].date().isoformat(), {"day": r["day"].date().isoformat(), "total": 0})
        day["total"] += r["n"]
        day[f"type:{r['type']}"] = day.get(f"type:{r['type']}", 0) + r["n"]
        day[f"tier:{r['ttl_tier']}"] = day.get(f"tier:{r['ttl_tier']}", 0) + r["n"]
    total = figures["total"] or 0
    coverage = round(figures["embedded"] / total, 4) if total else None
    return {"figures": {k: _number(v) for k, v in figures.items()}, "coverage": coverage,
            "over_time": list(days.values()), "consolidations": rows(runs)}  # fmt: skip


def _number(v: Any) -> Any:
    return round(float(v), 4) if isinstance(v, float) else v


DEAD_SQL = (
    "SELECT id, queue, event_type, attempts, created_at, replayed_at, replay_count,"
    " split_part(error, E'\\n', 1) AS error FROM agent_memory.dead_letters"
    " WHERE tenant_id = $1 AND workspace = $2 ORDER BY id DESC LIMIT 200"
)


async def dead_letters(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:
    async with ctx.uow(ctx.scope) as uow:
        found = await uow.conn.fetch(DEAD_SQL, ctx.scope.tenant_id, ctx.scope.workspace)
    return {"dead_letters": rows(found)}


async def keys(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:
    async with ctx.uow(ctx.scope) as uow:
        found = await api_keys.list_keys(uow.conn, ctx.scope.tenant_id, True)
    return {"keys": rows(found)}


AUDIT_SQL = (
    "SELECT id, actor, action, target_id, outcome, created_at FROM agent_memory.console_audit"
    " WHERE tenant_id = $1 AND workspace = $2 ORDER BY id DESC LIMIT 200"
)


async def audit(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:
    async with ctx.uow(ctx.scope) as uow:
        found = await uow.conn.fetch(AUDIT_SQL, ctx.scope.tenant_id, ctx.scope.workspace)
    return {"audit": rows(found)}


# view -> (reader, scope it needs); admin views act with admin access (every agent's rows, the tenant's keys)
VIEWS = {
    "memories": (memories, "read"),
    "memory": (memory, "read"),
    "graph": (graph, "read"),
    "documents": (documents_list, "read"),
    "document": (document, "read"),
    "working": (working, "read"),
    "stats": (stats, "read"),
    "dead_letters": (dead_letters, "admin"),
    "keys": (keys, "admin"),
    "audit": (audit, "admin"),
}
