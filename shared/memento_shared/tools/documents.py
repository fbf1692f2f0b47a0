"""Seed 001 tool contracts (the `documents` profile), as its Part 5 registers them (docs/dialects.md "documents")."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from memento_shared.tools.spec import INDEXED, PARTIAL, Args, ToolSpec

PROFILE = "documents"

DocClass = Literal["app_spec", "feature_spec", "implementation_plan"]
Kind = Literal["spec", "plan", "decision", "troubleshooting", "note"]
CanonicalKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_./-]{0,199}$")]
Uuid = Annotated[
    str, StringConstraints(pattern=r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
]
Title = Annotated[str, StringConstraints(min_length=1, max_length=500, pattern=r"\S")]
Tag = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"\S")]
VersionNum = Annotated[int, Field(ge=1)]


class UpsertArgs(Args):
    canonicalKey: CanonicalKey = Field(description='Stable identifier, e.g. "app" or "feature/auth"')
    docClass: DocClass = Field(description="app_spec, feature_spec or implementation_plan")
    title: Title
    # no maxLength: a document over DOCUMENT_MAX_BYTES (default 512 KiB) is PAYLOAD_TOO_LARGE, answered by the tool
    contentMarkdown: str = Field(description="The whole document, markdown")
    tags: Annotated[list[Tag], Field(max_length=50)] | None = None
    idempotencyKey: Uuid = Field(description="The same key and request again answers the same and writes nothing")


class UpsertResult(BaseModel):
    itemId: str
    versionNum: int
    created: bool = Field(description="True when this call wrote a new version")
    indexed: bool | None = Field(None, description=f"For its chunks: {INDEXED}. As of the key's first answer")


class GetArgs(Args):
    canonicalKey: CanonicalKey
    versionNum: VersionNum | None = Field(None, description="The latest when omitted")


class Document(BaseModel):
    itemId: str
    canonicalKey: str
    docClass: str | None
    title: str
    tags: list[str]
    versionNum: int
    contentMarkdown: str
    createdAt: str
    updatedAt: str


class SectionRef(BaseModel):
    anchor: str
    headingPath: list[str]
    level: int
    title: str


class OutlineResult(BaseModel):
    canonicalKey: str
    versionNum: int
    sections: list[SectionRef]


class GetSectionArgs(Args):
    canonicalKey: CanonicalKey
    sectionAnchor: Annotated[str, StringConstraints(min_length=1, max_length=400)]


class SectionResult(BaseModel):
    canonicalKey: str
    versionNum: int
    anchor: str
    headingPath: list[str]
    title: str
    contentMarkdown: str = Field(description="The section with its subsections")


class CommitEntry(Args):
    kind: Kind
    title: Title
    content: str = Field(description="Markdown; at most DOCUMENT_MAX_BYTES")
    canonicalKey: CanonicalKey | None = Field(None, description="Versions that canonical document")
    tags: Annotated[list[Tag], Field(max_length=50)] | None = None


class CommitArgs(Args):
    idempotencyKey: Uuid
    entries: Annotated[list[CommitEntry], Field(min_length=1, max_length=50)]
    sessionId: Uuid | None = None


class CommittedItem(BaseModel):
    itemId: str
    versionNum: int
    created: bool
    indexed: bool | None = Field(None, description=f"For its chunks: {INDEXED}. As of the key's first answer")


class CommitResult(BaseModel):
    commitId: str
    items: list[CommittedItem]


class ContextPackArgs(Args):
    canonicalKey: CanonicalKey
    goal: Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")]
    maxChars: Annotated[int, Field(ge=1, le=1_000_000)] = 8000


class PackedSection(BaseModel):
    anchor: str
    headingPath: list[str]
    title: str
    contentMarkdown: str


class ContextPackResult(BaseModel):
    canonicalKey: str
    versionNum: int
    sections: list[PackedSection] = Field(description="The sections most relevant to the goal, in document order")
    totalChars: int


class SearchArgs(Args):
    query: Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")]
    kinds: Annotated[list[Kind], Field(min_length=1, max_length=5)] | None = None
    includeArchived: bool = False
    limit: Annotated[int, Field(ge=1, le=100)] = 20


class SearchHit(BaseModel):
    itemId: str
    title: str
    kind: str
    isCanonical: bool
    headingPath: list[str]
    sectionAnchor: str
    excerpt: str = Field(description="The chunk's first 300 characters")
    score: float


class SearchResult(BaseModel):
    results: list[SearchHit]
    meaningSearch: Literal["partial"] | None = Field(None, description=PARTIAL)


class RestoreArgs(Args):
    goal: Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")] | None = None
    kinds: Annotated[list[Kind], Field(min_length=1, max_length=5)] | None = None
    maxItems: Annotated[int, Field(ge=1, le=100)] = 12
    maxChars: Annotated[int, Field(ge=1, le=1_000_000)] = 30000
    includeCanonical: bool = True
    includeRecentTroubleshooting: bool = True


class RestoredItem(BaseModel):
    itemId: str
    kind: str
    title: str
    versionNum: int
    reason: str = Field(description="pinned, canonical, latest_snapshot, recent_troubleshooting or goal")
    sectionAnchors: list[str] | None = Field(
        None, description="For a canonical document the goal brought in (reason canonical): the sections included"
    )


class RestoreResult(BaseModel):
    bundle: str = Field(description="Markdown; the same for the same store and arguments, byte for byte")
    items: list[RestoredItem]
    totalChars: int


def _spec(name: str, title: str, description: str, args, result, **extra) -> ToolSpec:
    return ToolSpec(name, title, description, args, result, PROFILE, **extra)


_READ = {"read_only": True, "idempotent": True, "scope": "read"}
SPECS = [
    _spec(
        "memory.commit",
        "Commit memory",
        "Commit memory items with idempotency guarantees.",
        CommitArgs,
        CommitResult,
        idempotent=True,
    ),
    _spec(
        "memory.search",
        "Search memory",
        "Hybrid lexical (BM25) + semantic + trigram search across the workspace's documents, fused by weighted RRF "
        "with a boost for canonical documents.",
        SearchArgs,
        SearchResult,
        **_READ,
    ),
    _spec(
        "memory.restore",
        "Restore context",
        "Produce a deterministic context bundle for session bootstrap.",
        RestoreArgs,
        RestoreResult,
        **_READ,
    ),
    _spec(
        "canonical.context_pack",
        "Context pack",
        "Build a context pack of relevant sections for a goal.",
        ContextPackArgs,
        ContextPackResult,
        **_READ,
    ),
    _spec(
        "canonical.upsert",
        "Upsert canonical document",
        "Create or update a canonical document (spec, plan): a new version only when its content changed, chunked "
        "along its headings; idempotent on idempotencyKey.",
        UpsertArgs,
        UpsertResult,
        idempotent=True,
    ),
    _spec(
        "canonical.get",
        "Get canonical document",
        "Retrieve a canonical document by key (a version, or the latest).",
        GetArgs,
        Document,
        **_READ,
    ),
    _spec(
        "canonical.outline",
        "Document outline",
        "Get the section structure of a canonical document.",
        GetArgs,
        OutlineResult,
        **_READ,
    ),
    _spec(
        "canonical.get_section",
        "Document section",
        "Get a specific section by anchor, with its subsections.",
        GetSectionArgs,
        SectionResult,
        **_READ,
    ),
]
