"""Seed 002 tool contracts (the `simple` profile): store_memory, supersede_memory, search_memories,
list_recent_memories. Names, parameters, bounds and answers are the seed's, as docs/dialects.md "simple" fixes them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from memento_shared.tools.fragments import FragmentId
from memento_shared.tools.spec import INDEXED, PARTIAL, Args, ToolSpec

PROFILE = "simple"

Source = Literal["explicit", "extracted"]
# No maxLength here: content over MEMORY_MAX_CHARS (default 8,000) is refused with PAYLOAD_TOO_LARGE by the tool, as
# every dialect but `remember` does (docs/dialects.md "Content"), not as a schema violation.
Content = Annotated[str, StringConstraints(min_length=1, pattern=r"\S")]


class StoreMemoryArgs(Args):
    content: Content = Field(
        description="The fact or information to remember. Should be a clear, standalone statement. Stored whole up to "
        "MEMORY_MAX_CHARS (default 8,000) characters; PII is masked."
    )
    confidence: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        1.0, description="Confidence score from 0-1. Default 1.0 for explicit facts."
    )
    source: Source = Field(
        "extracted",
        description="Whether user explicitly asked to remember (explicit) or extracted from conversation (extracted).",
    )


class Memory(BaseModel):
    """Seed 002's Memory. Rows stored through other dialects show confidence 1.0 and source "extracted" unless they
    were stored as "explicit"."""

    id: str
    content: str
    confidence: float
    source: Source
    created_at: str
    updated_at: str
    accessed_at: str = Field(description="Last read by a search or recall; the creation time until then")
    supersedes: str | None = Field(None, description="ID of the memory this one replaces")
    superseded_by: str | None = Field(None, description="ID of the memory that replaces this one")
    relevance_score: float | None = Field(None, description="In (0, 1]: similar and search results only")


class StoreMemoryResult(BaseModel):
    created: Memory = Field(description="The new memory; for the same content again, the one already stored")
    similar: list[Memory] = Field(description="Up to 5 existing memories the new one may outdate, most similar first")
    action_required: str | None = Field(
        description='For the most similar one: Call supersede_memory("<old id>", "<new id>") to mark the old memory '
        "as outdated. (one such sentence per candidate); null when nothing is similar"
    )
    duplicate: bool = Field(description="True when this content was already stored: nothing new was written")
    indexed: bool = Field(description=INDEXED)


class SupersedeMemoryArgs(Args):
    old_memory_id: FragmentId = Field(description="ID of the outdated memory")
    new_memory_id: FragmentId = Field(description="ID of the new memory that replaces it")


class SupersedeMemoryResult(BaseModel):
    success: bool
    message: str


class SearchMemoriesArgs(Args):
    query: Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")] = Field(
        description="Natural language search query"
    )
    limit: Annotated[int, Field(ge=1, le=20)] = Field(5, description="Maximum number of results to return")


class MemoriesResult(BaseModel):
    memories: list[Memory]
    meaning_search: Literal["partial"] | None = Field(None, description=PARTIAL)


class ListRecentMemoriesArgs(Args):
    limit: Annotated[int, Field(ge=1, le=50)] = Field(10, description="Number of recent memories to return")


SPECS = [
    ToolSpec(
        name="store_memory",
        title="Store memory",
        description="Store a new memory. Always succeeds. Returns similar memories that might be outdated. ALWAYS "
        "check the response for supersede suggestions.",
        args_model=StoreMemoryArgs,
        result_model=StoreMemoryResult,
        profile=PROFILE,
        idempotent=True,  # the same content again stores nothing new
    ),
    ToolSpec(
        name="supersede_memory",
        title="Supersede memory",
        description="Mark an old memory as outdated when replaced by newer information. Call this when store_memory "
        "suggests it.",
        args_model=SupersedeMemoryArgs,
        result_model=SupersedeMemoryResult,
        profile=PROFILE,
        idempotent=True,
    ),
    ToolSpec(
        name="search_memories",
        title="Search memories",
        description="Search for relevant memories based on a query. Automatically filters out superseded memories.",
        args_model=SearchMemoriesArgs,
        result_model=MemoriesResult,
        profile=PROFILE,
        read_only=True,
        idempotent=True,
        scope="read",
    ),
    ToolSpec(
        name="list_recent_memories",
        title="List recent memories",
        description="Get the most recently created memories. Useful for reviewing what was just stored.",
        args_model=ListRecentMemoriesArgs,
        result_model=MemoriesResult,
        profile=PROFILE,
        read_only=True,
        idempotent=True,
        scope="read",
    ),
]
