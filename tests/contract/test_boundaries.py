"""Architecture rules checked on the source: services never import each other; the gateway knows no database."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {
    "gateway": "memento_gateway",
    "memory-api": "memento_memory_api",
    "embedder": "memento_embedder",
    "evaluator": "memento_evaluator",
    "consolidator": "memento_consolidator",
}


def imports(folder: Path) -> set[str]:
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
    return found


@pytest.mark.parametrize("service", SERVICES)
def test_services_never_import_each_other(service):
    names = imports(ROOT / "services" / service)
    others = {pkg for name, pkg in SERVICES.items() if name != service}
    assert not {n for n in names if n.split(".")[0] in others}


def test_gateway_imports_no_memory_logic_or_database_code():
    names = imports(ROOT / "services" / "gateway")
    banned = ("asyncpg", "pgvector", "memento_shared.db", "memento_shared.text", "memento_shared.domain", "arq")
    assert not {n for n in names if n.startswith(banned)}


def test_shared_library_starts_nothing_and_imports_no_service():
    names = imports(ROOT / "shared")
    assert not {n for n in names if n.split(".")[0] in SERVICES.values()}


def test_every_registered_tool_has_a_handler():
    from memento_memory_api.tools.registry import HANDLERS
    from memento_shared.tools.registry import TOOLS

    assert set(TOOLS) == set(HANDLERS)
