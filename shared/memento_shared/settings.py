"""The settings sections the services share, read from the environment; each service composes its own class.

Seed 000 §10.2 names the variables and their defaults; Memento adds the ones its split into services needs. A
section is one concern (the database, Redis, the queue, the worker, telemetry, the language model...); a service's
settings class (`memento_<service>.settings`) inherits the sections it uses and adds its own fields, so each service
reads, and validates, only its own variables. The variable names are the environment's contract with operators
(deploy/, docker-compose.yml, docs/): a field's alias is its variable, and moving a field between sections keeps it.
Nothing here is read at import time: each service builds its settings in its composition root.
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


class Section(BaseSettings):
    """How every section reads the environment: by each field's alias, any case, unknown variables ignored."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore", populate_by_name=True)


class TelemetrySettings(Section):
    """Logs and traces: every service."""

    log_level: str = Field("INFO", alias="LOG_LEVEL")
    log_dir: str = Field("/var/log/mcp", alias="LOG_DIR")  # kept for compatibility: Memento logs JSON to stderr
    otel_exporter_otlp_endpoint: str = Field("", alias="OTEL_EXPORTER_OTLP_ENDPOINT")


class ServiceSettings(TelemetrySettings):
    """What every service process reads: the address it binds its port to, and telemetry."""

    bind_host: str = Field("127.0.0.1", alias="MEMENTO_BIND_HOST")


class DatabaseSettings(Section):
    """PostgreSQL: DATABASE_URL, else POSTGRES_* over DB_*; the pool's limits."""

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


class RedisSettings(Section):
    """Redis: REDIS_URL, else REDIS_*.

    Two roles (docs/scaling.md): REDIS_URL holds state (L1, sessions, working memory, rate limits, page snapshots,
    OAuth state, progress) and may be a cluster (`redis+cluster://`); REDIS_QUEUE_URL holds arq's queues, the relay's
    fence and the gateways' pub/sub, and must be one primary (arq's job keys span hash slots). Unset, it is REDIS_URL.
    """

    redis_url_env: str | None = Field(None, alias="REDIS_URL")
    redis_queue_url_env: str | None = Field(None, alias="REDIS_QUEUE_URL")
    # a write to the state Redis that a client is told succeeded (a session, working memory, an L1 entry) first waits
    # until this many replicas have it (WAIT), so a failover cannot lose it; 0: asynchronous replication, no wait
    redis_wait_replicas: int = Field(0, alias="REDIS_WAIT_REPLICAS", ge=0, le=5)
    redis_wait_timeout_ms: int = Field(500, alias="REDIS_WAIT_TIMEOUT_MS", ge=1, le=10_000)
    redis_sentinel_enabled: bool = Field(False, alias="REDIS_SENTINEL_ENABLED")
    redis_host: str = Field("localhost", alias="REDIS_HOST")
    redis_port: int = Field(6379, alias="REDIS_PORT")
    redis_password: str = Field("", alias="REDIS_PASSWORD")
    redis_db: int = Field(0, alias="REDIS_DB")
    redis_master_name: str = Field("mymaster", alias="REDIS_MASTER_NAME")
    redis_sentinels: str = Field("localhost:26379", alias="REDIS_SENTINELS")

    @model_validator(mode="after")
    def _queues_on_one_primary(self) -> RedisSettings:
        if is_cluster_url(self.redis_queue_url_env or ""):
            raise ValueError("REDIS_QUEUE_URL: arq's queues need one Redis primary, not a cluster (redis+cluster://)")
        if is_cluster_url(self.redis_url_env or "") and not self.redis_queue_url_env:
            raise ValueError("REDIS_QUEUE_URL: REDIS_URL is a cluster, so the queues need a Redis of their own")
        return self

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


class QueueSettings(RedisSettings):
    """arq's queues, as every service that enqueues a job reads them (memento_shared.worker.create_queue_pool)."""

    # how long a queued job waits for its worker before Redis drops it (arq's own default is one day): longer than
    # any outage of a worker, since the outbox row already says published and nothing would dead-letter it
    worker_job_expiry_s: float = Field(30 * 86400.0, alias="WORKER_JOB_EXPIRY_SECONDS", gt=0)


class WorkerSettings(ServiceSettings, DatabaseSettings, QueueSettings):
    """A worker process (memento_shared.worker.run_worker): the embedder, the evaluator, the consolidator."""

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


