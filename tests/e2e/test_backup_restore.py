"""`memento-admin backup` and `restore` (issue 31, item 6): a system as `make run` starts it stores fragments with
links and amended versions, a documents commit and a protocol item through the tools; once their vectors are written
it is backed up, and the backup restored into a fresh data dir. The system started there holds every row, vector
and link (each table's rows equal), rebuilt L1 from them (a keyword recall answers from L1), and recalls by text
the same fragments in the same order. A restore over a database holding memories is refused without --force; with
--force, into the running system, that system goes on answering, from a rebuilt L1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import asyncpg
import pytest
import redis.asyncio as aioredis
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from memento_devtools.embedded import free_port, spawn
from memento_shared import l1
from memento_shared.db.migrate import migrate
from memento_shared.settings import DatabaseSettings as Settings
from tests.e2e.conftest import ACCESS_KEY, wait_for
from tests.fixtures.servers import APP_PASSWORD

pytestmark = pytest.mark.e2e
WORKSPACE = "backup"
SENTENCES = [
    ("Releases go to production every Tuesday right after the morning standup", ["release", "tuesday"]),
    ("The staging database is refreshed from production every Sunday night", ["staging", "database"]),
    ("Rollbacks use the previous container image tag, never a rebuild", ["rollback", "release"]),
    ("On-call engineers rotate weekly and hand over on Monday mornings", ["oncall", "rotation"]),
    ("Feature flags older than ninety days are removed during cleanup week", ["flags", "cleanup"]),
]
QUESTION = "which weekday do we ship new versions to production?"


@contextlib.contextmanager
def running(data_dir: Path) -> Iterator[dict]:
    """`make run` on `data_dir` (the launcher as a process); yields its run.json; stopped as Ctrl-C would."""
    env = {**os.environ, "MEMENTO_DATA_DIR": str(data_dir), "PORT": str(free_port()), "MEMENTO_ACCESS_KEY": ACCESS_KEY}
    out = data_dir.parent / f"{data_dir.name}-launcher.out"
    process = spawn([sys.executable, "-m", "memento_devtools.launcher"], log_path=out, env=env,
                    death_signal=signal.SIGINT)  # fmt: skip

    def ready():
        assert process.poll() is None, f"launcher exited {process.returncode}: {out.read_text()[-3000:]}"
        run_file = data_dir / "run.json"
        return run_file.exists() and json.loads(run_file.read_text())

    try:
        yield wait_for(ready, 180, "make run to report ready", interval=0.2)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(90)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        assert code == 0, out.read_text()[-3000:]


def client(info: dict, profile: str | None = None) -> Client:
    headers = {"Authorization": f"Bearer {ACCESS_KEY}", "X-Memento-Workspace": WORKSPACE}
    url = info["mcp_url"] + (f"?profile={profile}" if profile else "")
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)))


async def call(mcp: Client, tool: str, arguments: dict) -> dict:
    result = await mcp.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


def admin(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEMENTO_DATA_DIR": str(data_dir)}
    argv = [sys.executable, "-m", "memento_memory_api.cli", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


async def owner(data_dir: Path, info: dict) -> asyncpg.Connection:
    password = json.loads((data_dir / "secrets.json").read_text())["postgres_owner_password"]
    service = urlsplit(info["database_url"])
    return await asyncpg.connect(f"postgresql://postgres:{quote(password)}@{service.hostname}:{service.port}/memento")


async def tables(conn: asyncpg.Connection) -> dict[str, tuple[int, str]]:
    """Every table of the schema (and the migrations table): its row count and a digest of all its rows."""
    names = await conn.fetch(
        "SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables WHERE schemaname = 'agent_memory'"
        " OR (schemaname, tablename) = ('public', 'memento_schema_migrations') ORDER BY 1"
    )
    found = {}
    for row in names:
        found[row["name"]] = tuple(
            await conn.fetchrow(
                f"SELECT count(*), md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM {row['name']} t"
            )
        )
    return found


async def settled(conn: asyncpg.Connection, timeout: float = 90) -> dict[str, tuple[int, str]]:
    """Once every fragment and chunk has its vector and nothing changes any more: the tables' digests."""
    deadline, last, same = time.monotonic() + timeout, None, 0
    while time.monotonic() < deadline:
        pending = await conn.fetchval(
            "SELECT (SELECT count(*) FROM agent_memory.fragments f WHERE NOT EXISTS (SELECT FROM"
            " agent_memory.fragment_embeddings e WHERE e.fragment_id = f.id))"
            " + (SELECT count(*) FROM agent_memory.doc_chunks c WHERE NOT EXISTS (SELECT FROM"
            " agent_memory.chunk_embeddings e WHERE (e.item_id, e.version_num, e.chunk_index)"
            " = (c.item_id, c.version_num, c.chunk_index)))"
            " + (SELECT count(*) FROM agent_memory.outbox WHERE published_at IS NULL)"
        )
        now = await tables(conn)
        same = same + 1 if not pending and now == last else 0
        if same == 2:  # unchanged for two seconds: the workers are done with these writes
            return now
        last = now
        await asyncio.sleep(1.0)
    raise AssertionError("the system did not settle: vectors missing or rows still changing")


