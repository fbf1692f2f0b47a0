"""Offline checks of what operators read: the suggested alerts and docs/operations.md.

Each alert expression is parsed by a real PromQL parser (`promql-parser`, the Rust parser GreptimeDB uses, with
Python bindings), then every metric it selects must be one shared/memento_shared/telemetry/metrics.py defines,
with labels that metric has, and each function must suit the metric's type (rate() on counters, deriv() on
gauges, histogram_quantile() on buckets). The docs' metric table must list exactly the metrics the code defines,
with their types and labels; the alerts, paths, commands and variables the docs name must exist.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import promql_parser
import pytest
import yaml

from memento_shared.errors import ErrorCode
from tests.deploy.common import (
    DOCKERFILE,
    ENV_EXAMPLE,
    K8S,
    NON_SETTINGS_ENV,
    OPERATIONS,
    ROOT,
    Metric,
    defined_metrics,
    settings_env_names,
)

ALERTS = K8S / "components" / "monitoring" / "alerts.yaml"
SEVERITIES = {"info", "warning", "critical"}
COUNTER_FUNCTIONS = {"rate", "irate", "increase", "resets"}
GAUGE_FUNCTIONS = {"deriv", "delta", "idelta", "predict_linear"}
# Series every Prometheus has about its targets, with the labels a scrape config may give them.
BUILTIN_SERIES = {"up", "scrape_duration_seconds"}
# Capitalised words in backticks that are no variable (a PostgreSQL role attribute, Redis commands, a word of
# .env.example), and memento_* names that are no metric (the services' PostgreSQL role).
NOT_VARIABLES = {"BYPASSRLS", "LEAKPROOF", "REQUIRED", "ZCARD", "LLEN"}
NOT_METRICS = {"memento_app"}


@cache
def series_index() -> dict[str, Metric]:
    """Exposed sample name (memento_x_total, memento_y_seconds_bucket, ...) -> the metric."""
    return {series: metric for metric in defined_metrics().values() for series in metric.series}


def nodes(expr: promql_parser.Expr) -> list[promql_parser.Expr]:
    found: list[promql_parser.Expr] = []
    promql_parser.walk(expr, lambda node: found.append(node) or True)
    return found


def selectors_under(expr: promql_parser.Expr) -> list[promql_parser.VectorSelector]:
    return [n for n in nodes(expr) if isinstance(n, promql_parser.VectorSelector)]


def expression_problems(expr_text: str) -> tuple[list[str], set[str]]:
    """What is wrong with an expression, and the labels its result can carry."""
    problems: list[str] = []
    try:
        expr = promql_parser.parse(expr_text)
    except Exception as exc:  # the parser raises its own error types
        return [f"does not parse: {exc}"], set()
    index = series_index()
    labels: set[str] = set()
    for selector in selectors_under(expr):
        if selector.name in BUILTIN_SERIES:
            continue
        metric = index.get(selector.name)
        if metric is None:
            problems.append(f"{selector.name}: no such metric in metrics.py")
            continue
        known = set(metric.labels) | ({"le"} if selector.name.endswith("_bucket") else set())
        labels |= known
        for matcher in selector.matchers.matchers:
            if matcher.name not in known | {"__name__"}:
                problems.append(f"{selector.name}{{{matcher.name}}}: {metric.name} has labels {sorted(known)}")
    grouped: list[set[str]] = []
    for node in nodes(expr):
        if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            by = set(node.modifier.labels)
            if node.modifier.type == promql_parser.AggModifierType.By:
                available = {label for s in selectors_under(node.expr) for label in _labels_of(s, index)}
                if not by <= available:
                    problems.append(f"by ({', '.join(sorted(by))}): only {sorted(available)} exist there")
                grouped.append(by)
        if isinstance(node, promql_parser.Call):
            name = node.func.name
            inner = [s.name for a in node.args for s in selectors_under(a) if s.name in index]
            if name in COUNTER_FUNCTIONS:
                for series in inner:
                    metric = index[series]
                    if metric.kind not in ("counter", "histogram"):
                        problems.append(f"{name}({series}): {metric.name} is a {metric.kind}, not a counter")
            if name in GAUGE_FUNCTIONS:
                for series in inner:
                    if index[series].kind != "gauge":
                        problems.append(f"{name}({series}): {series} is no gauge; use rate()")
            if name == "histogram_quantile" and not all(s.endswith("_bucket") for s in inner):
                problems.append(f"histogram_quantile over {inner}: needs _bucket series")
    if grouped:
        labels = set.intersection(*grouped) if len(grouped) > 1 else grouped[0]
    return problems, labels


def _labels_of(selector: promql_parser.VectorSelector, index: dict[str, Metric]) -> set[str]:
    metric = index.get(selector.name)
    if metric is None:
        return set()
    return set(metric.labels) | ({"le"} if selector.name.endswith("_bucket") else set())


@pytest.fixture(scope="module")
def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_every_alert_expression_parses_and_uses_real_metrics(rules: list[dict[str, Any]]) -> None:
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names)), "alert names are unique"
    errors = []
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        problems, labels = expression_problems(rule["expr"])
        errors += [f"{rule['alert']}: {p}" for p in problems]
        if "for" in rule:
            promql_parser.parse_duration(rule["for"])
        assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
        assert rule["annotations"].get("summary"), f"{rule['alert']}: a summary"
        for text in rule["annotations"].values():
            for label in re.findall(r"\$labels\.([a-zA-Z_]+)", text):
                if label not in labels:
                    errors.append(f"{rule['alert']}: annotation uses $labels.{label}; the result has {sorted(labels)}")
    assert not errors, "\n".join(errors)


def test_the_alerts_cover_what_operators_asked_for(rules: list[dict[str, Any]]) -> None:
    text = " ".join(r["expr"] for r in rules)
    for needle in ("deriv(memento_outbox_backlog_total", "memento_dead_letters_total", "memento_embedder_errors_total",
                   "histogram_quantile(0.95, sum by (le, tool) (rate(memento_tool_latency_seconds_bucket"):  # fmt: skip
        assert needle in text, f"an alert on {needle}"


def test_the_expression_check_is_not_vacuous() -> None:
    assert expression_problems("rate(memento_no_such_metric_total[5m])")[0]
    assert expression_problems("memento_tool_calls_total{worker='x'}")[0], "a label the metric lacks"
    assert expression_problems("rate(memento_outbox_backlog_total[5m])")[0], "rate() of a gauge"
    assert expression_problems("deriv(memento_tool_calls_total[5m])")[0], "deriv() of a counter"
    assert expression_problems("histogram_quantile(0.9, rate(memento_tool_latency_seconds_count[5m]))")[0]
    assert expression_problems("sum by (tier) (rate(memento_tool_calls_total[5m]))")[0], "grouping by a stranger"
    assert expression_problems("sum by (tool (memento_tool_calls_total)")[0], "a syntax error"
    assert not expression_problems("sum by (tool) (rate(memento_tool_calls_total{status='ok'}[5m]))")[0]


# ----------------------------------------------------------------------------------------------------------------
# docs/operations.md
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def docs() -> str:
    return OPERATIONS.read_text()


def table_rows(docs: str, first_header: str) -> list[list[str]]:
    """The body rows of the Markdown table whose first header cell is `first_header`."""
    lines = docs.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"\|\s*{re.escape(first_header)}\s*\|", line))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_the_metrics_table_lists_every_metric_with_its_type_and_labels(docs: str) -> None:
    metrics = defined_metrics()
    documented = {}
    for name_cell, kind, labels, exposed_by, meaning in table_rows(docs, "metric"):
        name = name_cell.strip("`")
        assert name not in documented, f"{name} documented twice"
        documented[name] = (kind, tuple(re.findall(r"`([a-z_]+)`", labels)))
        assert exposed_by and meaning, name
    missing, unknown = set(metrics) - set(documented), set(documented) - set(metrics)
    assert not missing, f"docs/operations.md, Metrics: add a row for {sorted(missing)}"
    assert not unknown, f"docs/operations.md documents {sorted(unknown)}, which metrics.py does not define"
    for name, metric in metrics.items():
        assert documented[name] == (metric.kind, metric.labels), f"{name}: the code says {metric.kind} {metric.labels}"


def test_every_metric_the_docs_name_exists(docs: str) -> None:
    series = {s for m in defined_metrics().values() for s in m.series} | set(defined_metrics())
    for name in set(re.findall(r"\bmemento_[a-z_]+", docs)) - NOT_METRICS:
        assert name in series, f"docs/operations.md names {name}, which no service exposes"
    for block in re.findall(r"```promql\n(.*?)```", docs, re.S):
        for line in block.strip().splitlines():
            expr = line.split("#")[0].strip()
            problems, _ = expression_problems(expr)
            assert not problems, f"{expr}: {problems}"


def test_the_alerts_table_matches_alerts_yaml(docs: str, rules: list[dict[str, Any]]) -> None:
    documented = [row[0].strip("`") for row in table_rows(docs, "alert")]
    assert sorted(documented) == sorted(r["alert"] for r in rules)


def test_paths_commands_and_variables_the_docs_name_exist(docs: str) -> None:
    for path in set(re.findall(r"`((?:deploy|docs|services|shared)/[\w./<>-]+)`", docs)):
        if "<" not in path:
            assert (ROOT / path).exists(), f"docs/operations.md names {path}, which does not exist"
    for path in re.findall(r"^  ((?:base|components|overlays)/[\w/-]+)/", docs, re.M):
        assert (K8S / path).is_dir(), f"the layout in docs/operations.md lists {path}"
    env_example = {line.split("=", 1)[0] for line in ENV_EXAMPLE.read_text().splitlines() if re.match(r"[A-Z]", line)}
    error_codes = {code.value for code in ErrorCode}  # tool statuses in memento_tool_calls_total
    build_args = set(re.findall(r"^ARG (\w+)", (ROOT / DOCKERFILE).read_text(), re.M))  # the Dockerfile's SERVICE
    known = settings_env_names() | NON_SETTINGS_ENV | env_example | error_codes | NOT_VARIABLES | build_args
    for name in set(re.findall(r"`([A-Z][A-Z0-9_]{3,})`", docs)):
        assert name in known, f"docs/operations.md names `{name}`, which nothing reads"
    cli = (ROOT / "services" / "memory-api" / "memento_memory_api" / "cli" / "dead_letters.py").read_text()
    for action in set(re.findall(r"memento-admin dead-letters (\w+)", docs)):
        assert f'add_parser("{action}"' in cli, f"memento-admin dead-letters {action} does not exist"
    scripts = (ROOT / "services" / "memory-api" / "pyproject.toml").read_text()
    assert "memento-admin =" in scripts, "the docs run memento-admin from the memory-api image"


def test_the_scaling_table_matches_the_scaled_objects(docs: str, builds: dict[str, list[dict]]) -> None:
    scaled = {
        o["spec"]["scaleTargetRef"]["name"]: o["spec"]
        for o in builds["with-keda-queue-autoscaling"]
        if o["kind"] == "ScaledObject"
    }
    rows = table_rows(docs, "worker")
    assert sorted(row[0] for row in rows) == sorted(scaled)
    for worker, length, replicas, _ in rows:
        spec = scaled[worker]
        (redis,) = [t for t in spec["triggers"] if t["type"] == "redis"]
        assert length == redis["metadata"]["listLength"], worker
        assert replicas == f"{spec['minReplicaCount']}–{spec['maxReplicaCount']}", worker
    hpas = {
        o["spec"]["scaleTargetRef"]["name"]: o["spec"] for o in builds["base"] if o["kind"] == "HorizontalPodAutoscaler"
    }
    runs = {row[0]: row[4] for row in table_rows(docs, "service")}
    for name, spec in hpas.items():
        assert f"HPA on CPU ({spec['minReplicas']}–{spec['maxReplicas']})" == runs[name], name
    for name, spec in scaled.items():
        assert f"({spec['minReplicaCount']}–{spec['maxReplicaCount']})" in runs[name], name
