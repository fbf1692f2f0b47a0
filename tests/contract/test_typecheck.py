"""The type checker's and the complexity rule's exceptions live in one place (pyproject.toml) and only shrink.

`make test` runs mypy --strict before pytest; what it still forgives is [tool.mypy]'s `overrides` list (a module and
the error codes it still has) plus the `# type: ignore[...]` comments in the code. Their total is recorded here: a
change that adds one fails, a change that removes one fails until the number below is lowered with it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ["shared/memento_shared"] + [
    f"services/{service}/memento_{service.replace('-', '_')}"
    for service in ("gateway", "memory-api", "embedder", "evaluator", "consolidator")
]
# (module, error code) pairs in the overrides, plus `type: ignore` comments; lower it as entries go
TYPE_EXCEPTIONS = 105
# files excused from ruff's complexity cap (C901)
COMPLEX_FILES = 3
IGNORE_COMMENT = re.compile(r"#\s*type:\s*ignore")


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]


def _module_file(module: str) -> Path | None:
    """The source of one of our modules (a package for `pkg.*`), or None when no checked folder holds it."""
    parts = module.removesuffix(".*").split(".")
    for folder in CHECKED:
        top = ROOT / folder
        if top.name != parts[0]:
            continue
        path = top.joinpath(*parts[1:])
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _ignore_comments() -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in CHECKED
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if IGNORE_COMMENT.search(line)
    ]


def test_mypy_is_strict_over_the_library_and_every_service_and_make_test_runs_it():
    mypy = _config()["mypy"]
    assert mypy["strict"] is True and sorted(mypy["files"]) == sorted(CHECKED)
    assert not {"ignore_errors", "disable_error_code", "ignore_missing_imports", "follow_imports"} & set(mypy)
    recipe = (ROOT / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert recipe.index("$(BIN)/mypy") < recipe.index("-m pytest"), recipe


def test_every_exception_names_a_module_that_exists_and_forgives_only_error_codes():
    for entry in _config()["mypy"]["overrides"]:
        modules = entry["module"] if isinstance(entry["module"], list) else [entry["module"]]
        if entry.get("ignore_missing_imports"):  # packages with no type information, never one of ours that is checked
            assert set(entry) == {"module", "ignore_missing_imports"}, entry
            assert not [m for m in modules if _module_file(m)], entry
            continue
        assert set(entry) == {"module", "disable_error_code"} and entry["disable_error_code"], entry
        missing = [m for m in modules if _module_file(m) is None]
        assert not missing, f"exceptions for modules that no longer exist (remove them): {missing}"


def test_the_type_checker_exceptions_only_shrink():
    pairs = sum(
        len(entry.get("disable_error_code", [])) * (len(entry["module"]) if isinstance(entry["module"], list) else 1)
        for entry in _config()["mypy"]["overrides"]
    )
    comments = _ignore_comments()
    total = pairs + len(comments)
    assert total <= TYPE_EXCEPTIONS, (
        f"{total} type-checker exceptions, {TYPE_EXCEPTIONS} recorded: fix the new errors instead of listing them "
        f"({pairs} in pyproject.toml's [tool.mypy] overrides, `type: ignore` at {comments})"
    )
    assert total == TYPE_EXCEPTIONS, f"{total} exceptions left: lower TYPE_EXCEPTIONS in {Path(__file__).name}"


def test_the_complexity_cap_has_only_its_recorded_exceptions():
    ruff = _config()["ruff"]["lint"]
    assert "C90" in ruff["select"] and ruff["mccabe"]["max-complexity"] <= 15
    excused = [pattern for pattern, codes in ruff["per-file-ignores"].items() if "C901" in codes]
    assert len(excused) <= COMPLEX_FILES, f"new C901 exceptions {excused}: split the function instead"
    assert len(excused) == COMPLEX_FILES, f"lower COMPLEX_FILES in {Path(__file__).name} to {len(excused)}"
    assert all("*" not in pattern and (ROOT / pattern).is_file() for pattern in excused), excused
