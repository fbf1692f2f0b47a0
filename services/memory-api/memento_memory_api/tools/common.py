"""What the dialects' handlers share: their content rules, dates, and reading another workspace."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
from datetime import UTC, date, datetime
from typing import Any

from memento_memory_api.context import ToolContext
from memento_memory_api.embedding_client import EmbeddingUnavailable
from memento_memory_api.recall.question import question
from memento_shared.errors import ErrorCode, MementoError, invalid
from memento_shared.text.redaction import redact_pii

log = logging.getLogger(__name__)


def whole_text(value: str, field: str, ctx: ToolContext) -> str:
    """A dialect's text as it is stored: whole, PII masked; over MEMORY_MAX_CHARS it is refused, never cut."""
    if len(value) > ctx.settings.memory_max_chars:
        raise MementoError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"{field}: {len(value)} characters, more than the {ctx.settings.memory_max_chars} allowed",
            field=field,
        )
    return redact_pii(value)


def parse_when(value: str, field: str) -> datetime:
    """An ISO 8601 date (its first moment, UTC) or date-time (UTC when it names no offset)."""
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        moment = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        raise invalid(field, "must be an ISO 8601 date (2026-03-01) or date-time (2026-03-01T12:00:00Z)") from None
    if not 1970 <= moment.year <= 9998:
        raise invalid(field, "must be a date between 1970 and 9998")
    return moment


def short_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def in_workspace(ctx: ToolContext, workspace: str | None) -> ToolContext:
    """The call's context in `workspace` instead of its own: another workspace of the same tenant that the credential
    allows (docs/dialects.md "Scope"): seed 003's peek, which only reads; seed 004's `project` and the `workspace` of
    seed 000's reference project, in which those tools also write."""
    if workspace is None or workspace == ctx.scope.workspace:
        return ctx
    if not ctx.principal.allows_workspace(workspace):
        raise MementoError(
            ErrorCode.FORBIDDEN, f"workspace: {workspace!r} is not allowed for this credential", field="workspace"
        )
    return dataclasses.replace(ctx, scope=dataclasses.replace(ctx.scope, workspace=workspace))


async def vector_now(ctx: ToolContext, text: str, side: str = "document") -> Any:
    """`text`'s vector in the active profile, computed on the request path (the embedder's query lane), or None when
    the embedder fails or takes longer than INLINE_EMBEDDING_TIMEOUT_SECONDS: callers go on without it. A query is
    embedded as every search embeds it: its question (recall.question)."""
    embed = ctx.embedder.embed_document if side == "document" else ctx.embedder.embed_query
    if side == "query":
        text = question(text, ctx.settings.query_embed_max_tokens)
    try:
        async with asyncio.timeout(ctx.settings.inline_embedding_timeout_s):
            vector = await embed(text, ctx.profile.id)
    except (EmbeddingUnavailable, TimeoutError) as exc:
        log.warning("embedding.deferred", extra={"error_type": type(exc).__name__})
        return None
    return vector if len(vector) == ctx.profile.dimension else None