class InternalSettings(Section):
    """The secret the gateway signs the principal with and memory-api checks it by."""

    internal_secret: str = Field("", alias="MEMENTO_INTERNAL_SECRET")


class SessionSettings(Section):
    """How long an MCP session lives: the gateway's sessions and memory-api's keys per session."""

    session_ttl_minutes: int = Field(60, alias="SESSION_TTL_MINUTES")


class ApiKeySettings(Section):
    """The model providers' own keys, which the language model and the embedder fall back to."""

    openai_api_key: str = Field("", alias="OPENAI_API_KEY")
    gemini_api_key: str = Field("", alias="GEMINI_API_KEY")


class LlmSettings(ApiKeySettings):
    """The language model (memento_shared.llm.from_settings): memory-api and the evaluator."""

    # seed 003's summaries, distillation and crystals: an LLM when LLM_PROVIDER is openai or gemini, else offline
    llm_provider: str = Field("", alias="LLM_PROVIDER")
    llm_model: str = Field("", alias="LLM_MODEL")  # default gpt-4o-mini (openai), gemini-2.5-flash (gemini)
    llm_base_url: str = Field("", alias="LLM_BASE_URL")  # an OpenAI-compatible server, or Gemini's endpoint
    llm_api_key: str = Field("", alias="LLM_API_KEY")  # else OPENAI_API_KEY / GEMINI_API_KEY
    llm_timeout_s: float = Field(20.0, alias="LLM_TIMEOUT_SECONDS", gt=0, le=300)
    llm_max_attempts: int = Field(3, alias="LLM_MAX_ATTEMPTS", ge=1, le=10)
    llm_max_retry_wait_s: float = Field(5.0, alias="LLM_MAX_RETRY_WAIT_SECONDS", ge=0, le=60)


class HeuristicSettings(LlmSettings):
    """The turn heuristic's model (memento_shared.llm.heuristic_from_settings): memory-api."""

    memory_heuristic_enabled: bool = Field(False, alias="MEMORY_HEURISTIC_ENABLED")
    memory_heuristic_model: str = Field("openai/gpt-oss-120b", alias="MEMORY_HEURISTIC_MODEL")
    memory_heuristic_base_url: str = Field("", alias="MEMORY_HEURISTIC_BASE_URL")
    memory_heuristic_api_key: str = Field("", alias="MEMORY_HEURISTIC_API_KEY")  # else OPENAI_API_KEY
    memory_heuristic_timeout_ms: int = Field(12000, alias="MEMORY_HEURISTIC_TIMEOUT_MS", ge=100)


class LifecycleSettings(Section):
    """A session's maintenance (memento_shared.sessions.maintain): memory-api and the consolidator."""

    memory_lock_timeout_s: float = Field(5.0, alias="MEMORY_LOCK_TIMEOUT_SECONDS", gt=0, le=60)
    memory_summary_refresh_interval_minutes: float = Field(60.0, alias="MEMORY_SUMMARY_REFRESH_INTERVAL_MINUTES", ge=0)
    memory_max_processed_turns: int = Field(1024, alias="MEMORY_MAX_PROCESSED_TURNS", ge=1)
    memory_compaction_min_age_hours: float = Field(24.0, alias="MEMORY_COMPACTION_MIN_AGE_HOURS", ge=0)


class MemoryConfigSettings(Section):
    """Memory behaviour (seed 000 §10.1), MEMORY_CONFIG's JSON merged over the defaults: memory-api, the evaluator and
    the consolidator (memento_shared.consolidation.lifecycle)."""

    memory_config_json: str = Field("", alias="MEMORY_CONFIG")

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


class OperatorSettings(DatabaseSettings, QueueSettings):
    """What operator commands (`memento-admin`, `memento-embedder profiles`, `make run`) read: database, Redis."""


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


def cli_settings() -> OperatorSettings:
    """The environment's settings; with no database configured, those of the system `make run` is running
    (its run.json in MEMENTO_DATA_DIR, default ./.memento), so operator commands (`memento-admin`,
    `memento-embedder profiles`) work beside it."""
    if any(os.environ.get(name) for name in _DATABASE_VARS):
        return OperatorSettings()
    run_file = Path(os.environ.get("MEMENTO_DATA_DIR", ".memento")) / "run.json"
    if not run_file.exists():
        return OperatorSettings()
    info = json.loads(run_file.read_text())
    return OperatorSettings(DATABASE_URL=info["database_url"], REDIS_URL=info["redis_url"])
