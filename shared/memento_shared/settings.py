"""Settings every service reads from the environment.

Seed 000 §10.2 names the variables and their defaults; Memento adds the ones its split into services
needs (internal URLs, ports, the internal signing secret). Nothing here is read at import time:
each service builds its settings in its composition root.
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_MEMORY_CONFIG: dict[str, Any] = {
    "ranking": {"importanceWeight": 0.6, "recencyWeight": 0.4, "activationThreshold": 100},
    "staleThresholds": {"procedure": 30, "fact": 60, "decision": 90, "default": 60},
    "linkedFragmentLimit": 10,
}


def _first(*values: str | None) -> str | None:
    return next((v for v in values if v), None)


class Settings(BaseSettings):
    """One flat settings object; each service uses the part it needs."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore", populate_by_name=True)

    # --- server (seed 000 §10.2) ---
    port: int = Field(56332, alias="PORT")
    memento_access_key: str = Field("", alias="MEMENTO_ACCESS_KEY")
    session_ttl_minutes: int = Field(60, alias="SESSION_TTL_MINUTES")
    log_dir: str = Field("/var/log/mcp", alias="LOG_DIR")  # kept for compatibility: Memento logs JSON to stderr
    allowed_origins: str = Field("", alias="ALLOWED_ORIGINS")
    log_level: str = Field("INFO", alias="LOG_LEVEL")

    # --- Memento's own service wiring ---
    bind_host: str = Field("127.0.0.1", alias="MEMENTO_BIND_HOST")
    memory_api_port: int = Field(56333, alias="MEMORY_API_PORT")
    embedder_port: int = Field(56334, alias="EMBEDDER_PORT")
    evaluator_port: int = Field(56335, alias="EVALUATOR_PORT")
    consolidator_port: int = Field(56336, alias="CONSOLIDATOR_PORT")
    memory_api_url: str = Field("http://127.0.0.1:56333", alias="MEMORY_API_URL")
    embedder_url: str = Field("http://127.0.0.1:56334", alias="EMBEDDER_URL")
    internal_secret: str = Field("", alias="MEMENTO_INTERNAL_SECRET")
    data_dir: str = Field("./.memento", alias="MEMENTO_DATA_DIR")
    upstream_timeout_s: float = Field(30.0, alias="UPSTREAM_TIMEOUT_SECONDS")
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

    # --- PostgreSQL: DATABASE_URL, else POSTGRES_* over DB_* ---
    database_url_env: str | None = Field(None, alias="DATABASE_URL")
    migration_database_url_env: str | None = Field(None, alias="MIGRATION_DATABASE_URL")
    postgres_host: str | None = Field(None, alias="POSTGRES_HOST")
    db_host: str | None = Field(None, alias="DB_HOST")
    postgres_port: int | None = Field(None, alias="POSTGRES_PORT")
    db_port: int | None = Field(None, alias="DB_PORT")
    postgres_db: str | None = Field(None, alias="POSTGRES_DB")
    db_name: str | None = Field(None, alias="DB_NAME")
    postgres_user: str | None = Field(None, alias="POSTGRES_USER")
    db_user: str | None = Field(None, alias="DB_USER")
    postgres_password: str | None = Field(None, alias="POSTGRES_PASSWORD")
    db_password: str | None = Field(None, alias="DB_PASSWORD")
    db_max_connections: int = Field(20, alias="DB_MAX_CONNECTIONS")
    db_idle_timeout_ms: int = Field(30000, alias="DB_IDLE_TIMEOUT_MS")
    db_conn_timeout_ms: int = Field(10000, alias="DB_CONN_TIMEOUT_MS")
    db_query_timeout_ms: int = Field(30000, alias="DB_QUERY_TIMEOUT")

    # --- Redis: REDIS_URL, else REDIS_* ---
    # Two roles (docs/scaling.md): REDIS_URL holds state (L1, sessions, working memory, rate limits, page snapshots,
    # OAuth state, progress) and may be a cluster (`redis+cluster://`); REDIS_QUEUE_URL holds arq's queues, the relay's
    # fence and the gateways' pub/sub, and must be one primary (arq's job keys span hash slots). Unset, it is REDIS_URL.
    redis_url_env: str | None = Field(None, alias="REDIS_URL")
    redis_queue_url_env: str | None = Field(None, alias="REDIS_QUEUE_URL")
    # a write to the state Redis that a client is told succeeded (a session, working memory, an L1 entry) first waits
    # until this many replicas have it (WAIT), so a failover cannot lose it; 0: asynchronous replication, no wait
    redis_wait_replicas: int = Field(0, alias="REDIS_WAIT_REPLICAS", ge=0, le=5)
    redis_wait_timeout_ms: int = Field(500, alias="REDIS_WAIT_TIMEOUT_MS", ge=1, le=10_000)
    # Seed 000 defaults this to false; Memento's queues need Redis, so here it only switches L1 and caching.
    redis_enabled: bool = Field(True, alias="REDIS_ENABLED")
    # how long memory-api waits for Redis on a request (L1, working memory) before it goes on without it
    redis_timeout_s: float = Field(1.0, alias="REDIS_TIMEOUT_SECONDS", gt=0, le=30)
    redis_sentinel_enabled: bool = Field(False, alias="REDIS_SENTINEL_ENABLED")
    redis_host: str = Field("localhost", alias="REDIS_HOST")
    redis_port: int = Field(6379, alias="REDIS_PORT")
    redis_password: str = Field("", alias="REDIS_PASSWORD")
    redis_db: int = Field(0, alias="REDIS_DB")
    redis_master_name: str = Field("mymaster", alias="REDIS_MASTER_NAME")
    redis_sentinels: str = Field("localhost:26379", alias="REDIS_SENTINELS")

    # --- caching ---
    cache_enabled: bool | None = Field(None, alias="CACHE_ENABLED")
    cache_db_ttl: int = Field(300, alias="CACHE_DB_TTL")
    cache_session_ttl: int | None = Field(None, alias="CACHE_SESSION_TTL")

    # --- AI services ---
    openai_api_key: str = Field("", alias="OPENAI_API_KEY")
    embedding_model: str = Field("text-embedding-3-small", alias="EMBEDDING_MODEL")
    embedding_dimensions: int = Field(1536, alias="EMBEDDING_DIMENSIONS")
    embedding_provider: str = Field("offline", alias="EMBEDDING_PROVIDER")
    gemini_api_key: str = Field("", alias="GEMINI_API_KEY")

    # --- memory behaviour (seed 000 §10.1), JSON merged over the defaults ---
    memory_config_json: str = Field("", alias="MEMORY_CONFIG")

    # --- telemetry ---
    otel_exporter_otlp_endpoint: str = Field("", alias="OTEL_EXPORTER_OTLP_ENDPOINT")

    # --- workers and the outbox relay (issue 5) ---
    worker_max_tries: int = Field(5, alias="WORKER_MAX_TRIES")
    worker_backoff_base_s: float = Field(1.0, alias="WORKER_BACKOFF_BASE_SECONDS")
    worker_backoff_max_s: float = Field(300.0, alias="WORKER_BACKOFF_MAX_SECONDS")
    worker_job_timeout_s: float = Field(300.0, alias="WORKER_JOB_TIMEOUT_SECONDS")
    # a running job's claim in Redis, renewed while it runs: a killed worker's jobs return after this long
    worker_lease_s: float = Field(30.0, alias="WORKER_LEASE_SECONDS")
    worker_max_jobs: int = Field(0, alias="WORKER_MAX_JOBS")  # 0: the worker's own default
    worker_shutdown_grace_s: float = Field(20.0, alias="WORKER_SHUTDOWN_GRACE_SECONDS")
    # how long Redis keeps a finished job's result (arq keep_result). It only stops a second relay of the same event
    # from running the job again within that time (the handlers are idempotent anyway); at an hour, a steady load grew
    # Valkey's memory for the whole hour (soak)
    worker_result_s: float = Field(300.0, alias="WORKER_RESULT_SECONDS", ge=0)
    # how long a queued job waits for its worker before Redis drops it (arq's own default is one day): longer than
    # any outage of a worker, since the outbox row already says published and nothing would dead-letter it
    worker_job_expiry_s: float = Field(30 * 86400.0, alias="WORKER_JOB_EXPIRY_SECONDS", gt=0)
    outbox_batch_size: int = Field(500, alias="OUTBOX_BATCH_SIZE")
    outbox_poll_interval_s: float = Field(1.0, alias="OUTBOX_POLL_INTERVAL_SECONDS")
    # published events created longer ago than this are deleted (0: kept for ever); unpublished ones are never
    outbox_retention_hours: float = Field(168.0, alias="OUTBOX_RETENTION_HOURS", ge=0)
    # after a NOTIFY, wait this long for more commits before claiming: one round for many events under load
    outbox_gather_s: float = Field(0.01, alias="OUTBOX_GATHER_SECONDS", ge=0, le=1)
    # WAITAOF before marking events published, so a Redis crash cannot lose an acknowledged enqueue
    outbox_durable_enqueue: bool = Field(True, alias="OUTBOX_DURABLE_ENQUEUE")
    # embedding providers (EMBEDDING_PROVIDER: offline | openai | openai_compat | voyage | jina)
    embedding_base_url: str = Field("", alias="EMBEDDING_BASE_URL")
    embedding_api_key: str = Field("", alias="EMBEDDING_API_KEY")
    voyage_api_key: str = Field("", alias="VOYAGE_API_KEY")
    jina_api_key: str = Field("", alias="JINA_API_KEY")
    embedding_batch_size: int = Field(32, alias="EMBEDDING_BATCH_SIZE")
    embedding_batch_window_ms: float = Field(10.0, alias="EMBEDDING_BATCH_WINDOW_MS")
    embedding_concurrency: int = Field(4, alias="EMBEDDING_CONCURRENCY")
    embedding_rate_limit: float = Field(0.0, alias="EMBEDDING_RATE_LIMIT")  # requests/s per provider, 0: none
    embedding_timeout_s: float = Field(30.0, alias="EMBEDDING_TIMEOUT_SECONDS")
    # threads of the offline model; 0: every core but one, which stays free for the services sharing the machine
    embedding_threads: int = Field(0, alias="EMBEDDING_THREADS")
    # the offline model embeds documents in a child session niced by this much (0: on a thread, not niced)
    embedding_document_niceness: int = Field(10, alias="EMBEDDING_DOCUMENT_NICENESS", ge=0, le=19)
    # seed 003's summaries, distillation and crystals: an LLM when LLM_PROVIDER is openai or gemini, else offline
    llm_provider: str = Field("", alias="LLM_PROVIDER")
    llm_model: str = Field("", alias="LLM_MODEL")  # default gpt-4o-mini (openai), gemini-2.5-flash (gemini)
    llm_base_url: str = Field("", alias="LLM_BASE_URL")  # an OpenAI-compatible server, or Gemini's endpoint
    llm_api_key: str = Field("", alias="LLM_API_KEY")  # else OPENAI_API_KEY / GEMINI_API_KEY
    llm_timeout_s: float = Field(20.0, alias="LLM_TIMEOUT_SECONDS", gt=0, le=300)
    llm_max_attempts: int = Field(3, alias="LLM_MAX_ATTEMPTS", ge=1, le=10)
    llm_max_retry_wait_s: float = Field(5.0, alias="LLM_MAX_RETRY_WAIT_SECONDS", ge=0, le=60)
    # seed 004's lifecycle tools (§9.3's keys, §8's limits); MEMORY_MAX_CHARS does not apply to turn payloads
    memory_recent_context_items: int = Field(30, alias="MEMORY_RECENT_CONTEXT_ITEMS", ge=0, le=1000)
    memory_recall_facts_limit: int = Field(20, alias="MEMORY_RECALL_FACTS_LIMIT", ge=0, le=200)
    memory_search_limit: int = Field(5, alias="MEMORY_SEARCH_LIMIT", ge=0, le=100)
    memory_compact_threshold: float = Field(0.8, alias="MEMORY_COMPACT_THRESHOLD", gt=0, le=1)
    memory_l1_retention_days: float = Field(1.0, alias="MEMORY_L1_RETENTION_DAYS", gt=0)
    memory_l2_retention_days: float = Field(7.0, alias="MEMORY_L2_RETENTION_DAYS", gt=0)
    memory_compaction_min_age_hours: float = Field(24.0, alias="MEMORY_COMPACTION_MIN_AGE_HOURS", ge=0)
    memory_summary_refresh_interval_minutes: float = Field(60.0, alias="MEMORY_SUMMARY_REFRESH_INTERVAL_MINUTES", ge=0)
    memory_max_processed_turns: int = Field(1024, alias="MEMORY_MAX_PROCESSED_TURNS", ge=1)
    memory_heuristic_enabled: bool = Field(False, alias="MEMORY_HEURISTIC_ENABLED")
    memory_heuristic_model: str = Field("openai/gpt-oss-120b", alias="MEMORY_HEURISTIC_MODEL")
    memory_heuristic_base_url: str = Field("", alias="MEMORY_HEURISTIC_BASE_URL")
    memory_heuristic_api_key: str = Field("", alias="MEMORY_HEURISTIC_API_KEY")  # else OPENAI_API_KEY
    memory_heuristic_timeout_ms: int = Field(12000, alias="MEMORY_HEURISTIC_TIMEOUT_MS", ge=100)
    memory_heuristic_max_output_tokens: int = Field(800, alias="MEMORY_HEURISTIC_MAX_OUTPUT_TOKENS", ge=16)
    memory_max_items: int = Field(256, alias="MEMORY_MAX_ITEMS", ge=1)  # items per array of a turn payload
    memory_max_part_chars: int = Field(100_000, alias="MEMORY_MAX_PART_CHARS", ge=1)  # characters per content part
    # a turn's `processing` guard older than this is taken over by a retry (its first commit died)
    memory_turn_stale_seconds: float = Field(60.0, alias="MEMORY_TURN_STALE_SECONDS", gt=0)
    memory_lock_timeout_s: float = Field(5.0, alias="MEMORY_LOCK_TIMEOUT_SECONDS", gt=0, le=60)
    # the consolidator maintains sessions idle this long that nobody maintained since their last turn (empty: never)
    memory_idle_maintenance_cron: str = Field("40 * * * *", alias="MEMORY_IDLE_MAINTENANCE_CRON")
    memory_idle_minutes: float = Field(60.0, alias="MEMORY_IDLE_MINUTES", gt=0)
    # evaluator: Gemini when GEMINI_API_KEY is set, the offline scorer otherwise
    gemini_model: str = Field("gemini-2.5-flash", alias="GEMINI_MODEL")
    gemini_base_url: str = Field("", alias="GEMINI_BASE_URL")
    evaluator_concurrency: int = Field(4, alias="EVALUATOR_CONCURRENCY")
    evaluator_rate_limit: float = Field(5.0, alias="EVALUATOR_RATE_LIMIT")  # requests/s, 0: none
    evaluator_timeout_s: float = Field(30.0, alias="EVALUATOR_TIMEOUT_SECONDS")
    # consolidator: a five-field cron expression (UTC); empty disables the schedule
    consolidation_cron: str = Field("30 3 * * *", alias="CONSOLIDATION_CRON")
    # seed 003's decay: stored relevance recomputed, expired memories and skip entries purged (empty disables)
    protocol_decay_cron: str = Field("15 */6 * * *", alias="PROTOCOL_DECAY_CRON")
    protocol_decay_batch_size: int = Field(5000, alias="PROTOCOL_DECAY_BATCH_SIZE", ge=100, le=100_000)
    protocol_decay_writers: int = Field(2, alias="PROTOCOL_DECAY_WRITERS", ge=1, le=8)
    consolidation_batch_size: int = Field(1000, alias="CONSOLIDATION_BATCH_SIZE")
    # batches of one stage written at once, each on its own connection (a run holds up to this many + 2)
    consolidation_writers: int = Field(2, alias="CONSOLIDATION_WRITERS", ge=1, le=8)
    consolidation_lock_timeout_s: float = Field(60.0, alias="CONSOLIDATION_LOCK_TIMEOUT_SECONDS")

    # --- gateway edge (issue 3): public address, request limits, streams, OAuth ---
    # the address clients use; OAuth's issuer and the protected resource are derived from it (empty: bind address)
    public_url: str = Field("", alias="MEMENTO_PUBLIC_URL")
    allowed_hosts: str = Field("", alias="MEMENTO_ALLOWED_HOSTS")  # Host values accepted besides loopback names
    max_body_bytes: int = Field(1_000_000, alias="MEMENTO_MAX_BODY_BYTES")
    # per principal, shared by all replicas; generous (the throughput benchmark must fit under it); 0: none
    rate_limit_per_minute: int = Field(60_000, alias="MEMENTO_RATE_LIMIT_PER_MINUTE")
    max_streams_per_principal: int = Field(16, alias="MEMENTO_MAX_STREAMS_PER_PRINCIPAL")
    sse_keepalive_s: float = Field(15.0, alias="MEMENTO_SSE_KEEPALIVE_SECONDS")
    oauth_signing_key: str = Field("", alias="MEMENTO_OAUTH_SIGNING_KEY")  # PEM; else kept in the data dir
    oauth_access_token_s: int = Field(900, alias="MEMENTO_OAUTH_ACCESS_TOKEN_SECONDS")
    oauth_refresh_token_days: int = Field(30, alias="MEMENTO_OAUTH_REFRESH_TOKEN_DAYS")
    # OAuth clients identified by a Client ID Metadata Document URL (memento_gateway.oauth.cimd)
    oauth_cimd_enabled: bool = Field(True, alias="MEMENTO_OAUTH_CIMD")
    oauth_cimd_allow_private: bool = Field(False, alias="MEMENTO_OAUTH_CIMD_ALLOW_PRIVATE_ADDRESSES")
    oauth_cimd_ca_file: str = Field("", alias="MEMENTO_OAUTH_CIMD_CA_FILE")  # a CA trusted besides the system's
    oauth_cimd_timeout_s: float = Field(5.0, alias="MEMENTO_OAUTH_CIMD_TIMEOUT_SECONDS", gt=0, le=30)
    # with MEMENTO_ACCESS_KEY empty the gateway binds loopback only, unless this says otherwise explicitly
    allow_unauthenticated_bind: bool = Field(False, alias="MEMENTO_ALLOW_UNAUTHENTICATED_BIND")

    @model_validator(mode="after")
    def _derive(self) -> Settings:
        if self.cache_enabled is None:
            self.cache_enabled = self.redis_enabled
        if self.cache_session_ttl is None:
            self.cache_session_ttl = self.session_ttl_minutes * 60
        if is_cluster_url(self.redis_queue_url_env or ""):
            raise ValueError("REDIS_QUEUE_URL: arq's queues need one Redis primary, not a cluster (redis+cluster://)")
        if is_cluster_url(self.redis_url_env or "") and not self.redis_queue_url_env:
            raise ValueError("REDIS_QUEUE_URL: REDIS_URL is a cluster, so the queues need a Redis of their own")
        return self

    @cached_property
    def database_url(self) -> str:
        """DSN the services use: a role that owns no table, so row-level security applies."""
        if self.database_url_env:
            return self.database_url_env
        host = _first(self.postgres_host, self.db_host) or "localhost"
        port = self.postgres_port or self.db_port or 5432
        name = _first(self.postgres_db, self.db_name) or "memento"
        user = _first(self.postgres_user, self.db_user) or "memento_app"
        password = _first(self.postgres_password, self.db_password) or ""
        auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
        return f"postgresql://{auth}@{host}:{port}/{name}"

    @cached_property
    def migration_database_url(self) -> str:
        """DSN `memento-migrate` uses: the schema owner. Defaults to the service DSN."""
        return self.migration_database_url_env or self.database_url

    @cached_property
    def redis_url(self) -> str:
        if self.redis_url_env:
            return self.redis_url_env
        auth = f":{quote(self.redis_password, safe='')}@" if self.redis_password else ""
        return f"redis://{auth}{self.redis_host}:{self.redis_port}/{self.redis_db}"

    @cached_property
    def redis_queue_url(self) -> str:
        """The queue role's Redis: REDIS_QUEUE_URL, else the state Redis (one Redis for both, as before the split)."""
        return self.redis_queue_url_env or self.redis_url

    @cached_property
    def memory_config(self) -> dict[str, Any]:
        config = json.loads(json.dumps(DEFAULT_MEMORY_CONFIG))
        if self.memory_config_json:
            for key, value in json.loads(self.memory_config_json).items():
                if isinstance(value, dict) and isinstance(config.get(key), dict):
                    config[key].update(value)
                else:
                    config[key] = value
        return config


CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


def is_cluster_url(url: str) -> bool:
    """A Redis URL naming a cluster: `redis+cluster://[:password@]host:port[,host:port...]` (rediss+: TLS)."""
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def redact_dsn(url: str) -> str:
    """A DSN fit for a log line: the password replaced."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(":" + parts.password + "@", ":***@")
        return parts._replace(netloc=netloc).geturl()
    return url


_DATABASE_VARS = ("DATABASE_URL", "POSTGRES_HOST", "DB_HOST")


def cli_settings() -> Settings:
    """The environment's settings; with no database configured, those of the system `make run` is running
    (its run.json in MEMENTO_DATA_DIR, default ./.memento), so operator commands (`memento-admin`,
    `memento-embedder profiles`) work beside it."""
    if any(os.environ.get(name) for name in _DATABASE_VARS):
        return Settings()
    run_file = Path(os.environ.get("MEMENTO_DATA_DIR", ".memento")) / "run.json"
    if not run_file.exists():
        return Settings()
    info = json.loads(run_file.read_text())
    return Settings(DATABASE_URL=info["database_url"], REDIS_URL=info["redis_url"])