async def recall_ids(info: dict, arguments: dict) -> list[tuple[str, str]]:
    async with client(info) as mcp:
        found = await call(mcp, "recall", arguments)
    return [(f["id"], f["tier"]) for f in found["fragments"]]


async def test_a_backup_restored_into_a_fresh_data_dir_answers_like_the_original(tmp_path):
    first, second, dump = tmp_path / "first", tmp_path / "second", tmp_path / "memento.dump"
    by_text = {"text": QUESTION, "includeLinks": False, "tokenBudget": 100_000}

    with running(first) as info:
        async with client(info) as mcp:
            ids = []
            for content, keywords in SENTENCES:
                stored = await call(mcp, "remember", {"content": content, "topic": "operations", "type": "procedure",
                                                      "keywords": keywords, "importance": 0.6})  # fmt: skip
                ids.append(stored["id"])
            await call(mcp, "link", {"fromId": ids[2], "toId": ids[0], "relationType": "resolved_by"})
            await call(mcp, "link", {"fromId": ids[1], "toId": ids[3]})
            await call(mcp, "amend", {"id": ids[4], "content": "Feature flags older than sixty days are removed"})
        async with client(info, "documents") as mcp:
            entries = [
                {"kind": "decision", "title": "Use Postgres", "content": "We use Postgres 18 for everything."},
                {"kind": "spec", "title": "Runbook", "canonicalKey": "runbook",
                 "content": "# Runbook\n\n## Failover\n\nPromote the standby, then repoint the pooler.\n"},
            ]  # fmt: skip
            await call(mcp, "memory.commit", {"idempotencyKey": str(uuid.uuid4()), "entries": entries})
        async with client(info, "protocol") as mcp:
            item = {"category": "active_work", "title": "Ship the backup", "priority": 7}
            await call(mcp, "memento_item_create", item)

        conn = await owner(first, info)
        try:
            await settled(conn)
            answer = await recall_ids(info, by_text)  # before the digests: a recall counts its accesses
            assert answer and answer[0][0] == ids[0]
            for _ in range(3):  # the rows the backup holds are those before it, unless a late worker wrote between
                before = await settled(conn)
                made = admin(first, "backup", str(dump))
                assert made.returncode == 0, made.stderr
                if await tables(conn) == before:
                    break
            else:
                raise AssertionError("rows changed during every backup: the comparison would not hold")
            assert before["agent_memory.fragment_links"][0] == 2 and before["agent_memory.fragment_versions"][0] >= 1
            assert before["agent_memory.fragment_embeddings"][0] == len(SENTENCES)
            assert before["agent_memory.chunk_embeddings"][0] >= 2 and before["agent_memory.wm_items"][0] == 1
        finally:
            await conn.close()
    assert "5 fragments" in made.stdout and dump.stat().st_mode & 0o077 == 0

    # a fresh data dir, nothing running in it: the restore starts its PostgreSQL, the next start builds L1
    restored = admin(second, "restore", str(dump))
    assert restored.returncode == 0, restored.stderr
    with running(second) as info:
        conn = await owner(second, info)
        try:
            assert await tables(conn) == before  # every row, vector, link and version; the same migrations
        finally:
            await conn.close()
        assert await recall_ids(info, {"keywords": ["tuesday"], "includeLinks": False}) == [(ids[0], "L1")]
        assert [i for i, _ in await recall_ids(info, by_text)] == [i for i, _ in answer]

        refused = admin(second, "restore", str(dump))
        assert refused.returncode == 1 and refused.stdout == ""
        assert refused.stderr.count("\n") == 1 and "already holds 5 fragments" in refused.stderr, refused.stderr

        # --force into the running system: the services reconnect, and L1 is rebuilt from the restored rows
        async with client(info) as mcp:
            later = {"content": "Written after the backup: gone once restored", "topic": "operations", "type": "fact",
                     "keywords": ["tuesday"]}  # fmt: skip
            later = await call(mcp, "remember", later)
        assert await l1_members(info, "tuesday") == {ids[0], later["id"]}
        forced = admin(second, "restore", "--force", str(dump))
        assert forced.returncode == 0, forced.stderr
        assert "rebuilds the L1 keyword sets" in forced.stdout

        async def from_l1():
            try:
                return await recall_ids(info, {"keywords": ["tuesday"], "includeLinks": False}) == [(ids[0], "L1")]
            except Exception:  # a request that met a connection the restore ended
                return False

        deadline = time.monotonic() + 30
        while not await from_l1():
            assert time.monotonic() < deadline, "L1 was not rebuilt after a restore into the running system"
            await asyncio.sleep(0.5)
        assert await l1_members(info, "tuesday") == {ids[0]}  # rebuilt from the restored rows, not just read back
        assert [i for i, _ in await recall_ids(info, by_text)] == [i for i, _ in answer]


