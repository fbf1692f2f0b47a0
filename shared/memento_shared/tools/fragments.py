"""Seed 000 §6 tool contracts (the `fragments` profile). Names and parameters are the seed's exactly."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from memento_shared.domain.fragments import FragmentType, RelationType
from memento_shared.tools.spec import Args, ToolSpec

PROFILE = "fragments"

AgentId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:@-]{1,64}$")]
FragmentId = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Keyword = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Topic = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"\S")]
Score = Annotated[float, Field(ge=0.0, le=1.0)]


class RememberArgs(Args):
    content: Annotated[str, StringConstraints(min_length=1, max_length=20000, pattern=r"\S")] = Field(
        description="Fragment content. ≤300 characters; truncated with an ellipsis on overflow. PII is masked."
    )
    topic: Topic = Field(description="Categorical topic label, e.g. database, deployment, security")
    type: FragmentType = Field(description="fact / decision / error / preference / procedure / relation")
    keywords: Annotated[list[Keyword], Field(max_length=20)] | None = Field(
        None, description="Search keywords; extracted by term frequency when omitted"
    )
    importance: Score | None = Field(None, description="0.0–1.0; a type-specific default when omitted")
    source: Annotated[str, StringConstraints(max_length=500)] | None = Field(None, description="Provenance")
    linkedTo: Annotated[list[FragmentId], Field(max_length=20)] | None = Field(
        None, description="Fragment ids to link to at creation"
    )
    scope: Literal["permanent", "session"] = Field(
        "permanent", description="permanent (default) or session (working memory, expires with the session)"
    )
    isAnchor: bool = Field(False, description="Exempt from decay, TTL demotion and expiration")
    agentId: AgentId | None = Field(None, description="Agent namespace; 'default' when omitted")


class RememberResult(BaseModel):
    success: bool
    id: str
    created: bool


class RecallArgs(Args):
    keywords: Annotated[list[Keyword], Field(max_length=20)] | None = Field(
        None, description="L1 Redis set intersection keys; also the L2 filter"
    )
    topic: Topic | None = Field(None, description="Topic filter applied at every tier")
    type: FragmentType | None = Field(None, description="Type filter applied at every tier")
    text: Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")] | None = Field(
        None, description="Natural-language query; runs semantic + lexical search"
    )
    tokenBudget: Annotated[int, Field(ge=1, le=100_000)] = Field(1000, description="Maximum cumulative tokens")
    includeLinks: bool = Field(True, description="Append one-hop linked fragments")
    linkRelationType: RelationType | None = Field(None, description="Edge type to follow for linked fragments")
    threshold: Score | None = Field(None, description="Minimum cosine similarity for vector results")
    agentId: AgentId | None = Field(None, description="Agent namespace")


class RecalledFragment(BaseModel):
    id: str
    content: str
    topic: str
    type: str
    keywords: list[str]
    importance: float
    ttl_tier: str
    is_anchor: bool
    created_at: str
    accessed_at: str | None = None
    similarity: float | None = None
    tier: str | None = None
    linked: bool = False


class RecallResult(BaseModel):
    fragments: list[RecalledFragment]
    count: int
    totalTokens: int
    tokenBudget: int


SPECS = [
    ToolSpec(
        name="remember",
        title="Remember",
        description="Store a typed knowledge fragment (fact, decision, error, preference, procedure, relation). "
        "Content is PII-masked and truncated to 300 characters; an identical fragment returns its existing id.",
        args_model=RememberArgs,
        result_model=RememberResult,
        profile=PROFILE,
        idempotent=True,
    ),
    ToolSpec(
        name="recall",
        title="Recall",
        description="Find fragments by keywords (Redis L1, Postgres GIN L2) and by meaning (vector + lexical L3), "
        "ranked and cut to a token budget, with one-hop linked fragments.",
        args_model=RecallArgs,
        result_model=RecallResult,
        profile=PROFILE,
        read_only=True,
        idempotent=True,
        scope="read",
    ),
]
