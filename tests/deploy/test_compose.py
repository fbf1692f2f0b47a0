"""Offline checks of docker-compose.yml and .env.example, and of the optional tracing profile's collector config.

docker-compose.yml is interpolated with the values of .env.example (every empty one filled in, as a user's .env
would be) and validated against the Compose Specification schema that `check-jsonschema` ships
(vendor/compose-spec.json); then the wiring is checked: healthchecks, the one-shot migration the services wait for,
credentials by role, one published port, and the `otel` profile (an OpenTelemetry Collector and Jaeger) that
nothing else depends on.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy.common import (
    COMPOSE,
    ENV_EXAMPLE,
    EXPOSED,
    MIGRATE_COMMAND,
    NON_SETTINGS_ENV,
    ROOT,
    SERVICES,
    settings_env_names,
)

OTEL_PROFILE = "otel"
PROFILE_SERVICES = {"otel-collector", "jaeger"}
# Variables docker compose itself reads from .env (they configure compose, not a service).
COMPOSE_OWN_VARIABLES = {"COMPOSE_PROFILES"}
COLLECTOR_CONFIG = ROOT / "deploy" / "otel" / "collector.yaml"


_INTERPOLATION = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


class MissingVariable(Exception):
    pass


def variables_used(text: str) -> dict[str, set[str]]:
    """Each ${VAR} the compose file uses, with the operators it is used with ('' for none)."""
    used: dict[str, set[str]] = {}
    for m in _INTERPOLATION.finditer(text):
        if not m["escaped"]:
            used.setdefault(m["braced"] or m["bare"], set()).add(m["op"] or "")
    return used


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable substitution, applied to every string value."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def replace(m: re.Match[str]) -> str:
        if m["escaped"]:
            return "$"
        name = m["braced"] or m["bare"]
        op, arg, current = m["op"], m["arg"] or "", env.get(name)
        if op in (":?", "?") and (current is None or (op == ":?" and current == "")):
            raise MissingVariable(f"{name}: {arg}")
        if op in (":-", "-") and (current is None or (op == ":-" and current == "")):
            return arg
        if op in (":+", "+"):
            return arg if current is not None and (op == "+" or current != "") else ""
        return current or ""

    return _INTERPOLATION.sub(replace, value)


def read_env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep and re.fullmatch(r"[A-Z][A-Z0-9_]*", key), f"{path.name}: bad line {line!r}"
            assert key not in values, f"{path.name}: {key} twice"
            values[key] = value
    return values


@cache
def compose_schema() -> dict[str, Any]:
    schema = files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text()
    return json.loads(schema)


def compose_validate(document: dict[str, Any]) -> list[str]:
    schema = compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


@pytest.fixture(scope="module")
def env_example() -> dict[str, str]:
    return read_env_file(ENV_EXAMPLE)


@pytest.fixture(scope="module")
def filled_env(env_example: dict[str, str]) -> dict[str, str]:
    """.env.example with every empty value filled in, as a user's .env would be."""
    return {k: v or f"test-{k.lower().replace('_', '-')}" for k, v in env_example.items()}


@pytest.fixture(scope="module")
def compose(filled_env: dict[str, str]) -> dict[str, Any]:
    return interpolate(yaml.safe_load(COMPOSE.read_text()), filled_env)


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return {k: (None if v is None else str(v)) for k, v in env.items()}


def test_compose_validates_against_the_compose_specification(compose: dict[str, Any]) -> None:
    errors = compose_validate(compose)
    assert not errors, "\n".join(errors)


def test_the_compose_schema_validation_is_not_vacuous(compose: dict[str, Any]) -> None:
    broken = copy.deepcopy(compose)
    broken["services"]["gateway"]["depends_on"]["migrate"]["condition"] = "service_finished"
    broken["services"]["memory-api"]["restart_policy"] = "always"
    errors = compose_validate(broken)
    assert any("service_finished" in e for e in errors) and any("restart_policy" in e for e in errors), errors


def test_compose_has_the_expected_services(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"postgres", "redis", "migrate", *SERVICES, *PROFILE_SERVICES}
    for name, service in compose["services"].items():
        # The schema leaves restart a free string; the engine accepts only these.
        restart = str(service.get("restart", "no"))
        assert re.fullmatch(r"no|always|unless-stopped|on-failure(:\d+)?", restart), f"{name}: restart {restart}"
        expected = [OTEL_PROFILE] if name in PROFILE_SERVICES else None
        assert service.get("profiles") == expected, f"{name}: profiles {service.get('profiles')}"


