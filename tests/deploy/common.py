"""What the deployment tests share: the repository's paths, the five services, and the settings contract."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERIGNORE = ROOT / ".dockerignore"
DOCKERFILE = "Dockerfile"
OPERATIONS = ROOT / "docs" / "operations.md"
METRICS_MODULE = ROOT / "shared" / "memento_shared" / "telemetry" / "metrics.py"
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
        """The one Dockerfile every image is built from (`--build-arg SERVICE=<name>`)."""
        return DOCKERFILE

    @property
    def worker(self) -> bool:
        return self.name in WORKERS


WORKERS = ("embedder", "evaluator", "consolidator")
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
NON_SETTINGS_ENV = {"OTEL_SERVICE_NAME", "OTEL_TRACES_SAMPLER", "OMP_NUM_THREADS", "OMP_WAIT_POLICY"}


@cache
def settings_env_names() -> frozenset[str]:
    """Every environment variable a service reads (each service's settings class, tests.fixtures.settings)."""
    from tests.fixtures.settings import Settings

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


@dataclass(frozen=True)
class Metric:
    """A Prometheus metric as metrics.py defines it."""

    name: str  # as exposed: counters end in _total
    kind: str  # counter, gauge, histogram
    labels: tuple[str, ...]

    @property
    def series(self) -> frozenset[str]:
        """The sample names a scrape shows for it."""
        if self.kind == "histogram":
            return frozenset(f"{self.name}_{suffix}" for suffix in ("bucket", "sum", "count"))
        return frozenset({self.name})


@cache
def defined_metrics() -> dict[str, Metric]:
    """Every metric metrics.py defines, read from its source (a module imported by tests elsewhere might have
    registered more in the same registry)."""
    kinds = {"Counter": "counter", "Gauge": "gauge", "Histogram": "histogram", "Summary": "summary"}
    metrics = {}
    for node in ast.walk(ast.parse(METRICS_MODULE.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in kinds:
            name = ast.literal_eval(node.args[0])
            labels = ast.literal_eval(node.args[2]) if len(node.args) > 2 else ()
            for keyword in node.keywords:
                if keyword.arg == "labelnames":
                    labels = ast.literal_eval(keyword.value)
            kind = kinds[node.func.id]
            assert kind != "summary", f"{name}: summaries are not aggregatable across replicas; use a histogram"
            if kind == "counter" and not name.endswith("_total"):
                name += "_total"  # prometheus_client exposes counters with the suffix
            metrics[name] = Metric(name, kind, tuple(labels))
    assert metrics, f"no metric found in {METRICS_MODULE}"
    return metrics
