"""Where the `memento` commands find the system, as `memento-admin` does: DATABASE_URL (or POSTGRES_HOST / DB_HOST)
names an external server; otherwise the embedded one of MEMENTO_DATA_DIR (default ./.memento), the running system's
or one started for the command (backup.py's resolution, shared so both agree).

The commands read and write as the services' role, under row-level security with the principal set per transaction
(agent_memory.enter()) as memory-api's repositories do: a role that bypasses RLS is refused, so an export can never
hold another tenant's rows."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import asyncpg

from memento_memory_api.cli import backup
from memento_memory_api.settings import MemoryApiSettings
from memento_shared.db.pool import assert_not_privileged, create_pool

NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class CliError(Exception):
    """Ends the command: its message is the one line on stderr, and the exit code is 1 (nothing was written)."""


def err(line: str) -> None:
    sys.stderr.write(f"memento: {line}\n")
    sys.stderr.flush()


def checked_name(value: str, field: str) -> str:
    if not NAME.match(value or ""):
        raise CliError(f"{field}: {value!r} must be 1-64 letters, digits, '_', '.' or '-'")
    return value


@dataclass
class System:
    settings: MemoryApiSettings  # DATABASE_URL is the service role's
    redis_url: str | None
    where: str


@contextlib.contextmanager
def located(*, create: bool = False) -> Iterator[System]:
    """The system the environment names; an embedded one not running is started for the command (and, with
    `create`, made when the data dir is new: its database and schema, so an import can fill a fresh install)."""
    with ExitStack() as stack:
        try:
            target = backup._resolve(stack, create=create)
        except backup.BackupError as exc:
            raise CliError(str(exc)) from None
        values = {"DATABASE_URL": target.service_dsn or target.owner_dsn, "MIGRATION_DATABASE_URL": target.owner_dsn}
        if target.redis_url:
            values["REDIS_URL"] = target.redis_url
        embedder = _running_embedder() if target.embedded else None
        if embedder:
            values["EMBEDDER_URL"] = embedder
        settings = MemoryApiSettings(**values) if target.embedded else MemoryApiSettings()
        if target.embedded and create:
            import asyncio

            from memento_shared.db.migrate import migrate

            # the launcher migrates on every start; a data dir made here gets the same schema and service role
            asyncio.run(migrate(settings))
        yield System(settings, target.redis_url, target.where)


def _running_embedder() -> str | None:
    """The embedder of the system `make run` runs in the data dir (its run.json), which embeds search queries."""
    if os.environ.get("EMBEDDER_URL"):
        return os.environ["EMBEDDER_URL"]
    run_file = backup._data_dir() / "run.json"
    try:
        port = json.loads(run_file.read_text())["ports"]["embedder"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return f"http://127.0.0.1:{int(port)}"


@contextlib.asynccontextmanager
async def service_pool(system: System) -> AsyncIterator[asyncpg.Pool]:
    try:
        pool = await create_pool(system.settings, "memento-cli", max_size=2)
    except (OSError, asyncpg.PostgresError) as exc:
        raise CliError(f"cannot connect to {system.where}: {type(exc).__name__}: {exc}") from None
    try:
        try:
            await assert_not_privileged(pool)
        except RuntimeError as exc:
            raise CliError(str(exc)) from None
        yield pool
    finally:
        await pool.close()
