"""Realistic, deterministic fragment text for benchmarks: what coding agents actually store (incidents, decisions,
preferences, procedures) across topics, with service names, versions and error codes as identifiers."""

from __future__ import annotations

import random

TOPICS = [
    "database",
    "deployment",
    "security",
    "frontend",
    "billing",
    "observability",
    "ci",
    "networking",
    "auth",
    "search",
    "storage",
    "mobile",
]
SERVICES = [
    "orders-api",
    "billing-worker",
    "auth-gateway",
    "search-indexer",
    "web-frontend",
    "notifier",
    "ledger",
    "inventory",
    "profile-service",
    "media-resizer",
    "scheduler",
    "reporting",
]
TECH = [
    "Postgres",
    "Redis",
    "Kafka",
    "nginx",
    "Kubernetes",
    "Terraform",
    "React",
    "Django",
    "FastAPI",
    "Go",
    "Elasticsearch",
    "S3",
    "gRPC",
    "OpenTelemetry",
    "Prometheus",
    "Vault",
]
ERRORS = [
    "ECONNRESET",
    "OOMKilled",
    "deadlock detected",
    "TLS handshake timeout",
    "429 Too Many Requests",
    "ERR_CONN_REFUSED",
    "too many open files",
    "certificate expired",
    "disk quota exceeded",
    "segfault",
]
PEOPLE = ["Mina", "Jae", "Priya", "Tomas", "Lena", "Omar", "Yuki", "Sam"]

TEMPLATES = {
    "error": [
        "{service} failed with {error} after the {tech} upgrade to {version}; rolling back fixed it",
        "Intermittent {error} in {service} when {tech} connections exceed {n}; raise the pool limit",
        "{service} crashed with {error} during the nightly batch; root cause was a missing index on {table}",
    ],
    "decision": [
        "We chose {tech} over {tech2} for {service} because of operational simplicity",
        "{person} decided {service} moves to {tech} {version} next sprint; the old path stays read-only",
        "Keep {service} on a single region until {tech} replication lag is under {n} ms",
    ],
    "preference": [
        "{person} prefers small pull requests with tests for {service}",
        "Always run {tech} migrations in a separate deploy step for {service}",
        "Use structured JSON logs in {service}; never log request bodies",
    ],
    "procedure": [
        "To rotate {tech} credentials for {service}: create the new secret, deploy, then revoke the old one",
        "Restore {service} from backup: stop writers, restore the {tech} snapshot, replay the last {n} minutes",
        "Before releasing {service}, check the {tech} dashboards and the error budget for the last {n} hours",
    ],
    "fact": [
        "{service} listens on port {port} and talks to {tech} through {tech2}",
        "The {table} table in {service} holds about {n} thousand rows and grows weekly",
        "{service} owner is {person}; on-call rotation changes every {n} days",
    ],
    "relation": [
        "{service} depends on {service2} for {tech} access",
        "{service} publishes events consumed by {service2}",
    ],
}
TYPE_WEIGHTS = {"fact": 4, "error": 3, "decision": 2, "procedure": 2, "preference": 1, "relation": 1}

QUERIES = [
    "why did {service} crash",
    "how do we rotate {tech} secrets",
    "which database does {service} use",
    "who owns {service}",
    "what went wrong after the {tech} upgrade",
    "how to restore {service} from backup",
    "rules for pull requests",
    "what port does {service} use",
    "connection pool errors in {service}",
    "why was {tech} chosen",
    "steps before a release",
    "{error} fixes",
]


def _fill(template: str, rng: random.Random) -> str:
    service, service2 = rng.sample(SERVICES, 2)
    tech, tech2 = rng.sample(TECH, 2)
    return template.format(
        service=service,
        service2=service2,
        tech=tech,
        tech2=tech2,
        error=rng.choice(ERRORS),
        person=rng.choice(PEOPLE),
        version=f"{rng.randint(1, 17)}.{rng.randint(0, 9)}",
        n=rng.randint(2, 900),
        port=rng.randint(3000, 9999),
        table=rng.choice(["orders", "events", "users", "invoices", "sessions"]),
    )


def fragments(n: int, seed: int = 1, tag: str = "") -> list[dict]:
    """n fragments: content, topic, type. Each carries its template index so vectors can be clustered cheaply, and
    its number (after `tag`) in the content, so no two are the same text."""
    rng = random.Random(seed)
    types = [t for t, w in TYPE_WEIGHTS.items() for _ in range(w)]
    out = []
    for i in range(n):
        fragment_type = rng.choice(types)
        t_index = rng.randrange(len(TEMPLATES[fragment_type]))
        content = _fill(TEMPLATES[fragment_type][t_index], rng) + f" (#{tag}{i})"
        out.append(
            {
                "content": content,
                "topic": rng.choice(TOPICS),
                "type": fragment_type,
                "cluster": f"{fragment_type}:{t_index}",
            }
        )
    return out


def queries(n: int, seed: int = 2, tag: str = "") -> list[str]:
    """n questions, each ending in its number (after `tag`), so no two are the same text."""
    rng = random.Random(seed)
    return [_fill(rng.choice(QUERIES), rng) + f" {tag}{i}" for i in range(n)]


def keyword_pool() -> list[str]:
    return [s.lower() for s in SERVICES] + [t.lower() for t in TECH] + TOPICS
