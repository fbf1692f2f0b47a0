"""completion/complete: suggestions for prompt arguments and the resource template's variable, from the caller's own
rows (read under RLS in the caller's scope, like any tool). Values start with what was typed (case-insensitive),
most used or most recent first, at most 100 (MCP's limit), with the total found and whether there are more.

Topics and activity dates come from the newest RECENT_ROWS fragments the caller can see, so a keystroke costs an
index range scan, not a pass over a workspace of millions: what is completed is what is in recent use.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from memento_memory_api.prompts import ARGUMENT_MAX_CHARS, RESOURCE_PREFIX, prompt_named
from memento_memory_api.repositories.fragments import live
from memento_memory_api.uow import Scope
from memento_shared.errors import invalid

MAX_VALUES = 100
RECENT_ROWS = 5000
TEMPLATE = RESOURCE_PREFIX + "{id}"
# words `since` also takes (the recall timeRange's own), offered beside the dates the caller wrote on
SINCE_WORDS = ("today", "yesterday", "3 days ago", "last week", "last month")

_RECENT = f"""
    SELECT f.topic, f.type, f.created_at FROM agent_memory.fragments f
    WHERE f.tenant_id = $1 AND f.workspace = $2 AND ($3::text[] IS NULL OR f.agent_id = ANY($3))
      AND {live("f", "false")}
    ORDER BY f.created_at DESC LIMIT {RECENT_ROWS}"""
TOPICS = f"""
    SELECT topic AS value, count(*) AS n FROM ({_RECENT}) recent
    WHERE starts_with(lower(topic), lower($4)) AND ($5::text IS NULL OR type = $5)
    GROUP BY topic ORDER BY n DESC, topic LIMIT {MAX_VALUES + 1}"""
DAYS = f"""
    SELECT DISTINCT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS value FROM ({_RECENT}) recent
    WHERE starts_with(to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), $4)
    ORDER BY value DESC LIMIT {MAX_VALUES + 1}"""
ITEM_IDS = f"""
    SELECT id AS value FROM agent_memory.doc_items
    WHERE tenant_id = $1 AND workspace = $2 AND status = 'active' AND starts_with(lower(id), lower($3))
    ORDER BY updated_at DESC, id LIMIT {MAX_VALUES + 1}"""
CANONICAL_KEYS = f"""
    SELECT canonical_key AS value FROM agent_memory.doc_items
    WHERE tenant_id = $1 AND workspace = $2 AND status = 'active' AND canonical_key IS NOT NULL
      AND starts_with(lower(canonical_key), lower($3))
    ORDER BY updated_at DESC, canonical_key LIMIT {MAX_VALUES + 1}"""


def _target(params: dict[str, Any]) -> tuple[str, str, str]:
    """(what is completed, the argument's name, the typed value) from the request's ref and argument."""
    ref, argument = params.get("ref"), params.get("argument")
    if not isinstance(ref, dict):
        raise invalid("ref", "must be an object with a type")
    if not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
        raise invalid("argument", "must be an object with a name and a value")
    value = argument.get("value", "")
    if not isinstance(value, str) or len(value) > ARGUMENT_MAX_CHARS:
        raise invalid("argument.value", f"must be a string of at most {ARGUMENT_MAX_CHARS} characters")
    name = argument["name"]
    if ref.get("type") == "ref/prompt":
        prompt = prompt_named(ref.get("name"))
        if name not in {a.name for a in prompt.arguments}:
            raise invalid("argument.name", f"{name!r} is not an argument of {prompt.name}")
        return f"{prompt.name}.{name}", name, value
    if ref.get("type") == "ref/resource":
        if ref.get("uri") != TEMPLATE:
            raise invalid("ref.uri", f"no resource template {ref.get('uri')!r}; the template is {TEMPLATE}")
        if name != "id":
            raise invalid("argument.name", f"{TEMPLATE} has one variable, id")
        return "item.id", name, value
    raise invalid("ref.type", "must be ref/prompt or ref/resource")


async def complete(
    conn: asyncpg.Connection, scope: Scope, agents: list[str] | None, params: dict[str, Any]
) -> dict[str, Any]:
    """The completion result for one request, read in the caller's transaction (RLS applies)."""
    what, _, typed = _target(params)
    where = (scope.tenant_id, scope.workspace)
    if what in ("catch_up.topic", "changes_since.topic", "decisions.subject"):
        kind = "decision" if what == "decisions.subject" else None
        rows = await conn.fetch(TOPICS, *where, agents, typed, kind)
        values = [r["value"] for r in rows]
    elif what == "changes_since.since":
        days = [r["value"] for r in await conn.fetch(DAYS, *where, agents, typed)]
        values = [w for w in SINCE_WORDS if w.startswith(typed.lower())] + days
    elif what == "document.key":
        values = [r["value"] for r in await conn.fetch(CANONICAL_KEYS, *where, typed)]
    else:  # item.id
        values = [r["value"] for r in await conn.fetch(ITEM_IDS, *where, typed)]
    more = len(values) > MAX_VALUES
    completion: dict[str, Any] = {"values": values[:MAX_VALUES], "hasMore": more}
    if not more:  # beyond one page the count is not known, and a guess would mislead
        completion["total"] = len(values)
    return {"completion": completion}
