"""Offline checks of deploy/k8s/components and overlays/trial: what each component promises, checked on the
builds of conftest.py.

- every build equals `kubectl kustomize` of the same folder (where kubectl is installed);
- keda-queue-autoscaling: one ScaledObject per worker, on the arq queue that worker really consumes, reading
  Redis from the same ConfigMap and Secret keys as the services;
- network-policies: evaluated here as Kubernetes would, pod by pod: who reaches Postgres, Redis, memory-api,
  the embedder, and what is open to the outside;
- monitoring: the PodMonitor finds every service's metrics port, the PrometheusRule equals alerts.yaml;
- in-cluster-postgres / -redis and overlays/trial: the generated secrets agree with each other and with the
  in-cluster servers, and make-secrets.sh never mixes old and new passwords.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from memento_shared.events import CONSUMERS, QUEUES, queue_key
from tests.deploy.common import K8S, SERVICES, WORKERS, parse_quantity
from tests.deploy.kustomize import by_kind, pod_spec, pod_template, selects, workloads

Obj = dict[str, Any]


def normalised(objects: list[Obj]) -> list[Obj]:
    """Order-free, and Secret data without the line breaks kubectl puts into long base64 values."""
    out = []
    for obj in objects:
        obj = dict(obj)
        if obj["kind"] == "Secret" and "data" in obj:
            obj["data"] = {k: v.replace("\n", "") for k, v in obj["data"].items()}
        out.append(obj)
    return sorted(out, key=lambda o: (o["kind"], o["metadata"]["name"]))


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="waits for kubectl; the in-test kustomize build still runs")
def test_in_test_builds_match_kubectl_kustomize(build_dirs: dict[str, Path], builds: dict[str, list[Obj]]) -> None:
    running = {
        name: subprocess.Popen(["kubectl", "kustomize", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for name, folder in build_dirs.items()
    }
    for name, process in running.items():
        stdout, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, f"{name}: {stderr.decode()}"
        theirs = [d for d in yaml.safe_load_all(stdout) if d]
        assert normalised(builds[name]) == normalised(theirs), f"{name}: the in-test build differs from kustomize"


def decoded(secret: Obj) -> dict[str, str]:
    values = dict(secret.get("stringData", {}))
    values |= {k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()}
    return values


# ----------------------------------------------------------------------------------------------------------------
# keda-queue-autoscaling
# ----------------------------------------------------------------------------------------------------------------


def test_every_worker_scales_on_the_queue_it_consumes(builds: dict[str, list[Obj]]) -> None:
    objects = builds["with-keda-queue-autoscaling"]
    scaled = by_kind(objects, "ScaledObject")
    deployments = by_kind(objects, "Deployment")
    config = by_kind(objects, "ConfigMap")["memento-config"]["data"]
    assert set(QUEUES) == set(WORKERS), "one worker per arq queue"
    assert {c for consumers in CONSUMERS.values() for c in consumers} <= set(QUEUES)
    targets = {s["spec"]["scaleTargetRef"]["name"]: s for s in scaled.values()}
    assert set(targets) == set(WORKERS), "a ScaledObject per worker, none for the gateway or memory-api"
    for worker, obj in targets.items():
        spec = obj["spec"]
        assert spec["scaleTargetRef"].get("kind", "Deployment") == "Deployment" and worker in deployments
        # The CRD's CEL rule, which a JSON-schema validator does not run.
        assert spec.get("minReplicaCount", 0) <= spec.get("maxReplicaCount", 100), worker
        assert spec["minReplicaCount"] >= 1, f"{worker}: the embedder answers queries, the consolidator runs cron"
        (redis,) = [t for t in spec["triggers"] if t["type"] == "redis"]
        # An arq queue is a sorted set; KEDA's redis scaler counts it with ZCARD (see the component's notes).
        assert redis["metadata"]["listName"] == queue_key(worker), f"{worker} consumes {queue_key(worker)}"
        assert int(redis["metadata"]["listLength"]) >= 1
        assert redis["metadata"].get("databaseIndex", "0") == config["REDIS_DB"], "the services' Redis database"
        assert not {"address", "host", "port", "password"} & set(redis["metadata"]), "credentials come from auth"
        for trigger in spec["triggers"]:
            if trigger["type"] in ("cpu", "memory"):
                resource = trigger["type"]
                assert trigger.get("metricType") == "Utilization", worker
                (container,) = pod_spec(deployments[worker])["containers"]
                assert parse_quantity(container["resources"]["requests"][resource]) > 0, f"{worker}: {resource}"


def test_keda_reads_redis_from_the_keys_the_services_read(builds: dict[str, list[Obj]]) -> None:
    objects = builds["with-keda-queue-autoscaling"]
    auths = by_kind(objects, "TriggerAuthentication")
    stores = {
        "configMapTargetRef": {n: o["data"] for n, o in by_kind(objects, "ConfigMap").items()},
        "secretTargetRef": {n: decoded(o) for n, o in by_kind(objects, "Secret").items()},
    }
    for scaled in by_kind(objects, "ScaledObject").values():
        for trigger in scaled["spec"]["triggers"]:
            if trigger["type"] != "redis":
                continue
            auth = auths[trigger["authenticationRef"]["name"]]
            params = {}
            for field, store in stores.items():
                for ref in auth["spec"].get(field, []):
                    assert ref["key"] in store[ref["name"]], f"{field} {ref} does not resolve"
                    params[ref["parameter"]] = (ref["name"], ref["key"])
            assert params == {
                "host": ("memento-config", "REDIS_HOST"),
                "port": ("memento-config", "REDIS_PORT"),
                "password": ("memento-secrets", "REDIS_PASSWORD"),
            }
    # The services read the same keys: envFrom of memento-config and memento-secrets, no REDIS_URL to override.
    for name in WORKERS:
        (container,) = pod_spec(by_kind(objects, "Deployment")[name])["containers"]
        sources = {s.get("configMapRef", s.get("secretRef", {})).get("name") for s in container["envFrom"]}
        assert {"memento-config", "memento-secrets"} <= sources, name


# ----------------------------------------------------------------------------------------------------------------
# network-policies: a small evaluator of the NetworkPolicy semantics
# ----------------------------------------------------------------------------------------------------------------


def pods(objects: list[Obj]) -> dict[str, Obj]:
    return {w["metadata"]["name"]: w for w in workloads(objects)}


def labels_of(workload: Obj) -> dict[str, str]:
    return pod_template(workload)["metadata"]["labels"]


def named_ports(workload: Obj) -> dict[str, int]:
    return {
        p["name"]: p["containerPort"]
        for c in pod_spec(workload)["containers"]
        for p in c.get("ports", [])
        if "name" in p
    }


def port_matches(rule_ports: list[Obj] | None, port: int, destination: Obj | None) -> bool:
    if not rule_ports:
        return True  # no ports: every port
    for entry in rule_ports:
        if entry.get("protocol", "TCP") != "TCP":
            continue
        wanted = entry.get("port")
        if wanted is None or wanted == port:
            return True
        if isinstance(wanted, str) and destination is not None and named_ports(destination).get(wanted) == port:
            return True
    return False


def peer_matches(peers: list[Obj] | None, pod: Obj | None, namespace_labels: dict[str, str]) -> bool:
    """`pod` None: something outside the namespace (another namespace's pod when namespace_labels says which,
    else outside the cluster)."""
    if peers is None:
        return True  # no from/to: everyone
    for peer in peers:
        if "ipBlock" in peer:
            if pod is None and not namespace_labels:
                return True
            continue
        if "namespaceSelector" in peer:
            in_this_namespace = pod is not None
            labels = {"kubernetes.io/metadata.name": "memento"} if in_this_namespace else namespace_labels
            if not namespace_labels and not in_this_namespace:
                continue
            if not selects(peer["namespaceSelector"], labels):
                continue
            if "podSelector" in peer and (pod is None or not selects(peer["podSelector"], labels_of(pod))):
                continue
            return True
        elif pod is not None and selects(peer.get("podSelector"), labels_of(pod)):
            return True
    return False


def policies_for(objects: list[Obj], pod: Obj, direction: str) -> list[Obj]:
    return [
        p
        for p in by_kind(objects, "NetworkPolicy").values()
        if direction in p["spec"].get("policyTypes", ["Ingress"]) and selects(p["spec"]["podSelector"], labels_of(pod))
    ]


def egress_allowed(objects: list[Obj], source: Obj, port: int, destination: Obj | None) -> bool:
    """May `source` open a TCP connection to `destination` (a pod in the namespace, or None: outside it)?"""
    policies = policies_for(objects, source, "Egress")
    if not policies:
        return True
    return any(
        port_matches(rule.get("ports"), port, destination) and peer_matches(rule.get("to"), destination, {})
        for policy in policies
        for rule in policy["spec"].get("egress", [])
    )


def ingress_allowed(
    objects: list[Obj], destination: Obj, port: int, source: Obj | None, namespace_labels: dict[str, str] | None = None
) -> bool:
    policies = policies_for(objects, destination, "Ingress")
    if not policies:
        return True
    return any(
        port_matches(rule.get("ports"), port, destination)
        and peer_matches(rule.get("from"), source, namespace_labels or {})
        for policy in policies
        for rule in policy["spec"].get("ingress", [])
    )


def reaches(objects: list[Obj], source: str, destination: str, port: int) -> bool:
    everything = pods(objects)
    src, dst = everything[source], everything[destination]
    return egress_allowed(objects, src, port, dst) and ingress_allowed(objects, dst, port, src)


POSTGRES_CLIENTS = {"memory-api", "embedder", "evaluator", "consolidator", "memento-migrate"}
REDIS_CLIENTS = {"gateway", "memory-api", "embedder", "evaluator", "consolidator"}
MEMENTO_PODS = [*SERVICES, "memento-migrate"]


def test_network_policies_select_existing_pods(builds: dict[str, list[Obj]]) -> None:
    for build in ("with-network-policies", "all-components", "trial"):
        objects = builds[build]
        all_labels = [labels_of(w) for w in workloads(objects)]
        for name, policy in by_kind(objects, "NetworkPolicy").items():
            spec = policy["spec"]
            assert any(selects(spec["podSelector"], labels) for labels in all_labels), f"{build}: {name} selects no pod"
            for rule in [*spec.get("ingress", []), *spec.get("egress", [])]:
                for peer in rule.get("from", rule.get("to", [])):
                    if "podSelector" in peer and "namespaceSelector" not in peer:
                        assert any(selects(peer["podSelector"], labels) for labels in all_labels), f"{build}: {name}"


def test_the_network_is_denied_by_default_and_open_only_where_needed(builds: dict[str, list[Obj]]) -> None:
    objects = builds["with-network-policies"]
    everything = pods(objects)
    deny = by_kind(objects, "NetworkPolicy")["default-deny-all"]["spec"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"}
    assert not deny.get("ingress") and not deny.get("egress")
    # Postgres and Redis are outside the namespace in the base: egress by port.
    for name in MEMENTO_PODS:
        pod = everything[name]
        assert egress_allowed(objects, pod, 5432, None) == (name in POSTGRES_CLIENTS), f"{name} -> Postgres"
        assert egress_allowed(objects, pod, 6379, None) == (name in REDIS_CLIENTS), f"{name} -> Redis"
        assert egress_allowed(objects, pod, 53, None), f"{name}: DNS"
    # Only the gateway takes traffic from outside the cluster; memory-api only from the gateway, the embedder's
    # HTTP API only from memory-api, nobody calls the other workers.
    callers = {"gateway": set(), "memory-api": {"gateway"}, "embedder": {"memory-api"}, "evaluator": set(),
               "consolidator": set()}  # fmt: skip
    for name, allowed in callers.items():
        port = SERVICES[name].port
        assert ingress_allowed(objects, everything[name], port, None) == (name == "gateway"), f"outside -> {name}"
        for source in MEMENTO_PODS:
            if source != name:
                assert reaches(objects, source, name, port) == (source in allowed), f"{source} -> {name}:{port}"
    # Prometheus (namespace `monitoring`) scrapes every service; other namespaces reach nothing but the gateway.
    for name in SERVICES:
        port, pod = SERVICES[name].port, everything[name]
        monitoring = {"kubernetes.io/metadata.name": "monitoring"}
        other = {"kubernetes.io/metadata.name": "default"}
        assert ingress_allowed(objects, pod, port, None, monitoring), f"Prometheus -> {name}"
        assert ingress_allowed(objects, pod, port, None, other) == (name == "gateway"), f"default ns -> {name}"
        assert not ingress_allowed(objects, pod, 5432, None, monitoring), name


def test_in_cluster_databases_accept_only_their_clients(builds: dict[str, list[Obj]]) -> None:
    for build in ("with-in-cluster-postgres", "with-in-cluster-redis", "all-components", "trial"):
        objects = builds[build]
        everything = pods(objects)
        for server, port, clients in (("postgres", 5432, POSTGRES_CLIENTS), ("redis", 6379, REDIS_CLIENTS)):
            if server not in everything:
                continue
            for name in MEMENTO_PODS:
                assert reaches(objects, name, server, port) == (name in clients), f"{build}: {name} -> {server}"
            assert not ingress_allowed(objects, everything[server], port, None), f"{build}: outside -> {server}"
            for out in (443, 4318, 5432, 6379):
                assert not egress_allowed(objects, everything[server], out, None), f"{build}: {server} -> :{out}"
    redis = pods(builds["all-components"])["redis"]
    assert ingress_allowed(builds["all-components"], redis, 6379, None, {"kubernetes.io/metadata.name": "keda"})


def test_the_evaluator_is_not_vacuous(builds: dict[str, list[Obj]]) -> None:
    objects = builds["with-network-policies"]
    assert reaches(builds["base"], "gateway", "embedder", SERVICES["embedder"].port), "no policy: all open"
    assert not reaches(objects, "gateway", "embedder", SERVICES["embedder"].port)
    assert not egress_allowed(objects, pods(objects)["gateway"], 443, None)


# ----------------------------------------------------------------------------------------------------------------
# monitoring
# ----------------------------------------------------------------------------------------------------------------


def test_the_pod_monitor_scrapes_every_service(builds: dict[str, list[Obj]]) -> None:
    objects = builds["with-monitoring"]
    (monitor,) = by_kind(objects, "PodMonitor").values()
    scraped = [w for w in workloads(objects) if selects(monitor["spec"]["selector"], labels_of(w))]
    assert sorted(w["metadata"]["name"] for w in scraped) == sorted(SERVICES)
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    for workload in scraped:
        assert named_ports(workload)[endpoint["port"]] == SERVICES[workload["metadata"]["name"]].port


def test_the_prometheus_rule_carries_alerts_yaml(builds: dict[str, list[Obj]]) -> None:
    (rule,) = by_kind(builds["with-monitoring"], "PrometheusRule").values()
    plain = yaml.safe_load((K8S / "components" / "monitoring" / "alerts.yaml").read_text())
    assert rule["spec"] == plain, "prometheus-rule.yaml and alerts.yaml have drifted apart"


# ----------------------------------------------------------------------------------------------------------------
# in-cluster databases and the trial overlay
# ----------------------------------------------------------------------------------------------------------------


def test_the_trial_overlay_wires_one_consistent_set_of_credentials(builds: dict[str, list[Obj]]) -> None:
    objects = builds["trial"]
    secrets = {n: decoded(o) for n, o in by_kind(objects, "Secret").items()}
    services = by_kind(objects, "Service")
    config = by_kind(objects, "ConfigMap")["memento-config"]["data"]
    app, owner, postgres = secrets["memento-secrets"], secrets["memento-migrate-secrets"], secrets["memento-postgres"]
    for values in secrets.values():
        assert not any("REPLACE_ME" in v for v in values.values()), "make-secrets.sh fills in every value"
    service_dsn, owner_dsn = urlsplit(app["DATABASE_URL"]), urlsplit(owner["MIGRATION_DATABASE_URL"])
    for dsn in (service_dsn, owner_dsn):
        assert dsn.hostname == "postgres" and dsn.hostname in services and dsn.port == 5432
        assert dsn.path == f"/{postgres['POSTGRES_DB']}"
    assert (owner_dsn.username, owner_dsn.password) == (postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"])
    assert service_dsn.username == "memento_app" and service_dsn.password != owner_dsn.password
    assert config["REDIS_HOST"] == "redis" and "redis" in services
    assert urlsplit(config["MEMENTO_PUBLIC_URL"]).hostname == "127.0.0.1", "reached through kubectl port-forward"
    redis = by_kind(objects, "StatefulSet")["redis"]
    (container,) = pod_spec(redis)["containers"]
    refs = {v["name"]: v["valueFrom"]["secretKeyRef"] for v in container["env"]}
    assert refs["REDIS_PASSWORD"] == {"name": "memento-secrets", "key": "REDIS_PASSWORD"}, "one Redis password"
    assert "$(REDIS_PASSWORD)" in container["args"] and "noeviction" in container["args"]
    keys = [len(app[k]) for k in ("MEMENTO_ACCESS_KEY", "MEMENTO_INTERNAL_SECRET", "REDIS_PASSWORD")]
    assert min(keys) >= 32, "random values of 24 bytes, hex-encoded"


def test_make_secrets_keeps_complete_sets_and_refuses_partial_ones(tmp_path: Path) -> None:
    trial = tmp_path / "trial"
    shutil.copytree(K8S / "overlays" / "trial", trial, ignore=shutil.ignore_patterns("*.env"))

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", str(trial / "make-secrets.sh")], capture_output=True, text=True, timeout=30)

    assert run().returncode == 0
    first = {p.name: p.read_text() for p in trial.glob("*.env")}
    assert set(first) == {"memento.env", "migrate.env", "postgres.env"}
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in trial.glob("*.env")), "owner-only files"
    assert run().returncode == 0 and {p.name: p.read_text() for p in trial.glob("*.env")} == first, "kept"
    (trial / "memento.env").unlink()
    done = run()
    assert done.returncode != 0 and "delete them all" in done.stderr, "never a new password beside an old one"
    assert (K8S / "overlays" / "trial" / ".gitignore").read_text().count("*.env") == 1


def test_in_cluster_servers_use_the_official_images(builds: dict[str, list[Obj]]) -> None:
    statefulsets = by_kind(builds["all-components"], "StatefulSet")
    assert set(statefulsets) == {"postgres", "redis"}
    images = {name: pod_spec(s)["containers"][0]["image"] for name, s in statefulsets.items()}
    assert images == {"postgres": "pgvector/pgvector:pg18", "redis": "redis:7-alpine"}, "as in docker-compose.yml"
    for statefulset in statefulsets.values():
        (claim,) = statefulset["spec"]["volumeClaimTemplates"]
        (container,) = pod_spec(statefulset)["containers"]
        mounts = {m["name"] for m in container["volumeMounts"]}
        assert claim["metadata"]["name"] in mounts, "the data lives on the claimed volume"
