"""What seed 004's tools share (the `lifecycle` profile): its fact tiers, the call's project and its busy error."""

from __future__ import annotations

from memento_memory_api.context import ToolContext
from memento_memory_api.tools.common import in_workspace
from memento_shared import sessions as shared_sessions
from memento_shared.errors import ErrorCode, MementoError

TIERS = dict(zip(("l1", "l2"), shared_sessions.FACT_TIERS, strict=True))  # daily and weekly facts, in `source`


def scoped(ctx: ToolContext, project: str | None) -> ToolContext:
    """The call in its project: a workspace of the credential's tenant that it allows (PERMISSION_DENIED else)."""
    return in_workspace(ctx, project)


def busy(message: str) -> MementoError:
    return MementoError(ErrorCode.RESOURCE_BUSY, message, retryable=True)
