"""Seed 000 §6 tool contracts (the `fragments` profile). Names and parameters are the seed's exactly."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints

from memento_shared.domain.fragments import FragmentType, RelationType
from memento_shared.tools.spec import INDEXED, PARTIAL, Args, ToolSpec

PROFILE = "fragments"

AgentId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:@-]{1,64}$")]
FragmentId = Annotated[str, StringConstraints(min_length=1, max_length=64)]
# `\S`: a blank keyword, tool name or session id would pass a length check and then mean nothing (a keyword of
# spaces normalises to none at all, so the fragment could be found by no keyword).
Keyword = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"\S")]
Topic = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"\S")]
Score = Annotated[float, Field(ge=0.0, le=1.0)]
Workspace = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
# the reference project's `workspace` argument: this call works in that workspace of the credential's tenant (it must
# be allowed by the credential) instead of the connection's (X-Memento-Workspace)
WORKSPACE_DESCRIPTION = "Work in this workspace instead of the connection's (one the credential allows)"


CaseId = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"\S")]
BATCH_MAX = 200


class FragmentFields(Args):
    """What one fragment is made of: remember's arguments, and each entry of batch_remember."""

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
    isAnchor: bool = Field(False, description="Exempt from decay, TTL demotion and expiration")
    caseId: CaseId | None = Field(
        None, description="The task or case this fragment belongs to, e.g. debug-nginx-ssl-2026-04-20 (recall filter)"
    )


# batch_remember publishes an entry's fields as its items' schema (without pydantic's titles)
_ENTRY_SCHEMA = {k: v for k, v in FragmentFields.model_json_schema().items() if k not in ("title", "description")}
for _prop in _ENTRY_SCHEMA["properties"].values():
    _prop.pop("title", None)


class RememberArgs(FragmentFields):
    linkedTo: Annotated[list[FragmentId], Field(max_length=20)] | None = Field(
        None, description="Fragment ids to link to at creation"
    )
    scope: Literal["permanent", "session"] = Field(
        "permanent", description="permanent (default) or session (working memory, expires with the session)"
    )
    agentId: AgentId | None = Field(None, description="Agent namespace; 'default' when omitted")
    workspace: Workspace | None = Field(None, description=WORKSPACE_DESCRIPTION)


class BatchRememberArgs(Args):
    fragments: Annotated[
        list[Any],
        Field(
            min_length=1,
            max_length=BATCH_MAX,
            json_schema_extra={"items": _ENTRY_SCHEMA},
        ),
    ] = Field(
        description=f"Up to {BATCH_MAX} fragments, each with remember's fields (content, topic, type, keywords, "
        "importance, source, isAnchor, caseId). Each is checked on its own: a bad entry is answered with its error "
        "and the others are stored."
    )
    agentId: AgentId | None = Field(None, description="Agent namespace; 'default' when omitted")
    workspace: Workspace | None = Field(None, description=WORKSPACE_DESCRIPTION)


class BatchEntryError(BaseModel):
    code: str
    message: str
    field: str | None = None
    retryable: bool


class BatchEntryResult(BaseModel):
    index: int = Field(description="The entry's position in `fragments`")
    id: str | None = Field(None, description="The stored fragment (or its existing duplicate)")
    created: bool | None = Field(None, description="false: that content was already stored (or earlier in the batch)")
    indexed: bool | None = Field(None, description=INDEXED)
    error: BatchEntryError | None = Field(None, description="Why this entry was not stored; the others were")


class BatchRememberResult(BaseModel):
    success: bool
    results: list[BatchEntryResult] = Field(description="One per entry, in order")
    created: int = Field(description="New fragments stored")
    duplicates: int = Field(description="Entries whose content was already stored")
    failed: int = Field(description="Entries refused (see their error)")


class RememberResult(BaseModel):
    success: bool
    id: str
    created: bool
    indexed: bool = Field(description=INDEXED)
    sessionId: str | None = Field(None, description="For scope session: the session whose working memory holds it")


class TimeRange(Args):
    from_: Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"\S")] | None = Field(
        None,
        alias="from",
        description='Start: an ISO date or instant, or an expression in English or Korean ("3 days ago", '
        '"last week", "지난 주", "어제"): from the start of the period it names',
    )
    to: Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"\S")] | None = Field(
        None, description="End, the same way: up to the end of the period it names"
    )