def test_every_compose_variable_is_documented(env_example: dict[str, str]) -> None:
    used = variables_used(COMPOSE.read_text())
    undocumented = set(used) - set(env_example)
    assert not undocumented, f"add {sorted(undocumented)} to .env.example"
    unused = set(env_example) - set(used) - COMPOSE_OWN_VARIABLES
    assert not unused, f".env.example documents {sorted(unused)}, which docker-compose.yml never uses"
    assert COMPOSE_OWN_VARIABLES <= set(env_example), "say in .env.example how to turn the otel profile on"
    assert env_example["COMPOSE_PROFILES"] == "", "optional profiles stay off by default"
    for name in ("POSTGRES_PASSWORD", "MEMENTO_APP_DB_PASSWORD", "REDIS_PASSWORD", "MEMENTO_ACCESS_KEY",
                 "MEMENTO_INTERNAL_SECRET"):  # fmt: skip
        assert used[name] == {":?"}, f"{name} is required: use ${{{name}:?...}} everywhere"
        assert env_example[name] == "", f".env.example must not ship a usable {name}"


def test_compose_refuses_to_start_without_the_required_secrets(env_example: dict[str, str]) -> None:
    with pytest.raises(MissingVariable):
        interpolate(yaml.safe_load(COMPOSE.read_text()), env_example)


def test_postgres_and_redis(compose: dict[str, Any]) -> None:
    services = compose["services"]
    postgres, redis = services["postgres"], services["redis"]
    assert postgres["image"] == "pgvector/pgvector:pg18"
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert redis["image"] == "redis:7-alpine"
    assert "--requirepass" in " ".join(redis["command"])
    assert "ping" in " ".join(redis["healthcheck"]["test"])
    for service, path in ((postgres, "/var/lib/postgresql"), (redis, "/data")):
        volume = next(v.split(":")[0] for v in service["volumes"] if v.split(":")[1] == path)
        assert volume in compose["volumes"], f"named volume {volume} is declared"


def test_migrate_runs_once_before_the_services(compose: dict[str, Any]) -> None:
    migrate = compose["services"]["migrate"]
    assert migrate["command"] in ([MIGRATE_COMMAND], MIGRATE_COMMAND)
    assert migrate["build"]["dockerfile"] == SERVICES["memory-api"].dockerfile
    assert migrate["build"]["args"]["SERVICE"] in ("gateway", "memory-api"), "memento-migrate ships with memento-shared"
    assert migrate.get("restart", "no") == "no"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    env = environment(migrate)
    owner, app = env["MIGRATION_DATABASE_URL"], env["DATABASE_URL"]
    assert owner.split("@")[0] != app.split("@")[0], "the migration and the services use different roles"
    assert app.startswith("postgresql://memento_app:")


def test_the_five_services(compose: dict[str, Any]) -> None:
    known = settings_env_names() | NON_SETTINGS_ENV
    otel_names = set()
    for name, svc in SERVICES.items():
        service = compose["services"][name]
        assert service["build"]["context"] == "."
        assert service["build"]["dockerfile"] == svc.dockerfile and (ROOT / svc.dockerfile).is_file(), name
        assert service["build"]["args"] == {"SERVICE": name}, f"{name}: the one Dockerfile, built for {name}"
        deps = service["depends_on"]
        assert deps["migrate"]["condition"] == "service_completed_successfully", name
        assert deps["postgres"]["condition"] == "service_healthy", name
        assert deps["redis"]["condition"] == "service_healthy", name
        health = " ".join(service["healthcheck"]["test"])
        assert f"127.0.0.1:{svc.port}/health" in health, f"{name}: healthcheck on its own /health"
        env = environment(service)
        assert env["MEMENTO_BIND_HOST"] == "0.0.0.0", name
        assert env[svc.port_env] == str(svc.port), name
        assert env["DATABASE_URL"].startswith("postgresql://memento_app:"), name
        assert "MIGRATION_DATABASE_URL" not in env and "POSTGRES_PASSWORD" not in env, f"{name}: owner credentials"
        assert env["OTEL_SERVICE_NAME"] == f"memento-{name}", name
        otel_names.add(env["OTEL_SERVICE_NAME"])
        unknown = set(env) - known
        assert not unknown, f"{name}: {sorted(unknown)} are not settings memento_shared reads"
        if name != EXPOSED:
            assert not service.get("ports"), f"{name} must not publish a port"
        assert service.get("network_mode") is None, name
    assert len(otel_names) == len(SERVICES)
    assert environment(compose["services"]["gateway"])["MEMORY_API_URL"] == "http://memory-api:56333"
    assert environment(compose["services"]["memory-api"])["EMBEDDER_URL"] == "http://embedder:56334"
    embedder = environment(compose["services"]["embedder"])
    assert embedder["OMP_WAIT_POLICY"] == "PASSIVE" and int(embedder["OMP_NUM_THREADS"]) >= 1


