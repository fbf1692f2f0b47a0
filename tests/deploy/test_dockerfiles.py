"""Offline checks of the Dockerfiles and .dockerignore: Docker's own Go parser (the `dockerfile` wheel) reads each
Dockerfile; every COPY source must exist and survive .dockerignore; the runtime stage runs the service's console
script as the non-root user the Kubernetes manifests expect."""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import dockerfile
import pytest

from tests.deploy.common import CONSOLE_COMMANDS, DOCKERIGNORE, ROOT, SERVICES, UID

INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
                "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "MAINTAINER"}  # fmt: skip


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


@cache
def dockerignore_rules() -> tuple[tuple[re.Pattern[str], bool], ...]:
    rules = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line[1:].strip() if negate else line
        pattern = pattern.strip("/")
        rules.append((_glob_regex(pattern), negate))
    return tuple(rules)


def ignored(path: str) -> bool:
    """Docker's rule: the last pattern that matches the path or one of its parents decides."""
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for regex, negate in dockerignore_rules():
        if any(regex.fullmatch(c) for c in candidates):
            result = not negate
    return result


def stages(path: Path) -> list[list[Any]]:
    commands = dockerfile.parse_file(str(path))
    result: list[list[Any]] = []
    for command in commands:
        assert command.cmd.upper() in INSTRUCTIONS, f"{path}: line {command.start_line}: unknown {command.cmd}"
        if command.cmd.upper() == "FROM":
            result.append([])
        assert result, f"{path}: {command.cmd} before FROM"
        result[-1].append(command)
    return result


def test_dockerignore_keeps_local_state_out_of_the_build_context() -> None:
    for path in (".venv/bin/python", ".memento/data", ".git/HEAD", ".env", "tests/unit/test_x.py",
                 "shared/memento_shared/__pycache__/x.pyc", ".pytest_cache/v", "services/gateway/build/lib/x.py",
                 "services/gateway/memento_gateway.egg-info/PKG-INFO", "deploy/k8s/base/gateway.yaml"):  # fmt: skip
        assert ignored(path), f"{path} would be sent to the Docker daemon"
    for path in ("shared/pyproject.toml", "shared/memento_shared/settings.py", "constraints.txt",
                 "shared/memento_shared/db/migrations/0001_init.sql"):  # fmt: skip
        assert not ignored(path), f"{path} is needed in the build"
    for svc in SERVICES.values():
        assert not ignored(f"services/{svc.name}/pyproject.toml"), svc.name


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_dockerfile(name: str) -> None:
    svc = SERVICES[name]
    path = ROOT / svc.dockerfile
    assert path.is_file()
    parsed = stages(path)
    stage_names = set()
    for stage in parsed:
        base = stage[0].value
        assert base[0] in stage_names or base[0].startswith("python:3.11"), f"{name}: FROM {base[0]}"
        if len(base) == 3 and base[1].upper() == "AS":
            stage_names.add(base[2])
    final = parsed[-1]
    assert final[0].value[0].startswith("python:3.11"), f"{name}: the runtime image is python:3.11"

    def last(cmd: str, commands: list[Any] = final) -> Any:
        found = [c for c in commands if c.cmd.upper() == cmd]
        return found[-1] if found else None

    user = last("USER")
    assert user, f"{name}: no USER: the container would run as root"
    uid = user.value[0].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, f"{name}: USER {uid} must be a numeric non-root uid"
    assert int(uid) == UID, "the Kubernetes manifests run as 10001"

    cmd = last("CMD")
    assert cmd and cmd.json, f"{name}: CMD in exec (JSON) form, so signals reach the server"
    assert list(cmd.value) == [svc.command], f"{name}: CMD {cmd.value}"
    assert cmd.value[0] in CONSOLE_COMMANDS
    assert last("ENTRYPOINT") is None, f"{name}: an ENTRYPOINT would wrap the command"
    scripts = tomllib.loads((svc.folder / "pyproject.toml").read_text())["project"]["scripts"]
    assert svc.command in scripts, f"{name}: {svc.command} is not a console script of the package"

    expose = last("EXPOSE")
    assert expose and expose.value[0].split("/")[0] == str(svc.port), f"{name}: EXPOSE {svc.port}"
    health = last("HEALTHCHECK")
    assert health and "/health" in " ".join(health.value) and "urllib" in " ".join(health.value), name
    env = " ".join(" ".join(c.value) for c in final if c.cmd.upper() == "ENV")
    assert "MEMENTO_BIND_HOST 0.0.0.0" in env, f"{name}: listen on every interface in a container"
    if name == "embedder":
        assert "OMP_NUM_THREADS" in env and "OMP_WAIT_POLICY PASSIVE" in env

    all_commands = [c for stage in parsed for c in stage]
    installs = [c for c in all_commands if c.cmd.upper() == "RUN" and "pip install" in " ".join(c.value)]
    assert installs, f"{name}: installs with pip"
    install = " ".join(" ".join(c.value) for c in installs)
    assert "--no-cache-dir" in install
    assert not re.search(r"(^|\s)(-e|--editable)(\s|$)", install), f"{name}: non-editable install"
    assert re.search(r"(\s|^)\./shared(/|\s|$)", install) and f"./services/{name}" in install, install
    for copy_cmd in (c for c in all_commands if c.cmd.upper() in ("COPY", "ADD")):
        if any(f.startswith("--from") for f in copy_cmd.flags):
            continue
        for source in copy_cmd.value[:-1]:
            assert (ROOT / source).exists(), f"{name}: COPY {source}: not in the repository"
            assert not ignored(source.rstrip("/") or "."), f"{name}: COPY {source} is excluded by .dockerignore"
