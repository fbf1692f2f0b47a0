"""The embedded servers and `make run`'s launcher, without the real services.

The launcher's lifecycle tests swap the five services for a tiny HTTP server that answers /health and the
migrations for a login check (through the launcher's SERVICE_PHASES / MIGRATE_ARGV), so they test the
launcher itself: startup order, run.json, the banner, Ctrl-C, crashes, and that nothing outlives it.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import asyncpg
import psutil
import pytest

from memento_devtools.embedded import (
    EmbeddedPostgres,
    ValkeyReplyError,
    free_port,
    spawn,
    start_postgres,
    start_valkey,
)

T = TypeVar("T")
OWNER_PASSWORD = "owner-pw-for-tests"
SMALL_PG = {"shared_buffers": "32MB", "max_connections": "20"}


def wait_for(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Bounded polling, never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def process_tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def assert_all_gone(processes: list[psutil.Process], timeout: float = 10.0) -> None:
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    assert not alive, f"still running: {[(p.pid, p.name()) for p in alive]}"


def processes_mentioning(text: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if any(text in part for part in proc.info["cmdline"] or []):
            found.append(proc)
    return found


# --------------------------------------------------------------------------------------------------
# embedded PostgreSQL


async def _first_start_checks(pg: EmbeddedPostgres) -> None:
    with pytest.raises(asyncpg.InvalidPasswordError):
        await asyncpg.connect(pg.url(password="not-the-password"))
    conn = await asyncpg.connect(pg.url(database="scratch"))
    try:
        rules = await conn.fetch("SELECT DISTINCT auth_method FROM pg_hba_file_rules")
        assert {r["auth_method"] for r in rules} == {"scram-sha-256"}
        assert await conn.fetchval("SHOW listen_addresses") == "127.0.0.1"
        await conn.execute("CREATE EXTENSION vector; CREATE EXTENSION pg_trgm")
        assert await conn.fetchval("SELECT '[1,2,3]'::vector <-> '[1,2,4]'::vector") == 1.0
        # Non-ASCII letters count as word characters (the builtin C.UTF-8 locale), e.g. for Korean notes.
        assert await conn.fetchval("SELECT similarity('메멘토 기억', '메멘토')") > 0.5
        await conn.execute("CREATE TABLE notes (id int PRIMARY KEY, body text, embedding vector(3))")
        await conn.execute("INSERT INTO notes VALUES (1, 'kept across restarts', '[0.1,0.2,0.3]')")
    finally:
        await conn.close()


async def _read_note(pg: EmbeddedPostgres) -> str:
    conn = await asyncpg.connect(pg.url(database="scratch"))
    try:
        return await conn.fetchval("SELECT body FROM notes WHERE id = 1")
    finally:
        await conn.close()


async def test_embedded_postgres_scram_extensions_restart_and_clean_stop(tmp_path: Path) -> None:
    pgdata = tmp_path / "pg"
    pg = start_postgres(pgdata, owner_password=OWNER_PASSWORD, settings=SMALL_PG)
    try:
        assert (pgdata / "PG_VERSION").exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["pg", "postgres.log"]  # no password file left
        pg.create_database("scratch")
        pg.create_database("scratch")  # idempotent
        await _first_start_checks(pg)
        server_processes = process_tree(pg.pid)
        assert len(server_processes) > 1  # postmaster and its workers
    finally:
        pg.stop()
    assert_all_gone(server_processes)
    assert not processes_mentioning(str(pgdata))

    pg = start_postgres(pgdata, owner_password=OWNER_PASSWORD, settings=SMALL_PG)  # no initdb this time
    try:
        assert await _read_note(pg) == "kept across restarts"
        server_processes = process_tree(pg.pid)
    finally:
        pg.stop()
    assert_all_gone(server_processes)


async def test_embedded_postgres_comes_back_with_what_its_cache_held(tmp_path: Path) -> None:
    """A table read before a restart is in shared buffers after it without being read again (autoprewarm)."""
    pg = start_postgres(tmp_path / "pg", owner_password=OWNER_PASSWORD, settings=SMALL_PG)
    try:
        pg.create_database("scratch")
        conn = await asyncpg.connect(pg.url(database="scratch"))
        cached = "SELECT count(*) FROM pg_buffercache WHERE relfilenode = pg_relation_filenode('warm')"
        try:
            await conn.execute("CREATE EXTENSION pg_buffercache")
            await conn.execute(
                "CREATE TABLE warm AS SELECT i, repeat('x', 500) AS body FROM generate_series(1, 5000) i"
            )
            # under a quarter of the cache, so a scan keeps every block it reads (larger ones get a small ring)
            blocks = await conn.fetchval("SELECT pg_relation_size('warm') / 8192")
            assert await conn.fetchval("SELECT count(*) FROM warm") == 5000
            assert await conn.fetchval(cached) == blocks
        finally:
            await conn.close()
    finally:
        pg.stop()

    pg = start_postgres(tmp_path / "pg", owner_password=OWNER_PASSWORD, settings=SMALL_PG)
    try:
        conn = await asyncpg.connect(pg.url(database="scratch"))
        try:

            async def held() -> int:
                deadline = time.monotonic() + 30
                while (count := await conn.fetchval(cached)) < blocks and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                return count

            assert await held() == blocks  # every block, and none of them read by a query since the start
        finally:
            await conn.close()
    finally:
        pg.stop()


# --------------------------------------------------------------------------------------------------
# embedded Valkey


def test_embedded_valkey_password_and_persistence(tmp_path: Path) -> None:
    valkey = start_valkey(tmp_path / "valkey", password="valkey-pw")
    try:
        assert valkey.url == f"redis://:valkey-pw@127.0.0.1:{valkey.port}/0"
        with pytest.raises(ValkeyReplyError, match="NOAUTH"):
            valkey.command("GET", "greeting", auth=False)
        assert valkey.command("SET", "greeting", "hello") == "OK"
        pid = valkey.pid
    finally:
        valkey.stop()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

    valkey = start_valkey(tmp_path / "valkey", password="valkey-pw")
    try:
        assert valkey.command("GET", "greeting") == "hello"
    finally:
        valkey.stop()
    assert not processes_mentioning(str(tmp_path / "valkey"))


# --------------------------------------------------------------------------------------------------
# launcher: failures that must end in one line and exit code 1

_OUTSIDE_ENV = ("DATABASE_URL", "MIGRATION_DATABASE_URL", "POSTGRES_HOST", "DB_HOST", "REDIS_URL", "REDIS_HOST")


def launcher_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _OUTSIDE_ENV and not k.startswith("MEMENTO_")}
    # the services apart: each stand-in serves one port
    return env | {"MEMENTO_DATA_DIR": str(data_dir), "PORT": str(free_port()), "MEMENTO_COHOST": "0"} | extra


def run_launcher(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memento_devtools.launcher"], env=env, capture_output=True, text=True, timeout=60
    )


def assert_one_line_failure(result: subprocess.CompletedProcess[str], *mentions: str) -> None:
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("memento: ")
    assert "Traceback" not in result.stderr + result.stdout
    for text in mentions:
        assert text in lines[0], lines[0]


def test_launcher_refuses_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_launcher(launcher_env(tmp_path / "data", PORT=str(port)))
    assert_one_line_failure(result, f"port {port}", "in use", "PORT")


def test_launcher_refuses_a_data_dir_in_use(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    with open(data_dir / "memento.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        result = run_launcher(launcher_env(data_dir))
    assert_one_line_failure(result, str(data_dir), f"pid {os.getpid()}", "MEMENTO_DATA_DIR")


def test_launcher_refuses_an_unwritable_data_dir(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    data_dir = a_file / "data"  # fails even for root
    result = run_launcher(launcher_env(data_dir))
    assert_one_line_failure(result, str(data_dir), "not writable", "MEMENTO_DATA_DIR")


# --------------------------------------------------------------------------------------------------
# launcher: whole lifecycle with stand-in services

FAKE_SERVICE = textwrap.dedent(
    """
    import http.server, json, os, sys
    port_env = sys.argv[1]
    if os.environ.get("FAKE_CRASH") == port_env:
        sys.exit("fake service crashed on purpose")
    keep = ("PORT", "MEMORY_API_URL", "EMBEDDER_URL", "DATABASE_URL", "MIGRATION_DATABASE_URL", "REDIS_URL",
            "MEMENTO_ACCESS_KEY", "MEMENTO_INTERNAL_SECRET", "MEMENTO_BIND_HOST", "MEMENTO_DATA_DIR", port_env)
    seen = {k: os.environ.get(k) for k in keep}
    with open(os.path.join(os.environ["MEMENTO_DATA_DIR"], f"seen-{port_env}.json"), "w") as out:
        json.dump(seen, out)

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    http.server.HTTPServer((os.environ["MEMENTO_BIND_HOST"], int(os.environ[port_env])), Health).serve_forever()
    """
)

FAKE_MIGRATE = textwrap.dedent(
    """
    import asyncio, os, asyncpg

    async def main():
        conn = await asyncpg.connect(os.environ["MIGRATION_DATABASE_URL"])
        await conn.close()

    asyncio.run(main())
    """
)

DRIVER = textwrap.dedent(
    """
    import sys
    import memento_devtools.launcher as launcher

    fake_service, fake_migrate = sys.argv[1:3]
    launcher.MIGRATE_ARGV = (fake_migrate,)
    launcher.SERVICE_PHASES = [
        [launcher.Service(s.name, (fake_service, s.port_env), s.port_env) for s in phase]
        for phase in launcher.SERVICE_PHASES
    ]
    sys.exit(launcher.main())
    """
)


def start_fake_system(tmp_path: Path, data_dir: Path, **env: str) -> subprocess.Popen[str]:
    (tmp_path / "fake_service.py").write_text(FAKE_SERVICE)
    (tmp_path / "fake_migrate.py").write_text(FAKE_MIGRATE)
    argv = [sys.executable, "-c", DRIVER, str(tmp_path / "fake_service.py"), str(tmp_path / "fake_migrate.py")]
    return subprocess.Popen(
        argv, env=launcher_env(data_dir, **env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_running(process: subprocess.Popen[str], data_dir: Path) -> dict:
    def ready() -> dict | None:
        if process.poll() is not None:
            raise AssertionError(f"launcher exited {process.returncode}: {process.communicate()}")
        run_json = data_dir / "run.json"
        return json.loads(run_json.read_text()) if run_json.exists() else None

    return wait_for(ready, 60, "the launcher to write run.json")


def test_launcher_lifecycle_with_stand_in_services(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"

    # 1. Starts everything, reports it, and stops cleanly on Ctrl-C.
    launcher = start_fake_system(tmp_path, data_dir)
    try:
        info = wait_running(launcher, data_dir)
        children = process_tree(launcher.pid)[1:]
        launcher.send_signal(signal.SIGINT)
        out, err = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
    assert launcher.returncode == 0, err
    assert "Traceback" not in out + err
    assert_all_gone(children)
    assert not (data_dir / "run.json").exists()
    assert {"pid", "mcp_url", "health_url", "gateway_port", "ports", "database_url", "redis_url", "logs"} <= set(info)
    assert set(info["ports"]) == {"memory-api", "embedder", "evaluator", "consolidator", "gateway"}
    assert info["mcp_url"] == f"http://127.0.0.1:{info['gateway_port']}/mcp"
    assert oct((data_dir / "secrets.json").stat().st_mode & 0o777) == "0o600"
    secrets_before = json.loads((data_dir / "secrets.json").read_text())
    access_key = secrets_before["access_key"]
    assert info["mcp_url"] in out and f"Bearer {access_key}" in out and "Press Ctrl-C to stop" in out
    gateway_env = json.loads((data_dir / "seen-PORT.json").read_text())
    assert gateway_env["MEMORY_API_URL"] == f"http://127.0.0.1:{info['ports']['memory-api']}"
    assert gateway_env["EMBEDDER_URL"] == f"http://127.0.0.1:{info['ports']['embedder']}"
    assert gateway_env["DATABASE_URL"].startswith("postgresql://memento_app:")
    assert gateway_env["MIGRATION_DATABASE_URL"] is None  # the owner's DSN is for the migrations only
    assert gateway_env["REDIS_URL"] == info["redis_url"]
    memory_api_env = json.loads((data_dir / "seen-MEMORY_API_PORT.json").read_text())
    assert memory_api_env["MEMORY_API_PORT"] == str(info["ports"]["memory-api"])
    assert memory_api_env["MEMENTO_BIND_HOST"] == gateway_env["MEMENTO_BIND_HOST"] == "127.0.0.1"
    assert gateway_env["MEMENTO_ACCESS_KEY"] == access_key
    assert gateway_env["MEMENTO_INTERNAL_SECRET"] == secrets_before["internal_secret"]
    assert (data_dir / "logs" / "postgres.log").exists() and (data_dir / "logs" / "valkey.log").exists()

    # 2. A service that dies while starting: one line naming it, exit 1, everything stopped; same secrets.
    launcher = start_fake_system(tmp_path, data_dir, FAKE_CRASH="EVALUATOR_PORT")
    try:
        out, err = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
    assert_one_line_failure(subprocess.CompletedProcess(launcher.args, launcher.returncode, out, err), "evaluator")
    assert "crashed on purpose" in err and "evaluator.log" in err
    assert json.loads((data_dir / "secrets.json").read_text()) == secrets_before
    assert not processes_mentioning(str(data_dir))

    # 3. A launcher killed outright still takes its children with it (parent-death signal).
    launcher = start_fake_system(tmp_path, data_dir)
    try:
        wait_running(launcher, data_dir)
        children = process_tree(launcher.pid)[1:]
        launcher.kill()
        launcher.wait(10)
        assert_all_gone(children, timeout=20)
    finally:
        launcher.kill()
        launcher.communicate(timeout=10)


def test_spawn_lowers_a_background_childs_priority_for_its_whole_session(tmp_path: Path) -> None:
    """make run starts the workers niced, so they yield the CPU to the request path. Each child leads its own
    session, and with autogroup scheduling the kernel shares the CPU between sessions first: the session's group
    must be niced too, or the child's own nice value would change nothing."""
    probe = (
        "import os, pathlib; p = pathlib.Path('/proc/self/autogroup');"
        " print(os.nice(0), p.read_text().strip() if p.exists() else '')"
    )
    log = tmp_path / "child.log"
    child = spawn([sys.executable, "-c", probe], log_path=log, niceness=7)
    assert child.wait(30) == 0
    nice, _, group = log.read_text().strip().partition(" ")
    assert int(nice) == os.nice(0) + 7
    if group:  # autogroup scheduling enabled on this kernel
        assert group.endswith("nice 7"), group


def test_the_launchers_postgres_cache_is_an_eighth_of_memory_within_bounds():
    from memento_devtools.embedded import shared_buffers_mb

    assert shared_buffers_mb(1024) == 256  # a small machine keeps the floor
    assert shared_buffers_mb(24 * 1024) == 3072  # this one: an eighth
    assert shared_buffers_mb(256 * 1024) == 4096  # a big one stops at the ceiling
