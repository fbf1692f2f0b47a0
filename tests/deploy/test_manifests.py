"""Offline checks of the Kubernetes manifests: the base (deploy/k8s/base) and, where a rule holds for every
workload, every build of conftest.py (base, base + each component, all components, overlays/trial).

Nothing here needs a cluster or the network. Built-in kinds are validated against the official JSON schemas that
`kubernetes-validate` bundles, in strict mode (an unknown field fails); custom resources (KEDA, Prometheus
Operator) against the CRD schemas vendored in tests/deploy/schemas/. The builds are made by tests/deploy/
kustomize.py; test_components.py compares them with `kubectl kustomize` where kubectl is installed.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.utils import latest_version

from tests.deploy.common import (
    EXPOSED,
    K8S,
    MIGRATE_COMMAND,
    NAMESPACE,
    NON_SETTINGS_ENV,
    ROOT,
    SERVICES,
    UID,
    WORKERS,
    parse_quantity,
    settings_env_names,
)
from tests.deploy.kustomize import (
    CLUSTER_SCOPED,
    all_containers,
    by_kind,
    load_kustomization,
    pod_spec,
    pod_template,
    selects,
    split_image,
    workloads,
)

SCHEMAS = Path(__file__).parent / "schemas"
# Custom resources and the schema each is validated against (see each file's $comment for its source).
CRD_SCHEMAS = {
    ("keda.sh/v1alpha1", "ScaledObject"): "keda-scaledobject.json",
    ("keda.sh/v1alpha1", "TriggerAuthentication"): "keda-triggerauthentication.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule.json",
    ("monitoring.coreos.com/v1", "PodMonitor"): "podmonitor.json",
}
# Files in a kustomization folder that are deliberately not resources.
NOT_RESOURCES = {"components/monitoring/alerts.yaml"}


def template_labels(workload: dict[str, Any]) -> dict[str, str]:
    return pod_template(workload)["metadata"]["labels"]


def memento_name(obj: dict[str, Any]) -> str | None:
    """The service a workload runs, if it is one of Memento's five."""
    name = obj["metadata"]["name"]
    return name if obj["kind"] == "Deployment" and name in SERVICES else None


def every_build(builds: dict[str, list[dict]]) -> list[tuple[str, dict]]:
    return [(name, obj) for name, objects in builds.items() for obj in objects]


# ----------------------------------------------------------------------------------------------------------------
# files and schemas
# ----------------------------------------------------------------------------------------------------------------


def test_every_kustomization_lists_exactly_the_yaml_files_beside_it() -> None:
    folders = [p.parent for p in K8S.rglob("kustomization.yaml")]
    assert {f.relative_to(K8S).as_posix() for f in folders} >= {"base", "overlays/trial"}
    for folder in folders:
        where = folder.relative_to(K8S).as_posix()
        kind = "Component" if where.startswith("components/") else "Kustomization"
        listed = load_kustomization(folder, kind).get("resources", [])
        files = [r for r in listed if not (folder / r).is_dir()]
        assert len(listed) == len(set(listed)), f"{where}: a resource is listed twice"
        for resource in listed:
            assert (folder / resource).exists(), f"{where}: lists {resource}, which does not exist"
        on_disk = {
            p.name
            for p in folder.iterdir()
            if p.suffix in (".yaml", ".yml") and f"{where}/{p.name}" not in NOT_RESOURCES
        } - {"kustomization.yaml"}
        assert on_disk == set(files), f"{where}: not listed: {sorted(on_disk - set(files))}"
    assert (K8S / "base" / "kustomization.yaml").is_file()
    assert load_kustomization(K8S / "base")["namespace"] == NAMESPACE


def test_every_component_is_used_by_the_all_components_build(builds: dict[str, list[dict]]) -> None:
    components = {p.name for p in (K8S / "components").iterdir() if p.is_dir()}
    assert components == {n.removeprefix("with-") for n in builds if n.startswith("with-")}
    assert {"network-policies", "keda-queue-autoscaling", "monitoring", "in-cluster-postgres",
            "in-cluster-redis"} <= components  # fmt: skip


@cache
def crd_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS / CRD_SCHEMAS[(api_version, kind)]).read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate(obj: dict[str, Any]) -> list[str]:
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key in CRD_SCHEMAS:
        errors = crd_validator(*key).iter_errors(obj)
        return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]
    try:
        kubernetes_validate.validate(obj, latest_version(), strict=True)
    except kubernetes_validate.ValidationError as e:
        return [f"{'.'.join(map(str, e.path))}: {e.message}"]
    except kubernetes_validate.SchemaNotFoundError as e:
        return [f"no schema for {key}: {e.message} (a custom resource? vendor its CRD schema in tests/deploy/schemas)"]
    return []


