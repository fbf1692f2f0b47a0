"""Session-wide real servers: an embedded PostgreSQL 18 + pgvector and an embedded Valkey, started once.

Tests never share rows: each makes its own tenant (`tenant` fixture), so no cleanup between tests is needed.
"""

from __future__ import annotations

import os
import secrets

import pytest

# Nothing from the developer's shell may leak into the suite's configuration.
for _name in list(os.environ):
    if _name.startswith(("MEMENTO_", "POSTGRES_", "DB_", "REDIS_")) or _name in (
        "DATABASE_URL",
        "MIGRATION_DATABASE_URL",
        "PORT",
        "MEMORY_API_URL",
        "EMBEDDER_URL",
        "MEMORY_CONFIG",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ):
        del os.environ[_name]

pytest_plugins = ["tests.fixtures.servers", "tests.fixtures.apps"]


@pytest.fixture
def tenant() -> str:
    return "t-" + secrets.token_hex(6)
