"""Offline checks of the deployment files: the Kubernetes base, docker-compose.yml and the Dockerfiles.

Nothing here needs a cluster, a Docker engine or the network:
- Kubernetes objects are validated against the official JSON schemas bundled by `kubernetes-validate` (strict
  mode: unknown fields fail). The kustomize output is built here from kustomization.yaml (resources, namespace,
  labels, images); when a `kubectl` binary happens to be installed, the build is compared with `kubectl kustomize`.
- docker-compose.yml is interpolated with the values of .env.example and validated against the Compose
  Specification schema that `check-jsonschema` ships (vendor/compose-spec.json).
- Dockerfiles are parsed with `dockerfile` (Docker's own Go parser, compiled into the wheel).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import dockerfile
import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERIGNORE = ROOT / ".dockerignore"
NAMESPACE = "memento"
UID = 10001


@dataclass(frozen=True)
class Svc:
    name: str
    command: str
    port: int
    port_env: str

    @property
    def folder(self) -> Path:
        return ROOT / "services" / self.name

    @property
    def dockerfile(self) -> str:
        return f"services/{self.name}/Dockerfile"


SERVICES = {
    s.name: s
    for s in (
        Svc("gateway", "memento-gateway", 56332, "PORT"),
        Svc("memory-api", "memento-memory-api", 56333, "MEMORY_API_PORT"),
        Svc("embedder", "memento-embedder", 56334, "EMBEDDER_PORT"),
        Svc("evaluator", "memento-evaluator", 56335, "EVALUATOR_PORT"),
        Svc("consolidator", "memento-consolidator", 56336, "CONSOLIDATOR_PORT"),
    )
}
EXPOSED = "gateway"
CONSOLE_COMMANDS = {s.command for s in SERVICES.values()}
MIGRATE_COMMAND = "memento-migrate"
# Variables a container may get that are not Memento settings.
NON_SETTINGS_ENV = {"OTEL_SERVICE_NAME", "OMP_NUM_THREADS", "OMP_WAIT_POLICY"}


# ----------------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------------


@cache
def settings_env_names() -> frozenset[str]:
    """Every environment variable memento_shared.settings.Settings reads."""
    from memento_shared.settings import Settings

    names = set()
    for name, field in Settings.model_fields.items():
        for alias in (field.alias, field.validation_alias):
            if isinstance(alias, str):
                names.add(alias.upper())
        if field.alias is None and field.validation_alias is None:
            names.add(name.upper())
    return frozenset(names)


def parse_quantity(value: Any) -> float:
    """A Kubernetes resource quantity as a number (cores or bytes)."""
    text = str(value)
    suffixes = {
        "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
        "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3,
    }  # fmt: skip
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([A-Za-z]*)", text)
    assert match, f"not a quantity: {value!r}"
    number, suffix = match.groups()
    assert suffix in suffixes or suffix == "", f"unknown quantity suffix in {value!r}"
    return float(number) * suffixes.get(suffix, 1)


# ----------------------------------------------------------------------------------------------------------------
# Kubernetes: a kustomize build without kustomize
# ----------------------------------------------------------------------------------------------------------------

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass",
                  "CustomResourceDefinition", "PriorityClass", "IngressClass"}  # fmt: skip
POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"}
KUSTOMIZATION_KEYS = {"apiVersion", "kind", "namespace", "labels", "resources", "images"}


def load_kustomization() -> dict[str, Any]:
    data = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    unknown = set(data) - KUSTOMIZATION_KEYS
    # The in-test build below implements exactly these fields; anything else would be silently ignored here.
    assert not unknown, f"kustomization.yaml uses {sorted(unknown)}: teach kustomize_build() about them"
    assert data["apiVersion"] == "kustomize.config.k8s.io/v1beta1" and data["kind"] == "Kustomization"
    return data


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    if obj["kind"] in POD_TEMPLATE_KINDS:
        return obj["spec"]["template"]["spec"]
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return None


def all_containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """name, tag, digest."""
    name, _, digest = image.partition("@")
    tag = None
    if ":" in name.rsplit("/", 1)[-1]:
        name, tag = name.rsplit(":", 1)
    return name, tag, digest or None


def kustomize_build(kustomization: dict[str, Any]) -> list[dict[str, Any]]:
    """The resources of the base with kustomize's namespace, labels and images transformers applied."""
    objects: list[dict[str, Any]] = []
    for resource in kustomization["resources"]:
        for doc in yaml.safe_load_all((K8S / resource).read_text()):
            if doc:
                objects.append(copy.deepcopy(doc))
    namespace = kustomization.get("namespace")
    for obj in objects:
        meta = obj.setdefault("metadata", {})
        if namespace and obj["kind"] not in CLUSTER_SCOPED:
            meta["namespace"] = namespace
        for entry in kustomization.get("labels", []):
            assert not entry.get("includeSelectors"), "includeSelectors would rewrite immutable selectors"
            meta.setdefault("labels", {}).update(entry["pairs"])
            if entry.get("includeTemplates") and obj["kind"] in POD_TEMPLATE_KINDS:
                obj["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {}).update(entry["pairs"])
        spec = pod_spec(obj)
        for container in all_containers(spec) if spec else []:
            name, tag, digest = split_image(container["image"])
            for rule in kustomization.get("images", []):
                if rule["name"] == name:
                    name = rule.get("newName", name)
                    tag = rule.get("newTag", tag)
                    digest = rule.get("digest", digest)
            container["image"] = name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
    return objects


@pytest.fixture(scope="module")
def kustomization() -> dict[str, Any]:
    return load_kustomization()


@pytest.fixture(scope="module")
def objects(kustomization: dict[str, Any]) -> list[dict[str, Any]]:
    return kustomize_build(kustomization)


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def workloads(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if pod_spec(o) is not None]


def test_kustomization_lists_exactly_the_files_in_the_folder(kustomization: dict[str, Any]) -> None:
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed)), "a resource is listed twice"
    for resource in listed:
        assert (K8S / resource).is_file(), f"kustomization.yaml lists {resource}, which does not exist"
    on_disk = {p.name for p in K8S.iterdir() if p.suffix in (".yaml", ".yml")} - {"kustomization.yaml"}
    assert on_disk == set(listed), f"not listed: {sorted(on_disk - set(listed))}"
    assert kustomization["namespace"] == NAMESPACE