def test_every_object_of_every_build_validates_against_its_schema(builds: dict[str, list[dict]]) -> None:
    errors = []
    seen = set()
    for build, obj in every_build(builds):
        key = json.dumps(obj, sort_keys=True)
        if key not in seen:
            seen.add(key)
            errors += [f"{build}: {obj['kind']}/{obj['metadata']['name']}: {e}" for e in validate(obj)]
    assert not errors, f"against Kubernetes {latest_version()} and the vendored CRD schemas:\n" + "\n".join(errors)


def test_the_schema_validation_is_not_vacuous(builds: dict[str, list[dict]]) -> None:
    deployment = copy.deepcopy(by_kind(builds["base"], "Deployment")["gateway"])
    deployment["spec"]["replicas"] = "two"
    assert validate(deployment)
    deployment = copy.deepcopy(by_kind(builds["base"], "Deployment")["gateway"])
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}  # a typo: strict mode rejects it
    assert validate(deployment)
    everything = builds["all-components"]
    for (api_version, kind), _ in CRD_SCHEMAS.items():
        (sample, *_) = [o for o in everything if o["kind"] == kind and o["apiVersion"] == api_version]
        broken = copy.deepcopy(sample)
        broken["spec"]["unknownField"] = True
        assert validate(broken), f"{kind}: an unknown spec field must fail"
    scaled = copy.deepcopy(by_kind(everything, "ScaledObject")["embedder"])
    scaled["spec"]["triggers"][0]["authenticationRef"]["kind"] = "SecretAuthentication"
    assert validate(scaled)
    rule = copy.deepcopy(by_kind(everything, "PrometheusRule")["memento-alerts"])
    rule["spec"]["groups"][0]["rules"][0]["for"] = "ten minutes"
    assert validate(rule)


def test_objects_are_unique_namespaced_and_labelled(builds: dict[str, list[dict]]) -> None:
    for build, objects in builds.items():
        keys = [(o["kind"], o["metadata"]["name"]) for o in objects]
        assert len(keys) == len(set(keys)), f"{build}: duplicate objects"
        assert ("Namespace", NAMESPACE) in keys, build
        for obj in objects:
            where = f"{build}: {obj['kind']}/{obj['metadata']['name']}"
            if obj["kind"] not in CLUSTER_SCOPED:
                assert obj["metadata"].get("namespace") == NAMESPACE, where
            assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "memento", where


# ----------------------------------------------------------------------------------------------------------------
# workloads
# ----------------------------------------------------------------------------------------------------------------


def test_every_service_has_a_deployment_a_service_a_service_account_and_a_pdb(objects: list[dict]) -> None:
    deployments, services, accounts = (by_kind(objects, k) for k in ("Deployment", "Service", "ServiceAccount"))
    assert set(deployments) == set(SERVICES)
    assert set(services) == set(SERVICES)
    for name, deployment in deployments.items():
        spec = pod_spec(deployment)
        assert spec["serviceAccountName"] == f"memento-{name}", "each service runs under its own ServiceAccount"
        assert spec["serviceAccountName"] in accounts, name
    for file in ("gateway.yaml", "memory-api.yaml", "embedder.yaml", "evaluator.yaml", "consolidator.yaml"):
        kinds = {doc["kind"] for doc in yaml.safe_load_all((K8S / "base" / file).read_text()) if doc}
        assert {"Deployment", "Service", "ServiceAccount", "PodDisruptionBudget"} <= kinds, f"one file: {file}"


def test_pods_run_under_their_own_account_without_api_token_or_service_links(builds: dict[str, list[dict]]) -> None:
    for build, objects in builds.items():
        accounts = by_kind(objects, "ServiceAccount")
        for workload in workloads(objects):
            spec = pod_spec(workload)
            where = f"{build}: {workload['metadata']['name']}"
            assert spec.get("serviceAccountName") in accounts, where
            assert accounts[spec["serviceAccountName"]].get("automountServiceAccountToken") is False, where
            assert spec.get("automountServiceAccountToken") is False, f"{where}: no API token in the pod"
            # Service links would inject MEMORY_API_PORT=tcp://..., EMBEDDER_PORT=... and break the port settings.
            assert spec.get("enableServiceLinks") is False, where


