"""Offline checks of the one Dockerfile and .dockerignore: Docker's own Go parser (the `dockerfile` wheel) reads the
Dockerfile; every COPY source must exist, for each service, and survive .dockerignore; the build argument SERVICE
picks the service, and the runtime stage runs its console script as the non-root user the Kubernetes manifests
expect."""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import dockerfile
import pytest

from tests.deploy.common import DOCKERFILE, DOCKERIGNORE, ROOT, SERVICES, UID

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


def _last(commands: list[Any], cmd: str) -> Any:
    found = [c for c in commands if c.cmd.upper() == cmd]
    return found[-1] if found else None


def _joined(commands: list[Any], cmd: str) -> str:
    return " ".join(" ".join(c.value) for c in commands if c.cmd.upper() == cmd)


def test_one_dockerfile_builds_every_service() -> None:
    assert not sorted((ROOT / "services").glob("*/Dockerfile")), "the services share the root Dockerfile"
    parsed = stages(ROOT / DOCKERFILE)
    stage_names = set()
    for stage in parsed:
        base = stage[0].value
        assert base[0] in stage_names or base[0].startswith("python:3.11"), f"FROM {base[0]}"
        if len(base) == 3 and base[1].upper() == "AS":
            stage_names.add(base[2])
        assert any(c.cmd.upper() == "ARG" and c.value[0].split("=")[0] == "SERVICE" for c in stage), "ARG SERVICE"
    final = parsed[-1]
    assert final[0].value[0].startswith("python:3.11"), "the runtime image is python:3.11"

    user = _last(final, "USER")
    assert user, "no USER: the container would run as root"
    uid = user.value[0].split(":")[0]
    assert uid.isdigit() and int(uid) == UID, f"USER {uid}: the Kubernetes manifests run as {UID}, never root"

    cmd = _last(final, "CMD")
    assert cmd and cmd.json and list(cmd.value) == ["memento-service"], "CMD in exec (JSON) form: signals reach it"
    assert _last(final, "ENTRYPOINT") is None, "an ENTRYPOINT would wrap the command"
    health = " ".join(_last(final, "HEALTHCHECK").value)
    assert "/health" in health and "urllib" in health and "/opt/venv/memento-port" in health, health
    env = _joined(final, "ENV")
    assert "MEMENTO_BIND_HOST 0.0.0.0" in env, "listen on every interface in a container"
    assert "OMP_NUM_THREADS" in env and "OMP_WAIT_POLICY PASSIVE" in env, "the embedder's OpenMP pool stays small"

    install = _joined([c for stage in parsed for c in stage], "RUN")
    assert "pip install --no-cache-dir" in install
    assert not re.search(r"(^|\s)(-e|--editable)(\s|$)", install), "non-editable install"
    assert re.search(r"(\s|^)\./shared(/|\s|$)", install) and '"./services/${SERVICE}"' in install, install
    assert 'ln -s "memento-${SERVICE}" /opt/venv/bin/memento-service' in install, install


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_the_dockerfile_builds(name: str) -> None:
    """What `--build-arg SERVICE=<name>` makes of it: the sources it copies, the command and the port it checks."""
    svc = SERVICES[name]
    parsed = stages(ROOT / DOCKERFILE)
    all_commands = [c for stage in parsed for c in stage]
    scripts = tomllib.loads((svc.folder / "pyproject.toml").read_text())["project"]["scripts"]
    assert f"memento-{name}" == svc.command and svc.command in scripts, f"memento-service links to {svc.command}"
    table = _joined(all_commands, "RUN")
    assert re.search(rf'{re.escape(name)}\) echo "{svc.port_env} {svc.port}" ;;', table), f"{name}: port in the table"
    for copy_cmd in (c for c in all_commands if c.cmd.upper() in ("COPY", "ADD")):
        if any(f.startswith("--from") for f in copy_cmd.flags):
            continue
        for source in copy_cmd.value[:-1]:
            source = source.replace("${SERVICE}", name)
            assert (ROOT / source).exists(), f"{name}: COPY {source}: not in the repository"
            assert not ignored(source.rstrip("/") or "."), f"{name}: COPY {source} is excluded by .dockerignore"
