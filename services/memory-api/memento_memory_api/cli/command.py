"""`memento`: the command for the people who own the memories, and for their scripts.

    memento export --tenant T --workspace W [--vectors] [-o FILE]
    memento import FILE --tenant T --workspace W [--from memento|mcp-memory|mem0]
    memento search QUERY | show ID | forget ID [--tenant T] [--workspace W] [--json]
    memento admin keys|dead-letters|backup|restore ...   (the `memento-admin` commands, unchanged)

It finds the system as `memento-admin` does: DATABASE_URL (or POSTGRES_HOST / DB_HOST) for an external server, else
the embedded one of MEMENTO_DATA_DIR (default ./.memento), running or started for the command."""

from __future__ import annotations

import argparse
import sys

import asyncpg

from memento_memory_api import cli as admin
from memento_memory_api.cli import export, imports, lookup
from memento_memory_api.cli.system import CliError, err


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memento", description=__doc__.split("\n\n")[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    export.add_command(subparsers)
    imports.add_command(subparsers)
    lookup.add_commands(subparsers)
    group = subparsers.add_parser("admin", help="operator commands (the same as memento-admin)")
    admin_commands = group.add_subparsers(dest="admin_command", required=True)
    admin.register_all(admin_commands)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    raise SystemExit(run(args))


def run(args: argparse.Namespace) -> int:
    try:
        return args.handler(args) or 0
    except CliError as exc:
        err(str(exc))
        return 1
    except (OSError, asyncpg.PostgresError) as exc:  # a server that is not there, a file that cannot be read
        err(f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
        return 1
    except KeyboardInterrupt:
        err("interrupted; an import writes in one transaction, so nothing of it was kept")
        return 130


if __name__ == "__main__":
    main(sys.argv[1:])