def test_every_container_is_hardened_and_bounded(builds: dict[str, list[dict]]) -> None:
    """The namespace enforces the restricted Pod Security Standard; these are its rules and ours."""
    for build, objects in builds.items():
        for workload in workloads(objects):
            spec = pod_spec(workload)
            name = f"{build}: {workload['metadata']['name']}"
            pod_sc = spec.get("securityContext", {})
            assert pod_sc.get("runAsNonRoot") is True, name
            assert pod_sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", name
            writable = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
            writable |= {c["metadata"]["name"] for c in workload["spec"].get("volumeClaimTemplates", [])}
            for volume in spec.get("volumes", []):
                allowed = {"name", "emptyDir", "configMap", "secret", "projected", "persistentVolumeClaim"}
                assert set(volume) <= allowed, f"{name}: volume {volume['name']} of a type restricted PSS forbids"
            assert all_containers(spec), name
            for container in all_containers(spec):
                where = f"{name}/{container['name']}"
                sc = container.get("securityContext", {})

                def effective(key: str, sc: dict = sc, pod_sc: dict = pod_sc) -> Any:
                    return sc.get(key, pod_sc.get(key))

                assert effective("runAsNonRoot") is True, where
                uid = effective("runAsUser")
                assert isinstance(uid, int) and uid > 0, f"{where}: a numeric non-root runAsUser"
                if memento_name(workload) or workload["kind"] == "Job":
                    assert uid == UID, f"{where}: Memento's images run as {UID}"
                assert sc.get("readOnlyRootFilesystem") is True, where
                assert sc.get("allowPrivilegeEscalation") is False, where
                assert sc.get("privileged", False) is False, where
                assert "ALL" in sc.get("capabilities", {}).get("drop", []), where
                assert not sc.get("capabilities", {}).get("add"), where
                assert (sc.get("seccompProfile") or pod_sc.get("seccompProfile", {})).get("type") == "RuntimeDefault"
                mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
                assert mounts.get("/tmp") in writable, f"{where}: a read-only root needs a writable /tmp"
                resources = container.get("resources", {})
                for resource in ("cpu", "memory"):
                    request = resources.get("requests", {}).get(resource)
                    limit = resources.get("limits", {}).get(resource)
                    assert request is not None and limit is not None, f"{where}: {resource} request and limit"
                    assert parse_quantity(request) <= parse_quantity(limit), f"{where}: {resource} request > limit"


ROUTE_CALLS = {"Route", "add_api_route", "api_route", "route", "add_route", "get"}


@cache
def served_paths(service: str) -> frozenset[str]:
    """HTTP paths a service's code registers (Route("/x"), router.get("/x"), ...): its package, plus the shared
    worker runtime for the workers."""
    files = list((ROOT / "services" / service).rglob("*.py"))
    if service in WORKERS:
        files.append(ROOT / "shared" / "memento_shared" / "worker.py")
    paths = set()
    for file in files:
        if ".egg-info" in file.parts:
            continue
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Call) and node.args:
                func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                first = node.args[0]
                if func in ROUTE_CALLS and isinstance(first, ast.Constant) and str(first.value).startswith("/"):
                    paths.add(first.value)
    return frozenset(paths)


def test_every_deployment_has_readiness_and_liveness_probes_on_paths_it_serves(objects: list[dict]) -> None:
    for name, deployment in by_kind(objects, "Deployment").items():
        (container,) = pod_spec(deployment)["containers"]
        ports = {p.get("name") for p in container["ports"]} | {p["containerPort"] for p in container["ports"]}
        probes = {}
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            http = container.get(probe, {}).get("httpGet")
            assert http, f"{name}: {probe} over HTTP"
            assert http["port"] in ports, f"{name}: {probe} on an undeclared port"
            assert http["path"] in served_paths(name), f"{name}: {probe} on {http['path']}, which it does not serve"
            probes[probe] = http["path"]
        assert probes["readinessProbe"] == "/health", f"{name}: readiness is /health (503 while Postgres is down)"
        # Liveness must not depend on Postgres: restarting a pod does not bring a database back.
        assert probes["livenessProbe"] != "/health", f"{name}: liveness must not follow Postgres"
        if name in WORKERS:
            assert probes["livenessProbe"] == "/livez", name