def test_every_object_validates_against_the_kubernetes_schema(objects: list[dict[str, Any]]) -> None:
    version = latest_version()
    errors = []
    for obj in objects:
        where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            errors.append(f"{where}: {'.'.join(map(str, e.path))}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError as e:
            errors.append(f"{where}: {e.message}")
    assert not errors, f"against Kubernetes {version} schemas:\n" + "\n".join(errors)


def test_the_schema_validation_is_not_vacuous(objects: list[dict[str, Any]]) -> None:
    version = latest_version()
    deployment = copy.deepcopy(by_kind(objects, "Deployment")["gateway"])
    deployment["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, version, strict=True)
    deployment = copy.deepcopy(by_kind(objects, "Deployment")["gateway"])
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}  # a typo: strict mode rejects it
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, version, strict=True)


def test_objects_are_unique_and_in_the_namespace(objects: list[dict[str, Any]]) -> None:
    keys = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(keys) == len(set(keys)), "duplicate objects"
    assert ("Namespace", NAMESPACE) in keys
    for obj in objects:
        if obj["kind"] not in CLUSTER_SCOPED:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["metadata"]["name"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "memento"


def test_every_service_has_a_deployment_a_service_and_a_service_account(objects: list[dict[str, Any]]) -> None:
    deployments, services, accounts = (by_kind(objects, k) for k in ("Deployment", "Service", "ServiceAccount"))
    assert set(deployments) == set(SERVICES)
    assert set(services) == set(SERVICES)
    for name, deployment in deployments.items():
        spec = pod_spec(deployment)
        account = spec.get("serviceAccountName")
        assert account in accounts, f"{name}: serviceAccountName {account!r} is not defined in the base"
        assert account == f"memento-{name}", "each service runs under its own ServiceAccount"
    for workload in workloads(objects):
        spec = pod_spec(workload)
        name = workload["metadata"]["name"]
        assert spec.get("serviceAccountName") in accounts, name
        assert accounts[spec["serviceAccountName"]].get("automountServiceAccountToken") is False, name
        assert spec.get("automountServiceAccountToken") is False, f"{name}: no API token in the pod"
        # Service links would inject MEMORY_API_PORT=tcp://..., EMBEDDER_PORT=... and break the port settings.
        assert spec.get("enableServiceLinks") is False, name


def test_every_container_is_hardened_and_bounded(objects: list[dict[str, Any]]) -> None:
    for workload in workloads(objects):
        spec = pod_spec(workload)
        name = workload["metadata"]["name"]
        pod_sc = spec.get("securityContext", {})
        assert pod_sc.get("runAsNonRoot") is True, name
        assert pod_sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", name
        tmp_volumes = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
        assert all_containers(spec), name
        for container in all_containers(spec):
            where = f"{name}/{container['name']}"
            sc = container.get("securityContext", {})

            def effective(key: str, sc: dict = sc, pod_sc: dict = pod_sc) -> Any:
                return sc.get(key, pod_sc.get(key))

            assert effective("runAsNonRoot") is True, where
            assert effective("runAsUser") == UID, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert sc.get("privileged", False) is False, where
            assert "ALL" in sc.get("capabilities", {}).get("drop", []), where
            assert not sc.get("capabilities", {}).get("add"), where
            assert (sc.get("seccompProfile") or pod_sc.get("seccompProfile", {})).get("type") == "RuntimeDefault"
            mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
            assert mounts.get("/tmp") in tmp_volumes, f"{where}: read-only root needs an emptyDir on /tmp"

            resources = container.get("resources", {})
            for resource in ("cpu", "memory"):
                request = resources.get("requests", {}).get(resource)
                limit = resources.get("limits", {}).get(resource)
                assert request is not None and limit is not None, f"{where}: {resource} request and limit"
                assert parse_quantity(request) <= parse_quantity(limit), f"{where}: {resource} request > limit"


def test_every_deployment_container_probes_health(objects: list[dict[str, Any]]) -> None:
    for name, deployment in by_kind(objects, "Deployment").items():
        for container in pod_spec(deployment)["containers"]:
            port_names = {p.get("name") for p in container.get("ports", [])}
            port_numbers = {p["containerPort"] for p in container.get("ports", [])}
            for probe in ("readinessProbe", "livenessProbe"):
                http = container.get(probe, {}).get("httpGet")
                assert http, f"{name}: {probe} over HTTP"
                assert http["path"] == "/health", f"{name}: {probe} path"
                assert http["port"] in port_names | port_numbers, f"{name}: {probe} on an undeclared port"


def test_images_and_commands(objects: list[dict[str, Any]], kustomization: dict[str, Any]) -> None:
    overridable = {rule["name"] for rule in kustomization.get("images", [])}
    for name, deployment in by_kind(objects, "Deployment").items():
        (container,) = pod_spec(deployment)["containers"]
        image, tag, _ = split_image(container["image"])
        assert image == f"memento/{name}" and tag, f"{name}: image {container['image']}"
        assert image in overridable, f"{name}: add memento/{name} to kustomization images"
        assert container.get("command", [SERVICES[name].command]) == [SERVICES[name].command], name
    jobs = by_kind(objects, "Job")
    migrations = [
        c for job in jobs.values() for c in pod_spec(job)["containers"] if c.get("command") == [MIGRATE_COMMAND]
    ]
    assert len(migrations) == 1, "exactly one Job runs memento-migrate"
    image, _, _ = split_image(migrations[0]["image"])
    assert image in {"memento/gateway", "memento/memory-api"}, "memento-migrate ships with memento-shared"


def test_services_select_their_deployments_and_reach_declared_ports(objects: list[dict[str, Any]]) -> None:
    deployments = by_kind(objects, "Deployment")
    for name, service in by_kind(objects, "Service").items():
        selector = service["spec"].get("selector")
        assert selector, f"Service {name} has no selector"
        selected = [
            d for d in deployments.values() if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert [d["metadata"]["name"] for d in selected] == [name], f"Service {name} selects {selected}"
        deployment = selected[0]
        match_labels = deployment["spec"]["selector"]["matchLabels"]
        assert match_labels.items() <= deployment["spec"]["template"]["metadata"]["labels"].items(), name
        container_ports = [p for c in pod_spec(deployment)["containers"] for p in c.get("ports", [])]
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            hits = [p for p in container_ports if target in (p.get("name"), p["containerPort"])]
            assert hits, f"Service {name}: targetPort {target!r} matches no container port"
            assert hits[0]["containerPort"] == SERVICES[name].port, f"{name} listens on {SERVICES[name].port}"
            assert port["port"] == SERVICES[name].port, f"Service {name} port"


def test_only_the_gateway_is_meant_to_be_exposed(objects: list[dict[str, Any]]) -> None:
    for name, service in by_kind(objects, "Service").items():
        spec = service["spec"]
        exposure = service["metadata"]["labels"].get("memento.io/exposure")
        assert exposure == ("public" if name == EXPOSED else "internal"), name
        if name != EXPOSED:
            assert spec.get("type", "ClusterIP") == "ClusterIP", f"{name} must stay inside the cluster"
            assert not spec.get("externalIPs") and not any("nodePort" in p for p in spec["ports"]), name
    for kind in ("Ingress", "HTTPRoute"):
        for ingress in by_kind(objects, kind).values():
            assert EXPOSED in json.dumps(ingress["spec"]), f"{kind} {ingress['metadata']['name']}"
            for internal in set(SERVICES) - {EXPOSED}:
                assert f'"{internal}"' not in json.dumps(ingress["spec"]), f"{kind} exposes {internal}"


def test_pods_are_scraped_by_prometheus(objects: list[dict[str, Any]]) -> None:
    for name, deployment in by_kind(objects, "Deployment").items():
        annotations = deployment["spec"]["template"]["metadata"].get("annotations", {})
        assert annotations.get("prometheus.io/scrape") == "true", name
        assert annotations.get("prometheus.io/path") == "/metrics", name
        assert annotations.get("prometheus.io/port") == str(SERVICES[name].port), name


def test_environment_references_resolve_in_the_base(objects: list[dict[str, Any]]) -> None:
    secrets = by_kind(objects, "Secret")
    stores = {
        "configMap": {n: set(o.get("data", {})) for n, o in by_kind(objects, "ConfigMap").items()},
        "secret": {n: set(o.get("data", {})) | set(o.get("stringData", {})) for n, o in secrets.items()},
    }
    known = settings_env_names() | NON_SETTINGS_ENV
    for workload in workloads(objects):
        for container in all_containers(pod_spec(workload)):
            where = f"{workload['metadata']['name']}/{container['name']}"
            names = []
            for source in container.get("envFrom", []):
                for kind in ("configMap", "secret"):
                    ref = source.get(f"{kind}Ref")
                    if ref:
                        assert ref["name"] in stores[kind], f"{where}: envFrom {kind} {ref['name']} is not in the base"
                        names += stores[kind][ref["name"]]
            for var in container.get("env", []):
                names.append(var["name"])
                for kind in ("configMap", "secret"):
                    ref = var.get("valueFrom", {}).get(f"{kind}KeyRef")
                    if ref:
                        assert ref["key"] in stores[kind].get(ref["name"], ()), f"{where}: {var['name']} -> {ref}"
            unknown = set(names) - known
            assert not unknown, f"{where}: {sorted(unknown)} are not settings memento_shared reads"


def test_config_and_secrets_wire_the_services_together(objects: list[dict[str, Any]]) -> None:
    config = by_kind(objects, "ConfigMap")["memento-config"]["data"]
    assert config["MEMENTO_BIND_HOST"] == "0.0.0.0"
    for svc in SERVICES.values():
        assert config[svc.port_env] == str(svc.port)
    assert config["MEMORY_API_URL"] == f"http://memory-api:{SERVICES['memory-api'].port}"
    assert config["EMBEDDER_URL"] == f"http://embedder:{SERVICES['embedder'].port}"

    secrets = by_kind(objects, "Secret")
    service_secret = secrets["memento-secrets"]["stringData"]
    for key in ("DATABASE_URL", "REDIS_URL", "MEMENTO_ACCESS_KEY", "MEMENTO_INTERNAL_SECRET"):
        assert key in service_secret, key
    assert re.match(r"postgresql://memento_app:", service_secret["DATABASE_URL"]), "services log in as memento_app"
    # The schema owner's DSN reaches only the migration Job.
    for name, obj in secrets.items():
        for workload in workloads(objects):
            refs = {
                s.get("secretRef", {}).get("name")
                for c in all_containers(pod_spec(workload))
                for s in c.get("envFrom", [])
            }
            if name in refs and "MIGRATION_DATABASE_URL" in obj["stringData"]:
                assert workload["kind"] == "Job", f"{workload['metadata']['name']} gets MIGRATION_DATABASE_URL"
    for value in [*service_secret.values(), *secrets["memento-migrate-secrets"]["stringData"].values()]:
        assert value == "" or "REPLACE_ME" in value, "secret.example.yaml holds placeholders only"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="waits for kubectl; the in-test kustomize build still runs")
def test_in_test_build_matches_kubectl_kustomize(objects: list[dict[str, Any]]) -> None:
    out = subprocess.run(["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    theirs = sorted((d for d in yaml.safe_load_all(out.stdout) if d), key=lambda o: (o["kind"], o["metadata"]["name"]))
    ours = sorted(objects, key=lambda o: (o["kind"], o["metadata"]["name"]))
    assert ours == theirs


# ----------------------------------------------------------------------------------------------------------------
# docker compose
# ----------------------------------------------------------------------------------------------------------------

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
    assert set(compose["services"]) == {"postgres", "redis", "migrate", *SERVICES}
    for name, service in compose["services"].items():
        # The schema leaves restart a free string; the engine accepts only these.
        restart = str(service.get("restart", "no"))
        assert re.fullmatch(r"no|always|unless-stopped|on-failure(:\d+)?", restart), f"{name}: restart {restart}"


def test_every_compose_variable_is_documented(env_example: dict[str, str]) -> None:
    used = variables_used(COMPOSE.read_text())
    undocumented = set(used) - set(env_example)
    assert not undocumented, f"add {sorted(undocumented)} to .env.example"
    unused = set(env_example) - set(used)
    assert not unused, f".env.example documents {sorted(unused)}, which docker-compose.yml never uses"
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
    assert migrate["build"]["dockerfile"] in (SERVICES["gateway"].dockerfile, SERVICES["memory-api"].dockerfile)
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
    assert set(published) == {EXPOSED}, published
    (port,) = published[EXPOSED]
    assert str(port).rsplit(":", 1)[-1] == str(SERVICES[EXPOSED].port)


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
# Dockerfiles and .dockerignore
# ----------------------------------------------------------------------------------------------------------------

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
                 "services/gateway/memento_gateway.egg-info/PKG-INFO", "deploy/k8s/gateway.yaml"):  # fmt: skip
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
