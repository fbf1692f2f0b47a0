"""Seed 001 tool contracts (the `documents` profile), as its Part 5 registers them (DIALECTS.md "documents").
Built so far: canonical.upsert, canonical.get, canonical.outline, canonical.get_section. Not yet: memory.commit,
memory.search, memory.restore, canonical.context_pack and the MCP resources (README "Status")."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from memento_shared.tools.spec import Args, ToolSpec

PROFILE = "documents"

DocClass = Literal["app_spec", "feature_spec", "implementation_plan"]
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


def _spec(name: str, title: str, description: str, args, result, **extra) -> ToolSpec:
    return ToolSpec(name, title, description, args, result, PROFILE, **extra)


_READ = {"read_only": True, "idempotent": True, "scope": "read"}
SPECS = [
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