def test_autoscaled_deployments_leave_replicas_to_the_autoscaler(builds: dict[str, list[dict]]) -> None:
    for build, objects in builds.items():
        targets = [
            (o["kind"], o["spec"]["scaleTargetRef"]) for o in objects if o["kind"] in ("HorizontalPodAutoscaler",
                                                                                       "ScaledObject")
        ]  # fmt: skip
        deployments = by_kind(objects, "Deployment")
        names = [ref["name"] for _, ref in targets]
        assert len(names) == len(set(names)), f"{build}: a Deployment has two autoscalers: {names}"
        for kind, ref in targets:
            assert ref.get("kind", "Deployment") == "Deployment" and ref["name"] in deployments, f"{build}: {ref}"
            if kind == "HorizontalPodAutoscaler":
                assert ref["apiVersion"] == "apps/v1", ref
        for name, deployment in deployments.items():
            # `kubectl apply` would reset an autoscaled count to whatever the manifest says.
            assert "replicas" not in deployment["spec"], f"{build}: {name} sets replicas"
    hpas = {h["spec"]["scaleTargetRef"]["name"]: h for h in by_kind(builds["base"], "HorizontalPodAutoscaler").values()}
    assert set(hpas) == {"gateway", "memory-api"}
    for name, hpa in hpas.items():
        assert 2 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"], name
        (metric,) = hpa["spec"]["metrics"]
        assert metric["resource"]["name"] == "cpu", "CPU utilization needs CPU requests, which every pod has"


def test_every_deployment_has_a_disruption_budget_that_selects_it(builds: dict[str, list[dict]]) -> None:
    for build, objects in builds.items():
        budgets = list(by_kind(objects, "PodDisruptionBudget").values())
        for workload in workloads(objects):
            labels = pod_template(workload)["metadata"]["labels"]
            covering = [b for b in budgets if selects(b["spec"]["selector"], labels)]
            name = f"{build}: {workload['metadata']['name']}"
            if workload["kind"] == "Deployment":
                assert len(covering) == 1, f"{name}: {len(covering)} PodDisruptionBudgets"
                # minAvailable: 1 with one replica would block every node drain.
                assert covering[0]["spec"].get("maxUnavailable") == 1, name
            else:
                assert not covering, f"{name}: a {workload['kind']} is not budgeted here"
        for budget in budgets:
            assert any(
                selects(budget["spec"]["selector"], pod_template(w)["metadata"]["labels"]) for w in workloads(objects)
            ), f"{build}: PodDisruptionBudget {budget['metadata']['name']} selects no pod"


def test_images_and_commands(objects: list[dict]) -> None:
    overridable = {rule["name"] for rule in load_kustomization(K8S / "base").get("images", [])}
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


def test_services_select_one_workload_and_reach_declared_ports(builds: dict[str, list[dict]]) -> None:
    for build, objects in builds.items():
        for name, service in by_kind(objects, "Service").items():
            selector = service["spec"].get("selector")
            assert selector, f"{build}: Service {name} has no selector"
            selected = [
                w for w in workloads(objects) if selector.items() <= pod_template(w)["metadata"]["labels"].items()
            ]
            assert [w["metadata"]["name"] for w in selected] == [name], f"{build}: Service {name} selects {selected}"
            workload = selected[0]
            assert selects(workload["spec"]["selector"], template_labels(workload)), f"{build}: {name}"
            container_ports = [p for c in pod_spec(workload)["containers"] for p in c.get("ports", [])]
            for port in service["spec"]["ports"]:
                target = port.get("targetPort", port["port"])
                hits = [p for p in container_ports if target in (p.get("name"), p["containerPort"])]
                assert hits, f"{build}: Service {name}: targetPort {target!r} matches no container port"
                if name in SERVICES:
                    assert hits[0]["containerPort"] == SERVICES[name].port, f"{name} listens on {SERVICES[name].port}"
                    assert port["port"] == SERVICES[name].port, f"Service {name} port"


def test_only_the_gateway_is_meant_to_be_exposed(builds: dict[str, list[dict]]) -> None:
    for build, objects in builds.items():
        for name, service in by_kind(objects, "Service").items():
            spec = service["spec"]
            exposure = service["metadata"]["labels"].get("memento.io/exposure")
            assert exposure == ("public" if name == EXPOSED else "internal"), f"{build}: {name}"
            if name != EXPOSED:
                assert spec.get("type", "ClusterIP") == "ClusterIP", f"{build}: {name} must stay inside the cluster"
                assert not spec.get("externalIPs") and not any("nodePort" in p for p in spec["ports"]), name
        for kind in ("Ingress", "HTTPRoute"):
            for ingress in by_kind(objects, kind).values():
                assert EXPOSED in json.dumps(ingress["spec"]), f"{kind} {ingress['metadata']['name']}"
                for internal in set(SERVICES) - {EXPOSED}:
                    assert f'"{internal}"' not in json.dumps(ingress["spec"]), f"{kind} exposes {internal}"


