"""`memento-admin`: operator commands. Each module in this package that defines `register(subparsers)` adds its
commands (for example `keys.py`, `dead_letters.py`); nothing needs to be listed here. The same commands are the
`admin` group of `memento` (command.py), whose own modules define `add_command(s)` instead, so they stay out of here."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from typing import Any


def register_all(subparsers: argparse._SubParsersAction[Any]) -> None:
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module.name.startswith("_"):
            continue
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        register = getattr(loaded, "register", None)
        if register is not None:
            register(subparsers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memento-admin", description="Memento operator commands")
    register_all(parser.add_subparsers(dest="command", required=True))
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    raise SystemExit(args.handler(args) or 0)
