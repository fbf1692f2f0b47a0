"""Seed 003 tool contracts (the `protocol` profile), named as the Memento Protocol's reference MCP server (memento-mcp
0.3.x) names them, with the seed's `memento_store` beside the reference's `memento_remember` (docs/dialects.md
"protocol"). Each answer's JSON is in `structuredContent`; its text reads like the reference server's."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from memento_shared.tools.fragments import FragmentId
from memento_shared.tools.spec import INDEXED, PARTIAL, Args, ToolSpec

PROFILE = "protocol"

MemoryType = Literal["fact", "decision", "observation", "instruction"]
Category = Literal["active_work", "standing_decision", "skip_list", "waiting_for", "session_note"]
Status = Literal["active", "paused", "completed", "archived"]
SECTIONS = ("active_work", "standing_decisions", "skip_list", "activity_log", "session_notes")

# Text stored whole up to MEMORY_MAX_CHARS (the tools refuse longer with PAYLOAD_TOO_LARGE, docs/dialects.md
# "Content"), so no maxLength on any stored text here
Text = Annotated[str, StringConstraints(min_length=1, pattern=r"\S")]
Short = Annotated[str, StringConstraints(min_length=1, max_length=500, pattern=r"\S")]
Tag = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"\S")]
Tags = Annotated[list[Tag], Field(max_length=20)]
Workspace = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
ItemId = Annotated[str, StringConstraints(min_length=1, max_length=64)]
# ISO 8601 date or date-time; parsed by the tool (a bad one is INVALID_PARAMETER naming the field)
When = Annotated[str, StringConstraints(min_length=4, max_length=40)]


class Linkage(Args):
    type: Literal["memory", "item", "file"]
    id: ItemId | None = None
    path: Annotated[str, StringConstraints(min_length=1, max_length=1000)] | None = None
    label: Annotated[str, StringConstraints(max_length=100)] | None = None


class StoreArgs(Args):
    content: Text = Field(description="The memory content")
    tags: Tags | None = Field(None, description="Tags for categorization")
    type: MemoryType = Field("observation", description="Memory type (default: observation)")
    expires: When | None = Field(None, description="Expiration date (ISO date or date-time)")
    linkages: Annotated[list[Linkage], Field(max_length=50)] | None = Field(
        None, description="Links to other memories, working-memory items or files: [{type, id?, path?, label?}]"
    )


class StoreResult(BaseModel):
    id: str
    type: str
    tags: list[str]
    expires_at: str | None
    indexed: bool = Field(description=INDEXED)


class RecallArgs(Args):
    query: Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")] = Field(
        description="What to search for"
    )
    tags: Tags | None = Field(None, description="Filter by tags (matches any)")
    type: MemoryType | None = Field(None, description="Filter by memory type")
    limit: Annotated[int, Field(ge=1, le=100)] = Field(10, description="Max results (default: 10)")
    workspace: Workspace | None = Field(None, description="Search this workspace instead (read only)")


class RecalledMemory(BaseModel):
    id: str
    content: str
    type: str
    tags: list[str]
    score: float
    created_at: str
    expires_at: str | None
    access_count: int
    last_accessed_at: str | None
    linkages: list[dict]


class RecallResult(BaseModel):
    count: int
    results: list[RecalledMemory]
    meaning_search: Literal["partial"] | None = Field(None, description=PARTIAL)


class IdArgs(Args):
    id: ItemId = Field(description="The id")


class DeletedResult(BaseModel):
    deleted: bool
    id: str


class ReadArgs(Args):
    section: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = Field(
        None, description=f"Section to read: {', '.join(SECTIONS)}; the whole document when omitted"
    )


class Section(BaseModel):
    key: str
    heading: str
    content: str
    updated_at: str


class ReadResult(BaseModel):
    sections: list[Section]


class UpdateArgs(Args):
    section: Annotated[str, StringConstraints(min_length=1, max_length=64)] = Field(
        description=f"Section to replace: {', '.join(SECTIONS)}"
    )
    content: str = Field(description="New content for the section (up to MEMORY_MAX_CHARS)")


class InitResult(BaseModel):
    created: bool
    sections: list[str]


class ItemCreateArgs(Args):
    category: Category = Field(description="Item category")
    title: Text = Field(description="Short title")
    content: str = Field("", description="Detailed content")
    status: Status = Field("active", description="default: active")
    priority: Annotated[int, Field(ge=0, le=10)] = Field(0, description="0-10, higher = more important (default 0)")
    tags: Tags | None = Field(None, description="Tags")
    next_action: str | None = Field(None, description="Next step")


class ItemUpdateArgs(Args):
    id: ItemId = Field(description="Item id")
    title: Text | None = None
    content: str | None = None
    category: Category | None = None
    status: Status | None = None
    priority: Annotated[int, Field(ge=0, le=10)] | None = None
    tags: Tags | None = Field(None, description="Replaces the existing tags")
    next_action: str | None = None


class Item(BaseModel):
    id: str
    category: str
    title: str
    content: str
    status: str
    priority: int
    tags: list[str]
    next_action: str | None
    created_at: str
    updated_at: str


class ItemListArgs(Args):
    category: Category | None = None
    status: Status | None = Field(None, description="Without it: active and paused items")
    query: Annotated[str, StringConstraints(min_length=1, max_length=500)] | None = Field(
        None, description="Search title and content"
    )
    workspace: Workspace | None = Field(None, description="List this workspace's items instead (read only)")


class ItemListResult(BaseModel):
    total: int
    items: list[Item]


class SkipAddArgs(Args):
    item: Text = Field(description="What to skip")
    reason: Text = Field(description="Why")
    expires: When = Field(description="When to stop skipping it (ISO date or date-time, in the future)")


class SkipEntry(BaseModel):
    id: str
    item: str
    reason: str
    expires: str


class SkipCheckArgs(Args):
    query: Short = Field(description="What you are about to do")


class SkipCheckResult(BaseModel):
    match: SkipEntry | None


class SkipListResult(BaseModel):
    total: int
    entries: list[SkipEntry]


class ContextArgs(Args):
    message: Annotated[str, StringConstraints(max_length=8000)] = Field(
        "", description="The user's message: what to find memories and skip warnings for"
    )
    include: Annotated[
        list[Literal["working_memory", "memories", "skip_list", "identity"]], Field(min_length=1, max_length=4)
    ] = Field(["working_memory", "memories", "skip_list", "identity"], description="What to include")
    token_budget: Annotated[int, Field(ge=100, le=100_000)] = Field(
        4000,
        description="At most this many tokens (cl100k) of context: skip warnings always, then the identity crystal, "
        "items by priority and memories by score while they fit",
    )


class ContextResult(BaseModel):
    working_memory: dict | None = Field(None, description="{items: active and paused, total_active}")
    memories: dict | None = Field(
        None, description='{matches: the top memories for the message, meaning_search: "partial" when it was}'
    )
    warnings: list[SkipEntry] | None = Field(None, description="Skip-list entries the message touches")
    identity: str | None = None
    tokens: int = Field(0, description="Tokens of the context returned")
    omitted: int = Field(0, description="Items and memories left out to stay within token_budget")


class IdentityResult(BaseModel):
    id: str | None
    crystal: str | None
    created_at: str | None


class IdentityUpdateArgs(Args):
    crystal: Text = Field(description="The identity crystal: first-person prose")


class ConsolidateArgs(Args):
    source_ids: Annotated[list[FragmentId], Field(min_length=2, max_length=50)] = Field(
        description="Memories to consolidate (at least 2)"
    )
    content: Text | None = Field(None, description="The synthesis; a summary of the sources when omitted")
    type: MemoryType | None = Field(None, description="Default: the sources' most common type")
    tags: Tags | None = Field(None, description="Merged with the sources' tags")


class ConsolidateResult(BaseModel):
    id: str
    sources: list[str]
    content: str


class ExtractArgs(Args):
    transcript: Text = Field(description="The conversation transcript")
    mode: Literal["distill", "seeds"] = Field("distill", description="distill (up to 20) or seeds (up to 3)")
    max_memories: Annotated[int, Field(ge=1, le=20)] | None = Field(None, description="Override the mode's maximum")


class ExtractedMemory(BaseModel):
    id: str
    content: str
    type: str
    tags: list[str]


class ExtractResult(BaseModel):
    count: int
    mode: str
    source: str
    stored: list[ExtractedMemory]


class GraphArgs(Args):
    id: FragmentId = Field(description="The memory to start from")
    depth: Annotated[int, Field(ge=1, le=3)] = Field(2, description="Hops to follow (1-3, default 2)")


class GraphResult(BaseModel):
    nodes: list[dict]
    edges: list[dict]


class HealthResult(BaseModel):
    workspace: str
    sections: int
    sections_updated_at: str | None
    memories: dict
    items: dict
    skip_list: dict
    identity_snapshots: int
    last_decay_at: str | None


class NoArgs(Args):
    pass


def _spec(name: str, title: str, description: str, args, result, **extra) -> ToolSpec:
    return ToolSpec(name, title, description, args, result, PROFILE, **extra)


_STORE = "Store a memory (fact, decision, observation or instruction) with optional tags, expiry and linkages."
_READ = {"read_only": True, "idempotent": True, "scope": "read"}
SPECS = [
    _spec("memento_store", "Store memory", _STORE, StoreArgs, StoreResult),
    _spec("memento_remember", "Remember", _STORE + " (The reference server's name.)", StoreArgs, StoreResult),
    _spec(
        "memento_recall",
        "Recall memories",
        "Search memories: hybrid relevance (keywords + meaning) × recency (7-day half-life) × access boosts. "
        "Expired and consolidated memories never appear.",
        RecallArgs,
        RecallResult,
        **_READ,
    ),
    _spec("memento_memory_delete", "Delete memory", "Delete a memory.", IdArgs, DeletedResult, destructive=True),
    _spec(
        "memento_init",
        "Initialize workspace",
        "Create the workspace's working memory.",
        NoArgs,
        InitResult,
        idempotent=True,
    ),
    _spec(
        "memento_read",
        "Read working memory",
        "Read working memory: one section or the whole document.",
        ReadArgs,
        ReadResult,
        **_READ,
    ),
    _spec(
        "memento_update",
        "Update section",
        "Replace a working-memory section's content.",
        UpdateArgs,
        ReadResult,
        idempotent=True,
    ),
    _spec("memento_item_create", "Create item", "Create a structured working-memory item.", ItemCreateArgs, Item),
    _spec(
        "memento_item_update",
        "Update item",
        "Update a working-memory item; only the fields given change.",
        ItemUpdateArgs,
        Item,
        idempotent=True,
    ),
    _spec(
        "memento_item_delete", "Delete item", "Delete a working-memory item.", IdArgs, DeletedResult, destructive=True
    ),
    _spec(
        "memento_item_list",
        "List items",
        "List working-memory items (active and paused by default), by priority then newest.",
        ItemListArgs,
        ItemListResult,
        **_READ,
    ),
    _spec(
        "memento_skip_add",
        "Add skip entry",
        "Add something to skip, with a reason and an expiry.",
        SkipAddArgs,
        SkipEntry,
    ),
    _spec(
        "memento_skip_check",
        "Check skip list",
        "Check whether something is on the skip list.",
        SkipCheckArgs,
        SkipCheckResult,
        **_READ,
    ),
    _spec(
        "memento_skip_list",
        "List skip entries",
        "List the skip list's current entries.",
        NoArgs,
        SkipListResult,
        **_READ,
    ),
    _spec(
        "memento_skip_remove", "Remove skip entry", "Remove a skip-list entry.", IdArgs, DeletedResult, destructive=True
    ),
    _spec(
        "memento_context",
        "Context for a message",
        "One call per message: active and paused items, the top memories for the message, skip-list warnings it "
        "touches, and the identity crystal.",
        ContextArgs,
        ContextResult,
        **_READ,
    ),
    _spec("memento_identity", "Identity", "The latest identity crystal.", NoArgs, IdentityResult, **_READ),
    _spec(
        "memento_identity_update",
        "Update identity",
        "Store a new identity crystal snapshot (history is kept).",
        IdentityUpdateArgs,
        IdentityResult,
    ),
    _spec(
        "memento_identity_crystallize",
        "Crystallize identity",
        "Build an identity crystal from working memory, top memories and consolidations, and store it as a snapshot.",
        NoArgs,
        IdentityResult,
    ),
    _spec(
        "memento_consolidate",
        "Consolidate memories",
        "Replace two or more memories with one; the sources are kept, traceable, and leave recall.",
        ConsolidateArgs,
        ConsolidateResult,
    ),
    _spec(
        "memento_extract",
        "Extract memories",
        "Extract novel memories from a transcript (distill: up to 20, seeds: up to 3), tagged source:distill and "
        "deduplicated against the workspace.",
        ExtractArgs,
        ExtractResult,
    ),
    _spec(
        "memento_memory_graph",
        "Memory graph",
        "Memories, items and files reachable through linkages.",
        GraphArgs,
        GraphResult,
        **_READ,
    ),
    _spec(
        "memento_health", "Health", "Counts and last updates of the workspace's memory.", NoArgs, HealthResult, **_READ
    ),
]
