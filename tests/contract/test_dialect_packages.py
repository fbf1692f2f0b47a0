"""The dialects' rooms, checked on memory-api's source: one package per dialect under tools/, each tool's handler in
its contract's package, no handler module importing another handler module (nor any module another dialect's
package), and the one store (store.py) belonging to no dialect."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memento_shared.tools.registry import PROFILES, TOOLS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "services" / "memory-api" / "memento_memory_api"
TOOLS_PACKAGE = "memento_memory_api.tools"
SHARED = {f"{TOOLS_PACKAGE}.registry", f"{TOOLS_PACKAGE}.common"}  # what every dialect's handlers may use


@dataclass
class Module:
    name: str  # memento_memory_api.tools.protocol.working
    imports: set[str] = field(default_factory=set)  # the modules it imports, submodules resolved
    handles: bool = False  # binds a tool handler (@handles)


def module_name(path: Path, top: Path) -> str:
    parts = list(path.relative_to(top.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def scan(top: Path) -> dict[str, Module]:
    """Every module of the package at `top`: what it imports (`from pkg import sub` resolved to the submodule when
    there is one) and whether it binds a handler."""
    names = {module_name(path, top): path for path in top.rglob("*.py")}
    modules = {}
    for name, path in names.items():
        module = Module(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                module.imports.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    module.imports.add(sub if sub in names else base)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                module.handles |= any(_is_handles(d) for d in node.decorator_list)
        modules[name] = module
    return modules


def _is_handles(decorator: ast.expr) -> bool:
    call = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(call, ast.Name) and call.id == "handles") or (
        isinstance(call, ast.Attribute) and call.attr == "handles"
    )


def dialect_of(name: str) -> str | None:
    """The dialect package a module belongs to (the package itself included), or None outside tools/<dialect>/."""
    if not name.startswith(TOOLS_PACKAGE + ".") or name in SHARED:
        return None
    return name.split(".")[2]


def violations(modules: dict[str, Module]) -> list[str]:
    """A dialect's module that imports another dialect's, or a handler module; a handler outside its dialect
    package; memory-api code outside tools/ (the store among it) that imports a dialect's module."""
    found = []
    for module in modules.values():
        own = dialect_of(module.name)
        if module.handles and own is None:
            found.append(f"{module.name} binds handlers outside a dialect package")
        for target in sorted(module.imports):
            if not target.startswith(TOOLS_PACKAGE + ".") or target in SHARED:
                continue
            other = dialect_of(target)
            if own is None:
                if module.name != TOOLS_PACKAGE:  # tools/__init__ imports the packages to bind their handlers
                    found.append(f"{module.name} (no dialect's) imports {target}")
            elif other != own:
                found.append(f"{module.name} (dialect {own}) imports {target} (dialect {other})")
            elif target in modules and modules[target].handles and module.name != f"{TOOLS_PACKAGE}.{own}":
                # a package's __init__ imports its handler modules to bind them; no other module may
                found.append(f"{module.name} imports the handler module {target}")
    return found


@pytest.fixture(scope="module")
def modules() -> dict[str, Module]:
    return scan(PACKAGE)


def test_one_package_per_dialect_and_nothing_else_beside_the_shared_modules():
    tools = PACKAGE / "tools"
    packages = {path.name for path in tools.iterdir() if (path / "__init__.py").is_file()}
    assert packages == set(PROFILES)
    assert {path.name for path in tools.glob("*.py")} == {"__init__.py", "registry.py", "common.py"}


def test_every_tool_is_handled_in_its_contracts_dialect_package():
    from memento_memory_api.tools.registry import HANDLERS

    misplaced = {
        name: HANDLERS[name].__module__
        for name, spec in TOOLS.items()
        if not HANDLERS[name].__module__.startswith(f"{TOOLS_PACKAGE}.{spec.profile}.")
    }
    assert not misplaced


def test_no_handler_module_imports_another_or_another_dialects_module(modules):
    handler_modules = {dialect_of(m.name) for m in modules.values() if m.handles}
    assert handler_modules == set(PROFILES)  # the scan sees every dialect's handlers: the check below is not empty
    assert not violations(modules)


def test_the_store_belongs_to_no_dialect(modules):
    store = modules["memento_memory_api.store"]
    assert not {name for name in store.imports if name.startswith(TOOLS_PACKAGE)}
    users = {dialect_of(m.name) for m in modules.values() if "memento_memory_api.store" in m.imports}
    assert set(PROFILES) - {"documents"} <= users  # every dialect that writes the one store's rows goes through it


def test_the_check_catches_a_handler_importing_another(tmp_path):
    """The rule run on a small tree that breaks it three ways: it names each."""
    tools = tmp_path / "memento_memory_api" / "tools"
    files = {
        "__init__.py": "from memento_memory_api.tools import simple, protocol\n",
        "registry.py": "",
        "simple/__init__.py": "from memento_memory_api.tools.simple import handlers\n",
        "simple/handlers.py": "from memento_memory_api.tools.registry import handles\n"
        "from memento_memory_api.tools.protocol.memories import ranked\n"
        "@handles('a')\nasync def a(ctx, args): ...\n",
        "protocol/__init__.py": "from . import memories, working\n",
        "protocol/memories.py": "from ..registry import handles\n@handles('b')\nasync def b(ctx, args): ...\n"
        "def ranked(): ...\n",
        "protocol/working.py": "from .memories import ranked\nfrom memento_memory_api.tools.registry import handles\n"
        "@handles('c')\nasync def c(ctx, args): ...\n",
    }
    for name, text in files.items():
        (tools / name).parent.mkdir(parents=True, exist_ok=True)
        (tools / name).write_text(text)
    (tools.parent / "store.py").write_text("from memento_memory_api.tools.simple import handlers\n")
    assert sorted(violations(scan(tools.parent))) == [
        "memento_memory_api.store (no dialect's) imports memento_memory_api.tools.simple.handlers",
        "memento_memory_api.tools.protocol.working imports the handler module"
        " memento_memory_api.tools.protocol.memories",
        "memento_memory_api.tools.simple.handlers (dialect simple) imports memento_memory_api.tools.protocol.memories"
        " (dialect protocol)",
    ]
