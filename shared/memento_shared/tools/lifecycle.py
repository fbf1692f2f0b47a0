"""Seed 004 tool contracts (the `lifecycle` profile): memory_before_turn, memory_after_turn, memory_run_maintenance,
memory_list_dir_with_abstract, with the seed's parameters and its error codes (docs/dialects.md "lifecycle")."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from memento_shared.tools.spec import INDEXED, PARTIAL, Args, ToolSpec

PROFILE = "lifecycle"
# seed 004's clients expect its codes (SPEC "Errors"): INVALID_ARGUMENT, PERMISSION_DENIED, RESOURCE_BUSY,
# INTERNAL_ERROR
ERROR_CODES = {
    "INVALID_PARAMETER": "INVALID_ARGUMENT",
    "PAYLOAD_TOO_LARGE": "INVALID_ARGUMENT",
    "MEMORY_NOT_FOUND": "INVALID_ARGUMENT",
    "CONFLICT": "INVALID_ARGUMENT",
    "FORBIDDEN": "PERMISSION_DENIED",
    "UNAUTHORIZED": "PERMISSION_DENIED",
    "RATE_LIMITED": "RESOURCE_BUSY",
    "STORAGE_ERROR": "INTERNAL_ERROR",
    "EMBEDDING_ERROR": "INTERNAL_ERROR",
}

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:@-]{1,128}$")]
Project = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


class ContentPart(BaseModel):
    """A part of a Responses-style message: `input_text` / `output_text` with its text (other parts are kept as given
    and carry no text for memory)."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: str
    text: str | None = None


class ResponseItem(BaseModel):
    """A Responses-style item: `{"type": "message", "role", "content": [parts] | "text"}`; other item types (tool calls
    and their outputs) are kept as given."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: str = "message"
    role: Literal["user", "assistant", "developer", "system", "tool"] | None = None
    content: list[ContentPart] | str | None = None


Items = list[ResponseItem]


class TurnScope(Args):
    project: Project | None = Field(None, description="The project (a workspace); the connection's by default")
    session_id: Name = Field("default", description="The session")
    user_id: Name | None = Field(None, description="The end user the session belongs to")
    turn_id: Name | None = Field(None, description="The turn; turn-<unix ms>-<6 hex> when omitted")


class ConversationWindow(TurnScope):
    conversation_items: Items | None = Field(
        None,
        description="The whole conversation; the current input is current_input_count items at current_input_start",
    )
    current_input_start: Annotated[int, Field(ge=0)] | None = None
    current_input_count: Annotated[int, Field(ge=1)] | None = None


class BeforeTurnArgs(ConversationWindow):
    current_input: Items | None = Field(
        None, description="This turn's input items (a plain string is taken as one user message, as the reference does)"
    )
    current_input_text: str | None = Field(None, description="This turn's input as plain text (one user message)")

    @field_validator("current_input", mode="before")
    @classmethod
    def _text_as_message(cls, value: Any) -> Any:
        if isinstance(value, str):  # seed 004's reference server accepts this and makes one user message of it
            return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}]
        return value

    base_instructions: str | None = Field(None, description="The client's instructions, counted against the window")
    max_input_tok: Annotated[int, Field(ge=256, le=10_000_000)] = Field(
        120_000, description="The model's input window in tokens"
    )


class BeforeTurnResult(BaseModel):
    input_items: list[dict[str, Any]]
    recall_fact_ids: list[str]
    recall_insight_ids: list[str] = Field(description="Always empty: the reference answers it; Memento has no insights")
    context_token_count: int
    turn_id: str
    meaning_search: Literal["partial"] | None = Field(None, description=PARTIAL)


class AfterTurnArgs(ConversationWindow):
    turn_id: Name | None = Field(
        None, description="The turn being committed (the same id again is a no-op); turn-<unix ms>-<6 hex> when omitted"
    )
    input_items: Items | None = Field(
        None,
        description="The items sent to the model this turn (memory_before_turn's input_items); without it, the "
        "current_input_count items at current_input_start of conversation_items",
    )
    output_items: Items = Field(default_factory=list, description="The model's output items")


class OkResult(BaseModel):
    ok: bool
    indexed: bool | None = Field(
        None, description=f"For the facts this turn stored: {INDEXED}. Absent for a turn committed before"
    )


class MaintenanceArgs(Args):
    project: Project | None = None
    session_id: Name = "default"


class MaintenanceResult(BaseModel):
    ok: bool
    expired_facts: int
    compacted_events: int
    archives: int
    summaries_refreshed: int
    turn_guards_pruned: int


class ListDirArgs(Args):
    project: Project | None = None
    session_id: Name = "default"
    path: Annotated[str, StringConstraints(max_length=512)] = Field(
        "",
        description="Under this directory: relative to the session's root (events, memory_tiers/l1) or absolute "
        "(/memory/<session_id>/events); the session's root when empty",
    )
    depth: Annotated[int, Field(ge=1, le=16)] = 8
    limit: Annotated[int, Field(ge=1, le=1000)] = 200


class DirSummary(BaseModel):
    path: str
    abstract: str
    updated_at: str = Field(description="ISO 8601, UTC: when the directory was last written (or made with its session)")
    has_overview: bool


class ListDirResult(BaseModel):
    summaries: list[DirSummary]


def _spec(name: str, title: str, description: str, args, result, **extra) -> ToolSpec:
    return ToolSpec(name, title, description, args, result, PROFILE, error_codes=ERROR_CODES, **extra)


SPECS = [
    _spec(
        "memory_before_turn",
        "Before turn",
        "Prepare the model's input: one developer message beginning 'Memory recall:' with the project's recalled facts "
        "and the session's recent context, then the current input unchanged, within max_input_tok.",
        BeforeTurnArgs,
        BeforeTurnResult,
        read_only=True,
        scope="read",
    ),
    _spec(
        "memory_after_turn",
        "After turn",
        "Persist the turn once (the same turn_id again is a no-op): its new items as session events, and the facts it "
        "holds into the daily and weekly tiers.",
        AfterTurnArgs,
        OkResult,
        idempotent=True,
    ),
    _spec(
        "memory_run_maintenance",
        "Run maintenance",
        "Retention, compaction of old events into archives and summary refresh for a session; safe to interrupt and "
        "run again.",
        MaintenanceArgs,
        MaintenanceResult,
        idempotent=True,
    ),
    _spec(
        "memory_list_dir_with_abstract",
        "List memory with abstracts",
        "The session's memory layout (/memory/<session_id>/events, context, memory_tiers, meta) with abstracts.",
        ListDirArgs,
        ListDirResult,
        read_only=True,
        idempotent=True,
        scope="read",
    ),
]
