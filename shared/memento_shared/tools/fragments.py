"""Seed 000 §6 tool contracts (the `fragments` profile). Names and parameters are the seed's exactly."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from memento_shared.domain.fragments import FragmentType, RelationType
from memento_shared.tools.spec import Args, ToolSpec

PROFILE = "fragments"

AgentId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:@-]{1,64}$")]
FragmentId = Annotated[str, StringConstraints(min_length=1, max_length=64)]
# `\S`: a blank keyword, tool name or session id would pass a length check and then mean nothing (a keyword of
# spaces normalises to none at all, so the fragment could be found by no keyword).
Keyword = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"\S")]
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
    sessionId: str | None = Field(None, description="For scope session: the session whose working memory holds it")


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
    includeSuperseded: bool = Field(
        False, description="Also return fragments another has superseded (amend's supersedes, supersede_memory)"
    )
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


ListItem = Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")]
SessionId = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"\S")]


class ForgetArgs(Args):
    id: FragmentId | None = Field(None, description="Delete one fragment by id")
    topic: Topic | None = Field(None, description="Delete every fragment with this topic")
    force: bool = Field(False, description="Also delete permanent-tier and anchor fragments")
    agentId: AgentId | None = Field(None, description="Agent namespace")


class ForgetResult(BaseModel):
    success: bool
    deleted: list[str]
    count: int
    skipped: list[str] = Field(description="permanent-tier or anchor fragments kept because force was not set")


class LinkArgs(Args):
    fromId: FragmentId = Field(description="Source fragment id")
    toId: FragmentId = Field(description="Target fragment id")
    relationType: RelationType = Field(
        "related", description="related / caused_by / resolved_by / part_of / contradicts"
    )
    agentId: AgentId | None = Field(None, description="Agent namespace")


class LinkResult(BaseModel):
    success: bool
    fromId: str
    toId: str
    relationType: str


class AmendArgs(Args):
    id: FragmentId = Field(description="Fragment to modify")
    content: Annotated[str, StringConstraints(min_length=1, max_length=20000, pattern=r"\S")] | None = Field(
        None, description="Replacement content; PII masked, truncated at 300 characters"
    )
    topic: Topic | None = Field(None, description="Replacement topic")
    keywords: Annotated[list[Keyword], Field(max_length=20)] | None = Field(None, description="Replacement keywords")
    type: FragmentType | None = Field(None, description="Replacement type")
    importance: Score | None = Field(None, description="Replacement importance")
    isAnchor: bool | None = Field(None, description="Set or clear anchor status")
    supersedes: bool = Field(
        False,
        description="Keep the original: store the amended fragment as a new one, link original -superseded_by-> new "
        "and lower the original's importance",
    )
    agentId: AgentId | None = Field(None, description="Agent namespace")


class AmendResult(BaseModel):
    success: bool
    id: str
    version: int = Field(description="How many earlier states are archived in fragment_versions")
    supersededId: str | None = None


class TaskEffectiveness(Args):
    overall_success: bool
    tool_highlights: Annotated[list[ListItem], Field(max_length=50)] = []
    tool_pain_points: Annotated[list[ListItem], Field(max_length=50)] = []


class ReflectArgs(Args):
    summary: Annotated[str, StringConstraints(min_length=1, max_length=20000, pattern=r"\S")] = Field(
        description="Free-text session summary (always stored as a fact)"
    )
    sessionId: SessionId | None = Field(None, description="Session identifier; defaults to the MCP session")
    decisions: Annotated[list[ListItem], Field(max_length=50)] | None = Field(None, description="→ decision fragments")
    errors_resolved: Annotated[list[ListItem], Field(max_length=50)] | None = Field(
        None, description="→ error fragments"
    )
    new_procedures: Annotated[list[ListItem], Field(max_length=50)] | None = Field(
        None, description="→ procedure fragments"
    )
    open_questions: Annotated[list[ListItem], Field(max_length=50)] | None = Field(None, description="→ fact fragments")
    agentId: AgentId | None = Field(None, description="Agent namespace")
    task_effectiveness: TaskEffectiveness | None = Field(None, description="Persisted to task_feedback")


class ReflectedFragment(BaseModel):
    id: str
    type: str
    created: bool


class ReflectResult(BaseModel):
    success: bool
    fragments: list[ReflectedFragment]
    count: int
    taskFeedbackRecorded: bool


class ContextArgs(Args):
    tokenBudget: Annotated[int, Field(ge=1, le=100_000)] = Field(2000, description="Maximum tokens loaded")
    types: Annotated[list[FragmentType], Field(min_length=1, max_length=6)] = Field(
        ["preference", "error", "procedure"], description="Fragment types for core memory"
    )
    sessionId: SessionId | None = Field(None, description="Working memory of this session; defaults to the MCP session")
    agentId: AgentId | None = Field(None, description="Agent namespace")


class ContextResult(BaseModel):
    coreMemory: list[RecalledFragment]
    workingMemory: list[dict]
    totalTokens: int
    tokenBudget: int


class ToolFeedbackArgs(Args):
    tool_name: Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"\S")] = Field(
        description="Evaluated tool"
    )
    relevant: bool = Field(description="Were the results pertinent to the intent")
    sufficient: bool = Field(description="Were the results enough to complete the task")
    suggestion: Annotated[str, StringConstraints(max_length=500)] | None = Field(None, description="≤100 chars advised")
    context: Annotated[str, StringConstraints(max_length=200)] | None = Field(None, description="≤50 chars advised")
    session_id: SessionId | None = Field(None, description="Session identifier")
    trigger_type: Literal["sampled", "voluntary"] = Field("voluntary", description="sampled (hook) / voluntary (agent)")


class ToolFeedbackResult(BaseModel):
    success: bool
    id: int


class NoArgs(Args):
    pass


class ConsolidationRun(BaseModel):
    trigger: Literal["cron", "on_demand"]
    startedAt: str
    finishedAt: str
    stages: dict[str, int] = Field(description="Per-stage counts, the ten stages in order")


class ConsolidationProgress(BaseModel):
    stage: str = Field(description="The stage running")
    done: int = Field(description="Stages finished")
    total: int


class MemoryStatsResult(BaseModel):
    totalFragments: int
    byTtlTier: dict[str, int]
    byType: dict[str, int]
    anchors: int
    embeddingCoverage: float = Field(description="Share of fragments with a vector in the active profile")
    embeddingProfile: str
    meanUtility: float | None
    meanImportance: float | None
    links: int
    outboxBacklog: dict[str, int]
    deadLetters: int
    lastConsolidation: ConsolidationRun | None = Field(
        None, description="The workspace's latest finished consolidation (scheduled or memory_consolidate)"
    )
    consolidationRunning: ConsolidationProgress | None = Field(
        None, description="A consolidation of this workspace in progress, as it last reported"
    )


class MemoryConsolidateResult(BaseModel):
    success: bool
    stages: dict[str, int] = Field(description="Per-stage counts, the ten stages in order")
    contradictions: list[dict]
    stats: dict = Field(default_factory=dict, description="Store figures after the run (stage 10)")
    duration_ms: int


class GraphExploreArgs(Args):
    startId: FragmentId = Field(description="Origin fragment, typically an error")
    agentId: AgentId | None = Field(None, description="Agent namespace")


class GraphEdge(BaseModel):
    fromId: str
    toId: str
    relationType: str


class GraphExploreResult(BaseModel):
    origin: RecalledFragment
    edges: list[GraphEdge]
    nodes: list[RecalledFragment]


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
    ToolSpec(
        name="forget",
        title="Forget",
        description="Delete fragments by id or by topic. Permanent-tier and anchor fragments need force: true.",
        args_model=ForgetArgs,
        result_model=ForgetResult,
        profile=PROFILE,
        destructive=True,
        idempotent=True,
    ),
    ToolSpec(
        name="link",
        title="Link",
        description="Create a typed directed edge between two fragments (related, caused_by, resolved_by, part_of, "
        "contradicts).",
        args_model=LinkArgs,
        result_model=LinkResult,
        profile=PROFILE,
    ),
    ToolSpec(
        name="amend",
        title="Amend",
        description="Modify a fragment in place, archiving its previous state; id and edges are kept. With "
        "supersedes, the amended version becomes a new fragment and the original is marked superseded.",
        args_model=AmendArgs,
        result_model=AmendResult,
        profile=PROFILE,
    ),
    ToolSpec(
        name="reflect",
        title="Reflect",
        description="At session end, turn a summary, decisions, resolved errors, new procedures and open questions "
        "into typed fragments; task_effectiveness is recorded as task feedback.",
        args_model=ReflectArgs,
        result_model=ReflectResult,
        profile=PROFILE,
    ),
    ToolSpec(
        name="context",
        title="Context",
        description="Load memory at session start: core memory (high-importance preferences, errors and procedures "
        "by default) within a token budget, plus this session's working memory.",
        args_model=ContextArgs,
        result_model=ContextResult,
        profile=PROFILE,
        read_only=True,
        idempotent=True,
        scope="read",
    ),
    ToolSpec(
        name="tool_feedback",
        title="Tool feedback",
        description="Record whether a tool's results were relevant and sufficient.",
        args_model=ToolFeedbackArgs,
        result_model=ToolFeedbackResult,
        profile=PROFILE,
    ),
    ToolSpec(
        name="memory_stats",
        title="Memory statistics",
        description="Fragment counts by TTL tier and type, embedding coverage, mean utility, outbox backlog and "
        "dead letters.",
        args_model=NoArgs,
        result_model=MemoryStatsResult,
        profile=PROFILE,
        read_only=True,
        idempotent=True,
        scope="read",
    ),
    ToolSpec(
        name="memory_consolidate",
        title="Consolidate",
        description="Run the ten-stage consolidation pipeline (TTL moves, decay, expiry, dedup, contradictions, "
        "orphan links, utility, embedding backfill) now and return per-stage counts. Needs an admin credential: it "
        "acts on every agent namespace of the workspace and reports on all of them.",
        args_model=NoArgs,
        result_model=MemoryConsolidateResult,
        profile=PROFILE,
        destructive=True,
        idempotent=True,
        scope="admin",  # deletes and merges across agents, returns workspace-wide pairs and stats
        reports_progress=True,  # the consolidator, after each stage
    ),
    ToolSpec(
        name="graph_explore",
        title="Explore causes",
        description="One hop along caused_by and resolved_by edges from a fragment (typically an error), for root "
        "cause analysis.",
        args_model=GraphExploreArgs,
        result_model=GraphExploreResult,
        profile=PROFILE,
        read_only=True,
        idempotent=True,
        scope="read",
    ),
]
