"""Seed 000 session tools: reflect (§6.7), context (§6.8), tool_feedback (§6.9)."""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError

from memento_memory_api import render
from memento_memory_api.context import ToolContext
from memento_memory_api.recall import seen
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.store import store_fragment
from memento_memory_api.tools.common import in_workspace
from memento_memory_api.tools.fragments.factory import build_fragment
from memento_memory_api.tools.registry import handles
from memento_shared import working_memory
from memento_shared.errors import invalid
from memento_shared.tools.fragments import ContextArgs, ReflectArgs, RememberArgs, ToolFeedbackArgs

REFLECT_TOPIC = "session-reflection"
REFLECT_TYPES = (
    ("decisions", "decision"),
    ("errors_resolved", "error"),
    ("new_procedures", "procedure"),
    ("open_questions", "fact"),
)


@handles("reflect")
async def reflect(ctx: ToolContext, args: ReflectArgs) -> dict[str, Any]:
    session_id = args.sessionId or ctx.scope.session_id
    if args.task_effectiveness is not None and not session_id:
        raise invalid("sessionId", "task_effectiveness needs a session id (none given and no MCP session)")
    items = [(args.summary, "fact")]
    for field_name, fragment_type in REFLECT_TYPES:
        items += [(text, fragment_type) for text in getattr(args, field_name) or []]
    stored = []
    async with ctx.uow(ctx.scope) as uow:
        for text, fragment_type in items:
            remember_args = RememberArgs(
                content=text,
                topic=REFLECT_TOPIC,
                type=fragment_type,
                source=f"reflect:{session_id}" if session_id else "reflect",
            )
            fragment_id, created = await store_fragment(ctx, uow, build_fragment(remember_args, ctx))
            stored.append({"id": fragment_id, "type": fragment_type, "created": created})
        if args.task_effectiveness is not None:
            te = args.task_effectiveness
            await uow.conn.execute(
                "INSERT INTO agent_memory.task_feedback (tenant_id, workspace, agent_id, session_id, overall_success,"
                " tool_highlights, tool_pain_points) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                ctx.scope.tenant_id,
                ctx.scope.workspace,
                ctx.scope.agent_id,
                session_id,
                te.overall_success,
                te.tool_highlights,
                te.tool_pain_points,
            )
    return {
        "success": True,
        "fragments": stored,
        "count": len(stored),
        "taskFeedbackRecorded": args.task_effectiveness is not None,
    }


WORKING_FIELDS = ("id", "content", "topic", "type", "keywords", "importance")


@handles("context")
async def context(ctx: ToolContext, args: ContextArgs) -> dict[str, Any]:
    ctx = in_workspace(ctx, args.workspace)
    used = 0
    core = []
    async with ctx.uow(ctx.scope) as uow:
        for row in await repo.core_memory(uow.conn, uow.scope, list(args.types), ctx.visible_agents(), 200):
            if used + row["estimated_tokens"] > args.tokenBudget:
                continue  # a smaller, less important fragment may still fit
            used += row["estimated_tokens"]
            core.append(render.fragment(row, tier="core"))
    working = []
    session_id = args.sessionId or ctx.scope.session_id
    if session_id and ctx.redis is not None:
        try:
            entries = await working_memory.entries(ctx.redis, working_memory.key(ctx.scope.tenant_id, session_id))
        except (RedisError, OSError):
            entries = []  # §9.1: working memory is unavailable without Redis; core memory still answers
        agents = ctx.visible_agents()
        for fragment in reversed(entries):  # newest first, as long as the budget lasts
            if not working_memory.visible(fragment, ctx.scope.workspace, agents):
                continue  # the session's list holds every workspace (and agent) it wrote in
            if used + fragment["estimated_tokens"] > args.tokenBudget:
                continue
            used += fragment["estimated_tokens"]
            working.append({k: fragment[k] for k in WORKING_FIELDS} | {"linked_to": fragment.get("linked_to", [])})
    if session_id:  # what this session has seen, for recall's excludeSeen
        await seen.record(ctx, session_id, [f["id"] for f in core])
    return {"coreMemory": core, "workingMemory": working, "totalTokens": used, "tokenBudget": args.tokenBudget}


@handles("tool_feedback")
async def tool_feedback(ctx: ToolContext, args: ToolFeedbackArgs) -> dict[str, Any]:
    async with ctx.uow(ctx.scope) as uow:
        feedback_id = await uow.conn.fetchval(
            "INSERT INTO agent_memory.tool_feedback (tenant_id, workspace, agent_id, tool_name, relevant, sufficient,"
            " suggestion, context, session_id, trigger_type) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
            " RETURNING id",
            ctx.scope.tenant_id,
            ctx.scope.workspace,
            ctx.scope.agent_id,
            args.tool_name,
            args.relevant,
            args.sufficient,
            args.suggestion,
            args.context,
            args.session_id or ctx.scope.session_id,
            args.trigger_type,
        )
    return {"success": True, "id": feedback_id}
