"""`memento-admin`: operator commands. Each module in this package that defines `register(subparsers)` adds its
commands (for example `keys.py`, `dead_letters.py`); nothing needs to be listed here."""

from __future__ import annotations

import argparse
import importlib
import pkgutil


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
