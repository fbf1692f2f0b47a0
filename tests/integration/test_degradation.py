"""Seed 000 §9: with PostgreSQL down, /health says 503 and tools answer STORAGE_ERROR (never a stack trace)."""

from __future__ import annotations

import secrets

import httpx

from memento_devtools.embedded import start_postgres
from memento_memory_api.app import create_app
from memento_memory_api.settings import MemoryApiSettings as Settings
from memento_shared.db.migrate import migrate
from memento_shared.principal import HEADER, SCOPES, Principal, encode_principal


async def test_postgres_down_gives_503_and_storage_error(tmp_path, servers):
    owner = secrets.token_urlsafe(12)
    pg = start_postgres(tmp_path / "pg", owner_password=owner, settings={"shared_buffers": "32MB"})
    try:
        pg.create_database("memento")
        settings = Settings(
            DATABASE_URL=pg.url("memento_app", "app-pw", "memento"),
            MIGRATION_DATABASE_URL=pg.url(database="memento"),
            REDIS_URL=servers.valkey.url,
            MEMENTO_INTERNAL_SECRET="s",
            DB_CONN_TIMEOUT_MS="2000",
        )
        await migrate(settings)
        app = create_app(settings)
        headers = {HEADER: encode_principal(Principal(tenant_id="down", scopes=SCOPES), "s")}
        args = {"arguments": {"content": "written while the database is down", "topic": "t", "type": "fact"}}
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://m") as client:
                assert (await client.get("/health")).status_code == 200
                pg.stop()
                health = await client.get("/health")
                assert health.status_code == 503 and health.json()["postgres"] == "down"
                answer = (await client.post("/v1/tools/remember", json=args, headers=headers)).json()
                assert answer["error"]["code"] == "STORAGE_ERROR" and answer["error"]["retryable"] is True
                assert "Traceback" not in answer["error"]["message"]
    finally:
        pg.stop()