async def l1_members(info: dict, keyword: str) -> set[str]:
    """The ids in L1's sets of `keyword` in the test's workspace (whatever the tenant and agent)."""
    redis = aioredis.from_url(info["redis_url"])
    try:
        assert await redis.exists(l1.READY_KEY)
        members = set()
        async for key in redis.scan_iter(match=f"memento:l1:{{*}}:{WORKSPACE}:*:{keyword}"):
            members |= {m.decode() for m in await redis.zrange(key, 0, -1)}
        return members
    finally:
        await redis.aclose()


def test_with_a_database_url_it_dumps_as_the_owner_and_restores_into_a_fresh_database(servers, tmp_path):
    """The external-server form, on databases of the suite's own embedded server: a migrated source holding one
    fragment, restored into a fresh database; the service role is refused (RLS would hide rows), and so is a restore
    over the database that now holds a fragment, unless --force."""
    suffix = uuid.uuid4().hex[:8]
    source, target = f"backup_source_{suffix}", f"backup_target_{suffix}"

    def env(database: str) -> dict[str, str]:
        return {"DATABASE_URL": servers.pg.url("memento_app", APP_PASSWORD, database),
                "MIGRATION_DATABASE_URL": servers.pg.url(database=database)}  # fmt: skip

    for database in (source, target):
        servers.pg.create_database(database)
    asyncio.run(migrate(Settings(**env(source))))
    servers.pg.psql(
        "INSERT INTO agent_memory.fragments (id, tenant_id, content, topic, type, importance, content_hash, ttl_tier,"
        " keywords) VALUES ('frag-backup', 't-backup', 'kept across the restore', 'ops', 'fact', 0.5, 'h', 'warm',"
        " '{kept}')",
        database=source,
    )
    dump = tmp_path / "external.dump"

    refused = admin_env({"DATABASE_URL": env(source)["DATABASE_URL"]}, "backup", str(dump))
    assert refused.returncode == 1 and "row-level security" in refused.stderr and not dump.exists()
    made = admin_env(env(source), "backup", str(dump))
    assert made.returncode == 0 and "1 fragments" in made.stdout, made.stderr
    restored = admin_env(env(target), "restore", str(dump))
    assert restored.returncode == 0 and "(1 fragments)" in restored.stdout, restored.stderr
    query = "SELECT id, content, keywords FROM agent_memory.fragments; SELECT count(*) FROM memento_schema_migrations"
    assert servers.pg.psql(query, database=target) == servers.pg.psql(query, database=source)

    again = admin_env(env(target), "restore", str(dump))
    assert again.returncode == 1 and again.stderr.count("\n") == 1 and "--force" in again.stderr
    forced = admin_env(env(target), "restore", "--force", str(dump))
    assert forced.returncode == 0, forced.stderr
    assert servers.pg.psql("SELECT count(*) FROM agent_memory.fragments", database=target) == "1\n"


def admin_env(values: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "memento_memory_api.cli", *args]
    env = {**os.environ, **values}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
