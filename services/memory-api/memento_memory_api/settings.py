"""memory-api's settings: its port, the dialects' limits, recall's and documents' ranking, the outbox relay, Redis on
the request path and seed 004's lifecycle tools."""

from __future__ import annotations

from pydantic import Field, model_validator

from memento_shared.settings import (
    DatabaseSettings,
    HeuristicSettings,
    InternalSettings,
    LifecycleSettings,
    MemoryConfigSettings,
    QueueSettings,
    ServiceSettings,
    SessionSettings,
)


class MemoryApiSettings(
    ServiceSettings,
    DatabaseSettings,
    QueueSettings,
    InternalSettings,
    SessionSettings,
    HeuristicSettings,
    LifecycleSettings,
    MemoryConfigSettings,
):
    """memory-api's own variables over the sections it shares: telemetry, the database, the queue, the internal
    secret, sessions, the language models, session maintenance and MEMORY_CONFIG."""

    memory_api_port: int = Field(56333, alias="MEMORY_API_PORT")
    embedder_url: str = Field("http://127.0.0.1:56334", alias="EMBEDDER_URL")
    consolidate_timeout_s: float = Field(120.0, alias="CONSOLIDATE_TIMEOUT_SECONDS")
    # every dialect but `remember` (300, seed 000) stores text whole up to this many characters, and refuses longer
    memory_max_chars: int = Field(8000, alias="MEMORY_MAX_CHARS", ge=1, le=100_000)
    # the documents dialect's limit per document (below the gateway's body limit, so the tool answers, not HTTP)
    document_max_bytes: int = Field(512 * 1024, alias="DOCUMENT_MAX_BYTES", ge=1)
    # memory.search's weighted RRF: k, each list's weight, the canonical boost, and the lexical weight × (share of the
    # query's idf its best chunk holds) ** power. Chosen on bench.documents' labelled queries, the same choice on each
    # held-out fold (bench/README.md); seed 001 Part 8's are 60, 0.4, 0.5, 0.1, 0.15 and no coverage term (power 0)
    document_rrf_k: float = Field(10.0, alias="DOCUMENT_RRF_K", gt=0)
    document_lexical_weight: float = Field(0.4, alias="DOCUMENT_LEXICAL_WEIGHT", ge=0)
    document_semantic_weight: float = Field(0.5, alias="DOCUMENT_SEMANTIC_WEIGHT", ge=0)
    document_trigram_weight: float = Field(0.05, alias="DOCUMENT_TRIGRAM_WEIGHT", ge=0)
    document_canonical_boost: float = Field(0.02, alias="DOCUMENT_CANONICAL_BOOST", ge=0)
    document_lexical_coverage_power: float = Field(2.0, alias="DOCUMENT_LEXICAL_COVERAGE_POWER", ge=0, le=8)
    document_neighbour_lift: float = Field(0.0, alias="DOCUMENT_NEIGHBOUR_LIFT", ge=0, lt=1)  # off: the folds chose 0
    document_neighbour_top: int = Field(5, alias="DOCUMENT_NEIGHBOUR_TOP", ge=0, le=50)
    # every search embeds its text's question, not all of it (memory-api recall/question.py): at most this many
    # tokens. 32 leaves every LoCoMo question whole; a 300-word turn embeds its last question (~16 tokens)
    query_embed_max_tokens: int = Field(32, alias="QUERY_EMBED_MAX_TOKENS", ge=8, le=512)
    # a canonical chunk ranks above a note saying the same thing among the top results: they share this share of the
    # larger one's distinct words (0: off)
    document_canonical_same_words: float = Field(0.7, alias="DOCUMENT_CANONICAL_SAME_WORDS", ge=0, le=1)
    # store_memory embeds on the request path: how long it waits for the vector before storing without it
    inline_embedding_timeout_s: float = Field(1.0, alias="INLINE_EMBEDDING_TIMEOUT_SECONDS", ge=0, le=30)
    # a search also scores, by meaning, the caller's own newest rows still waiting for their vector (memory-api
    # recall/fresh.py, issue 47): the newest this many written rows are read, and those without a vector embedded up
    # to this many tokens (the model's time grows with every token: ~2.4 ms each on one core). 0 rows: off
    recall_fresh_rows: int = Field(8, alias="RECALL_FRESH_ROWS", ge=0, le=64)
    recall_fresh_tokens: int = Field(1024, alias="RECALL_FRESH_TOKENS", ge=16, le=8192)
    # store_memory's `similar` cut-off (cosine) for an embedding profile not calibrated in recall/similar.py
    similar_min_score: float = Field(0.5, alias="SIMILAR_MIN_SCORE", ge=0, le=1)
    # the skip list's meaning match (cosine) for a profile not calibrated in recall/similar.py; unset: words only
    skip_min_score: float | None = Field(None, alias="SKIP_MIN_SCORE", ge=0, le=1)
    # recall by text: partitions up to this many vectors are scanned exactly, larger ones through HNSW
    vector_exact_max_rows: int = Field(10000, alias="VECTOR_EXACT_MAX_ROWS")
    # recall by text's relevance order (recall/relevance.py, issue 28): chosen on LoCoMo's five development
    # conversations by the rule the held-out folds use (bench/README.md "LoCoMo: what issue 28 changed"); 0 turns a
    # step off
    recall_context_weight: float = Field(2.0, alias="RECALL_CONTEXT_WEIGHT", ge=0, le=4)
    recall_neighbour_share: float = Field(0.5, alias="RECALL_NEIGHBOUR_SHARE", ge=0, le=1)
    recall_neighbour_window: int = Field(2, alias="RECALL_NEIGHBOUR_WINDOW", ge=0, le=5)
    recall_context_candidates: int = Field(30, alias="RECALL_CONTEXT_CANDIDATES", ge=1, le=200)
    recall_lift: float = Field(0.5, alias="RECALL_LIFT", ge=0, lt=1)
    recall_lift_top: int = Field(5, alias="RECALL_LIFT_TOP", ge=0, le=50)
    recall_time_boost: float = Field(0.6, alias="RECALL_TIME_BOOST", ge=0, le=2)
    recall_decompose: float = Field(0.0, alias="RECALL_DECOMPOSE", ge=0, le=2)  # off: the folds did not choose it
    # issue 53: words matched by their stems (text.stems); the answer lift (a best row that asks a question gives the
    # next row of its thread this share of its score); and the question discount (a row that asks scores this much
    # less: it points to its answer more than it holds one)
    recall_stems: bool = Field(True, alias="RECALL_STEMS")
    recall_answer_lift: float = Field(0.85, alias="RECALL_ANSWER_LIFT", ge=0, lt=1)
    recall_question_discount: float = Field(0.2, alias="RECALL_QUESTION_DISCOUNT", ge=0, lt=1)
    # the weight of the rounds list (recall/rounds.py: the vector hits and the rows beside them, by their round's
    # vector); 0: no rounds read
    recall_rounds: float = Field(1.0, alias="RECALL_ROUNDS", ge=0, le=4)
    # rows whose context score is under this share of the best one's are left out of the context list
    recall_context_floor: float = Field(0.2, alias="RECALL_CONTEXT_FLOOR", ge=0, lt=1)
    # the second hop (recall/hops.py): the weight of its list for a question asking for a list of things about someone
    # (0: none read), and how many of the best rows before it keep their places whatever it adds
    recall_hop: float = Field(3.0, alias="RECALL_HOP", ge=0, le=16)
    recall_hop_keep: int = Field(3, alias="RECALL_HOP_KEEP", ge=0, le=20)
    # whether the hop asks for the kinds that are not names (activities, events, food, animals, instruments; links.py)
    recall_hop_word_kinds: bool = Field(True, alias="RECALL_HOP_WORD_KINDS")
    # the rows the hop reads at most (the newest of those holding the person and a kind or link asked for)
    recall_hop_rows: int = Field(400, alias="RECALL_HOP_ROWS", ge=1, le=1000)
    # issue 53: a question relating two events ("what did X do after Y?"; text.relations): the rows on the asked side
    # of the anchor's time score `1 +` this, those on the wrong side `1 -` it (recall.timeline; 0: off)
    recall_relation: float = Field(0.3, alias="RECALL_RELATION", ge=0, le=0.9)
    # Seed 000 defaults this to false; Memento's queues need Redis, so here it only switches L1 and caching.
    redis_enabled: bool = Field(True, alias="REDIS_ENABLED")
    # how long memory-api waits for Redis on a request (L1, working memory) before it goes on without it
    redis_timeout_s: float = Field(1.0, alias="REDIS_TIMEOUT_SECONDS", gt=0, le=30)
    cache_enabled: bool | None = Field(None, alias="CACHE_ENABLED")
    cache_db_ttl: int = Field(300, alias="CACHE_DB_TTL")
    cache_session_ttl: int | None = Field(None, alias="CACHE_SESSION_TTL")
    outbox_batch_size: int = Field(500, alias="OUTBOX_BATCH_SIZE")
    outbox_poll_interval_s: float = Field(1.0, alias="OUTBOX_POLL_INTERVAL_SECONDS")
    # published events created longer ago than this are deleted (0: kept for ever); unpublished ones are never
    outbox_retention_hours: float = Field(168.0, alias="OUTBOX_RETENTION_HOURS", ge=0)
    # after a NOTIFY, wait this long for more commits before claiming: one round for many events under load
    outbox_gather_s: float = Field(0.01, alias="OUTBOX_GATHER_SECONDS", ge=0, le=1)
    # WAITAOF before marking events published, so a Redis crash cannot lose an acknowledged enqueue
    outbox_durable_enqueue: bool = Field(True, alias="OUTBOX_DURABLE_ENQUEUE")
    # seed 004's lifecycle tools (§9.3's keys, §8's limits); MEMORY_MAX_CHARS does not apply to turn payloads
    memory_recent_context_items: int = Field(30, alias="MEMORY_RECENT_CONTEXT_ITEMS", ge=0, le=1000)
    memory_recall_facts_limit: int = Field(20, alias="MEMORY_RECALL_FACTS_LIMIT", ge=0, le=200)
    memory_search_limit: int = Field(5, alias="MEMORY_SEARCH_LIMIT", ge=0, le=100)
    memory_compact_threshold: float = Field(0.8, alias="MEMORY_COMPACT_THRESHOLD", gt=0, le=1)
    memory_l1_retention_days: float = Field(1.0, alias="MEMORY_L1_RETENTION_DAYS", gt=0)
    memory_l2_retention_days: float = Field(7.0, alias="MEMORY_L2_RETENTION_DAYS", gt=0)
    memory_heuristic_max_output_tokens: int = Field(800, alias="MEMORY_HEURISTIC_MAX_OUTPUT_TOKENS", ge=16)
    # the model's reads of acknowledged turns at once per process (after_ack): it waits on the network, not the CPU
    memory_heuristic_concurrency: int = Field(8, alias="MEMORY_HEURISTIC_CONCURRENCY", ge=1, le=256)
    memory_max_items: int = Field(256, alias="MEMORY_MAX_ITEMS", ge=1)  # items per array of a turn payload
    memory_max_part_chars: int = Field(100_000, alias="MEMORY_MAX_PART_CHARS", ge=1)  # characters per content part
    # a turn's `processing` guard older than this is taken over by a retry (its first commit died)
    memory_turn_stale_seconds: float = Field(60.0, alias="MEMORY_TURN_STALE_SECONDS", gt=0)

    @model_validator(mode="after")
    def _cache_defaults(self) -> MemoryApiSettings:
        if self.cache_enabled is None:
            self.cache_enabled = self.redis_enabled
        if self.cache_session_ttl is None:
            self.cache_session_ttl = self.session_ttl_minutes * 60
        return self