def test_only_the_gateway_publishes_a_port(compose: dict[str, Any]) -> None:
    published = {name: s["ports"] for name, s in compose["services"].items() if s.get("ports")}
    assert set(published) - PROFILE_SERVICES == {EXPOSED}, published
    (port,) = published[EXPOSED]
    assert str(port).rsplit(":", 1)[-1] == str(SERVICES[EXPOSED].port)
    for name in set(published) & PROFILE_SERVICES:
        for port in published[name]:
            assert str(port).startswith("127.0.0.1:"), f"{name}: a tracing UI stays on the loopback address"


def test_the_default_services_never_depend_on_a_profile(compose: dict[str, Any]) -> None:
    """A service of the default set that needed the otel profile would not start without it."""
    for name, service in compose["services"].items():
        if not service.get("profiles"):
            assert not set(service.get("depends_on", {})) & PROFILE_SERVICES, name


def test_compose_dependencies_have_no_cycle(compose: dict[str, Any]) -> None:
    graph = {name: set(s.get("depends_on", {})) for name, s in compose["services"].items()}
    for deps in graph.values():
        assert deps <= set(graph), deps
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"dependency cycle: {' -> '.join((*path, node))}"
        if node not in done:
            for dep in graph[node]:
                visit(dep, (*path, node))
            done.add(node)

    for node in graph:
        visit(node, ())


# ----------------------------------------------------------------------------------------------------------------
# the `otel` profile: OpenTelemetry Collector + Jaeger
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def collector() -> dict[str, Any]:
    return yaml.safe_load(COLLECTOR_CONFIG.read_text())


def test_the_collector_mounts_its_config_and_runs_hardened(compose: dict[str, Any]) -> None:
    service = compose["services"]["otel-collector"]
    assert service["image"].startswith("otel/opentelemetry-collector-contrib:")
    assert not service["image"].endswith(":latest"), "pin the collector's version"
    (mount,) = service["volumes"]
    source, target, mode = mount.split(":")
    assert (ROOT / source).resolve() == COLLECTOR_CONFIG and mode == "ro"
    assert f"--config={target}" in service["command"]
    for name in PROFILE_SERVICES:
        svc = compose["services"][name]
        assert svc.get("read_only") is True and svc.get("cap_drop") == ["ALL"], name


def test_the_collector_pipeline_is_complete(collector: dict[str, Any], compose: dict[str, Any]) -> None:
    """Every component a pipeline names is configured, and every configured one is used (the collector refuses
    to start otherwise)."""
    pipelines = collector["service"]["pipelines"]
    assert "traces" in pipelines
    for section in ("receivers", "processors", "exporters"):
        used = {name for pipeline in pipelines.values() for name in pipeline.get(section, [])}
        assert used == set(collector.get(section, {})), f"{section}: configured {set(collector.get(section, {}))}"
    assert set(collector["service"].get("extensions", [])) == set(collector.get("extensions", {}))
    assert "memory_limiter" == pipelines["traces"]["processors"][0], "memory_limiter comes first"
    for name, exporter in collector["exporters"].items():
        endpoint = (exporter or {}).get("endpoint")
        if endpoint:
            host = endpoint.split("://")[-1].split(":")[0]
            assert host in compose["services"], f"{name} exports to {host}, which compose does not run"


def test_services_can_point_their_otlp_endpoint_at_the_collector(
    collector: dict[str, Any], compose: dict[str, Any]
) -> None:
    """The endpoint the docs give reaches the collector's OTLP/HTTP receiver; the services then add /v1/traces."""
    http = collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    assert http.startswith("0.0.0.0:"), "listen beyond the container's loopback"
    endpoint = f"http://otel-collector:{http.rsplit(':', 1)[1]}"
    assert endpoint == "http://otel-collector:4318"
    for text in (ENV_EXAMPLE.read_text(), COMPOSE.read_text()):
        assert endpoint in text and "COMPOSE_PROFILES=otel" in text
    for name in SERVICES:
        assert "OTEL_EXPORTER_OTLP_ENDPOINT" in environment(compose["services"][name]), name