def test_pods_are_scraped_by_prometheus(objects: list[dict]) -> None:
    for name, deployment in by_kind(objects, "Deployment").items():
        annotations = deployment["spec"]["template"]["metadata"].get("annotations", {})
        assert annotations.get("prometheus.io/scrape") == "true", name
        assert annotations.get("prometheus.io/path") == "/metrics", name
        assert annotations.get("prometheus.io/port") == str(SERVICES[name].port), name
        assert "/metrics" in served_paths(name), name


def stores(objects: list[dict]) -> dict[str, dict[str, set[str]]]:
    """Keys of every ConfigMap and Secret, by kind and name."""
    return {
        "configMap": {n: set(o.get("data", {})) for n, o in by_kind(objects, "ConfigMap").items()},
        "secret": {
            n: set(o.get("data", {})) | set(o.get("stringData", {})) for n, o in by_kind(objects, "Secret").items()
        },
    }


def test_environment_references_resolve_and_name_real_settings(builds: dict[str, list[dict]]) -> None:
    known = settings_env_names() | NON_SETTINGS_ENV
    for build, objects in builds.items():
        keys = stores(objects)
        for workload in workloads(objects):
            ours = memento_name(workload) or workload["kind"] == "Job"
            for container in all_containers(pod_spec(workload)):
                where = f"{build}: {workload['metadata']['name']}/{container['name']}"
                names = []
                for source in container.get("envFrom", []):
                    for kind in ("configMap", "secret"):
                        ref = source.get(f"{kind}Ref")
                        if ref:
                            assert ref["name"] in keys[kind], f"{where}: envFrom {kind} {ref['name']} is missing"
                            names += keys[kind][ref["name"]]
                for var in container.get("env", []):
                    names.append(var["name"])
                    for kind in ("configMap", "secret"):
                        ref = var.get("valueFrom", {}).get(f"{kind}KeyRef")
                        if ref:
                            assert ref["key"] in keys[kind].get(ref["name"], ()), f"{where}: {var['name']} -> {ref}"
                if ours:
                    unknown = set(names) - known
                    assert not unknown, f"{where}: {sorted(unknown)} are not settings memento_shared reads"


def test_config_and_secrets_wire_the_services_together(objects: list[dict]) -> None:
    config = by_kind(objects, "ConfigMap")["memento-config"]["data"]
    assert config["MEMENTO_BIND_HOST"] == "0.0.0.0"
    for svc in SERVICES.values():
        assert config[svc.port_env] == str(svc.port)
    assert config["MEMORY_API_URL"] == f"http://memory-api:{SERVICES['memory-api'].port}"
    assert config["EMBEDDER_URL"] == f"http://embedder:{SERVICES['embedder'].port}"
    assert re.fullmatch(r"https?://[^/]+", config["MEMENTO_PUBLIC_URL"]), "the gateway's public address"
    assert config["REDIS_HOST"] and config["REDIS_PORT"].isdigit() and config["REDIS_DB"].isdigit()

    secrets = by_kind(objects, "Secret")
    service_secret = secrets["memento-secrets"]["stringData"]
    for key in ("DATABASE_URL", "REDIS_PASSWORD", "MEMENTO_ACCESS_KEY", "MEMENTO_INTERNAL_SECRET"):
        assert key in service_secret, key
    assert "REDIS_URL" not in service_secret, "Redis by parts, so KEDA's scaler reads the same values"
    assert re.match(r"postgresql://memento_app:", service_secret["DATABASE_URL"]), "services log in as memento_app"
    for value in [*service_secret.values(), *secrets["memento-migrate-secrets"]["stringData"].values()]:
        assert value == "" or "REPLACE_ME" in value, "secret.example.yaml holds placeholders only"


def test_the_owner_dsn_reaches_only_the_migration_job(builds: dict[str, list[dict]]) -> None:
    for build, objects in builds.items():
        owner_secrets = {n for n, keys in stores(objects)["secret"].items() if "MIGRATION_DATABASE_URL" in keys}
        assert owner_secrets == {"memento-migrate-secrets"}, f"{build}: {owner_secrets}"
        for workload in workloads(objects):
            refs = {
                ref.get("name")
                for c in all_containers(pod_spec(workload))
                for ref in [*(s.get("secretRef", {}) for s in c.get("envFrom", [])),
                            *(v.get("valueFrom", {}).get("secretKeyRef", {}) for v in c.get("env", []))]
            }  # fmt: skip
            if "memento-migrate-secrets" in refs:
                assert workload["kind"] == "Job", f"{build}: {workload['metadata']['name']} gets the owner's DSN"
