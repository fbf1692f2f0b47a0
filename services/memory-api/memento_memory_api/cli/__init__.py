"""`memento-admin`: operator commands. Each module in this package that defines `register(subparsers)` adds its
commands (for example `keys.py`, `dead_letters.py`); nothing needs to be listed here."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
from pathlib import Path

from memento_shared.settings import Settings

_DATABASE_VARS = ("DATABASE_URL", "POSTGRES_HOST", "DB_HOST")


def admin_settings() -> Settings:
    """The environment's settings; with no database configured, those of the system `make run` is running
    (its run.json in MEMENTO_DATA_DIR, default ./.memento), so `.venv/bin/memento-admin ...` works beside it."""
    if any(os.environ.get(name) for name in _DATABASE_VARS):
        return Settings()
    run_file = Path(os.environ.get("MEMENTO_DATA_DIR", ".memento")) / "run.json"
    if not run_file.exists():
        return Settings()
    info = json.loads(run_file.read_text())
    return Settings(DATABASE_URL=info["database_url"], REDIS_URL=info["redis_url"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memento-admin", description="Memento operator commands")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module.name.startswith("_"):
            continue
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        register = getattr(loaded, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    raise SystemExit(args.handler(args) or 0)