FRAGMENT_FIELDS = (
    "id", "content", "topic", "type", "keywords", "importance", "ttl_tier", "is_anchor", "created_at",
    "accessed_at", "similarity", "tier", "linked", "caseId",
)  # fmt: skip
FragmentField = Literal[FRAGMENT_FIELDS]  # type: ignore[valid-type]
PAGE_MAX = 50


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
    timeRange: TimeRange | None = Field(
        None, description="Only fragments created in this range (UTC): each bound an ISO date or instant, or words"
    )
    asOf: Annotated[str, StringConstraints(min_length=10, max_length=40)] | None = Field(
        None,
        description="ISO instant: recall as the store was then (nothing created after it; contents and supersession "
        "as they were). Matching reads today's text",
    )
    minImportance: Score | None = Field(None, description="Only fragments at least this important")
    isAnchor: bool | None = Field(None, description="true: only anchors; false: no anchors")
    caseId: CaseId | None = Field(None, description="Only fragments remembered with this caseId")
    fields: Annotated[list[FragmentField], Field(min_length=1, max_length=len(FRAGMENT_FIELDS))] | None = Field(
        None, description="Return only these fields of each fragment (id always)"
    )
    pageSize: Annotated[int, Field(ge=1, le=PAGE_MAX)] | None = Field(
        None,
        description=f"Page through every match, this many a page (at most {PAGE_MAX}; with a cursor, the first "
        "page's unless given again); the answer's nextCursor fetches the next page",
    )
    cursor: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = Field(
        None,
        description="nextCursor of the previous page: the pages follow the first page's snapshot (no repeats or gaps "
        "while others write); the query arguments of the first page apply",
    )
    excludeSeen: bool = Field(False, description="Leave out fragments a context call of this session already loaded")
    agentId: AgentId | None = Field(None, description="Agent namespace")
    workspace: Workspace | None = Field(
        None, description=WORKSPACE_DESCRIPTION + "; a cursor's pages are read with the same workspace"
    )


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
    caseId: str | None = None


class RecalledFields(BaseModel):
    """A recalled fragment whose fields recall's `fields` may have narrowed: only id is always there."""

    id: str
    content: str | None = None
    topic: str | None = None
    type: str | None = None
    keywords: list[str] | None = None
    importance: float | None = None
    ttl_tier: str | None = None
    is_anchor: bool | None = None
    created_at: str | None = None
    accessed_at: str | None = None
    similarity: float | None = None
    tier: str | None = None
    linked: bool | None = None
    caseId: str | None = None


class RecallResult(BaseModel):
    fragments: list[RecalledFields]
    count: int
    totalTokens: int
    tokenBudget: int
    nextCursor: str | None = Field(None, description="With pageSize or cursor: the next page's cursor; null at the end")
    meaningSearch: Literal["partial"] | None = Field(None, description=PARTIAL)


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
    indexed: bool = Field(description=INDEXED)


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
    workspace: Workspace | None = Field(None, description=WORKSPACE_DESCRIPTION)


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
    embeddingBacklog: int = Field(
        description="Fragments whose current content has no vector in the active profile yet: found by meaning by "
        "their writer's searches (issue 47), by other readers once the embedder has written it"
    )
    embeddingBacklogOldestSeconds: float | None = Field(
        description="How long the oldest of them has waited since it was written (or its content amended); null "
        "when none waits"
    )
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


class FragmentHistoryArgs(Args):
    id: FragmentId = Field(description="The fragment whose changes to list")
    agentId: AgentId | None = Field(None, description="Agent namespace")


class FragmentState(BaseModel):
    content: str
    topic: str
    keywords: list[str]
    type: str
    importance: float


class FragmentChange(BaseModel):
    version: int = Field(description="1 for the first amend, and so on")
    changed_at: str
    amended_by: str | None = Field(None, description="The agent that amended it")
    before: FragmentState
    after: FragmentState


class FragmentHistoryResult(BaseModel):
    current: RecalledFragment
    history: list[FragmentChange] = Field(description="Every amend, oldest first")
    supersedes: list[str] = Field(description="Fragments this one replaced, nearest first (visible ones)")
    supersededBy: list[str] = Field(description="The chain of fragments that replaced this one, nearest first")


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
        name="batch_remember",
        title="Remember many",
        description=f"Store up to {BATCH_MAX} fragments in one call and one transaction, each answered on its own "
        "({index, id, created} or {index, error}): a bad entry never stops the others; the same content twice is "
        "stored once.",
        args_model=BatchRememberArgs,
        result_model=BatchRememberResult,
        profile=PROFILE,
        idempotent=True,
        entries="fragments",
    ),
    ToolSpec(
        name="fragment_history",
        title="Fragment history",
        description="How a fragment changed: its current state, every amend (before and after, when and by whom), "
        "and the fragments it replaced or that replaced it.",
        args_model=FragmentHistoryArgs,
        result_model=FragmentHistoryResult,
        profile=PROFILE,
        read_only=True,
        idempotent=True,
        scope="read",
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
