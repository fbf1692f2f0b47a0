"""Every key Memento keeps in the state Redis (REDIS_URL), named in one place, with the hash tag that says which
cluster slot it lives in. A new key is added here, to `PATTERNS`, and to the table in docs/scaling.md.

REDIS_URL may be a Redis/Valkey Cluster. A cluster hashes only the part of a key between the first `{` and the next
`}` when there is one, so keys with the same tag share a slot: one server, one round trip for a pipeline of them,
and scripts or multi-key commands over them work. The rule:

- A tenant's key carries the tenant as its tag (`tag(tenant_id)`): a request's keys (its rate bucket, its session,
  the session's working memory, the keyword sets it reads) sit on one server, and tenants spread over the shards.
- A few keys belong to no tenant. L1's control keys (ready marker, generation, rebuild lock, wanted weights) share
  the tag `{l1}`, since one script reads three of them; the session index is split into `SESSION_INDEX_BUCKETS`
  sets tagged `{sessions.<n>}`, so no one server takes every session's expiry slide.
- A task's keys (its record, lease and cancel) carry the task's random id as their tag: its creation writes two.
- Keys named by a random id that only its holder knows, and that no command combines with another key (OAuth
  state before sign-in, console sessions, failed-sign-in buckets per client address), carry no tag: the cluster
  hashes the whole key, which spreads them like a tag of their own id would. They keep the names they had before
  the split: renaming them would sign every OAuth client and console user out at the upgrade.

The queue role (REDIS_QUEUE_URL: arq's `memento:queue:*`, `arq:*`, the relay's fence, dead-letter markers, pub/sub
channels) is one server and is not named here.
"""

from __future__ import annotations

import hashlib
import re
import zlib

# --- the tags ---


def tag(tenant_id: str) -> str:
    """`{tenant}`: braces (and `%`, the escape) are percent-escaped, so a tenant id can never end the tag early, and
    an empty one is `%00` (an empty tag `{}` would have the whole key hashed, spreading one tenant over slots)."""
    return "{" + (tenant_id.replace("%", "%25").replace("{", "%7B").replace("}", "%7D") or "%00") + "}"


def _part(value: str) -> str:
    """A free-text part of a key (an agent id): `:` is the separator, so it is escaped, as are braces."""
    return value.replace("%", "%25").replace(":", "%3A").replace("{", "%7B").replace("}", "%7D")


# --- L1, the keyword index (memento_shared.l1) ---

L1_TAG = "{l1}"
L1_READY = f"memento:{L1_TAG}:ready"
L1_REBUILDING = f"memento:{L1_TAG}:rebuilding"
L1_GENERATION = f"memento:{L1_TAG}:generation"
L1_WANTED = f"memento:{L1_TAG}:wanted"
L1_SETS = "memento:l1:{*"  # every keyword set, for SCAN (not the control keys above)


def l1_set(tenant_id: str, workspace: str, agent_id: str, keyword: str) -> str:
    """One (tenant, workspace, agent, keyword)'s sorted set of fragment ids. The keyword is last, so it needs no
    escaping; workspaces hold no `:`."""
    return f"memento:l1:{tag(tenant_id)}:{workspace}:{_part(agent_id)}:{keyword}"


# --- working memory, sessions' seen sets, page snapshots, consolidation progress (memory-api, workers) ---


def working_memory(tenant_id: str, session_id: str) -> str:
    return f"memento:wm:{tag(tenant_id)}:{session_id}"


def seen(tenant_id: str, session_id: str) -> str:
    """What `context` loaded into a session (recall's excludeSeen)."""
    return f"memento:seen:{tag(tenant_id)}:{session_id}"


def page_snapshot(tenant_id: str, token: str) -> str:
    return f"memento:pages:{tag(tenant_id)}:{token}"


def open_snapshots(tenant_id: str, workspace: str, agent_id: str) -> str:
    """A principal's open page snapshots, by when each was opened."""
    return f"memento:pages-open:{tag(tenant_id)}:{workspace}:{_part(agent_id)}"


def consolidation_progress(tenant_id: str, workspace: str) -> str:
    return f"memento:consolidation:{tag(tenant_id)}:{workspace}:progress"


def progress(tenant_id: str, progress_id: str) -> str:
    """A long tool call's progress (memento_shared.progress), written by the worker, read by the gateway."""
    return f"memento:progress:{tag(tenant_id)}:{progress_id}"


# --- the gateway: MCP sessions, rate limits, streams ---

SESSION_INDEX_BUCKETS = 16


def session(tenant_id: str, session_id: str) -> str:
    return f"memento:session:{tag(tenant_id)}:{session_id}"


def session_index(session_id: str) -> str:
    """The sorted set (session id -> expiry) that counts live sessions, one of SESSION_INDEX_BUCKETS by the id."""
    return f"memento:sessions:{{sessions.{zlib.crc32(session_id.encode()) % SESSION_INDEX_BUCKETS}}}"


def session_indexes() -> list[str]:
    return [f"memento:sessions:{{sessions.{n}}}" for n in range(SESSION_INDEX_BUCKETS)]


def stream_owner(tenant_id: str, session_id: str) -> str:
    """Which GET stream a session has open (one at a time)."""
    return f"memento:stream-owner:{tag(tenant_id)}:{session_id}"


def sse_events(tenant_id: str, session_id: str, stream: str) -> str:
    """A response stream's events, kept for resumption (Last-Event-ID)."""
    return f"memento:sse:{tag(tenant_id)}:{session_id}:{stream}"


def identity(tenant_id: str, subject: str) -> str:
    """Who a caller is for rate limits and stream caps: `{tenant}:subject`."""
    return f"{tag(tenant_id)}:{subject}"


def rate(who: str) -> str:
    """A token bucket: `who` is an `identity` (tagged by its tenant) or `ip:<address>` (failed sign-ins, no tag)."""
    return f"memento:rate:{who}"


def streams(who: str) -> str:
    """An identity's open SSE streams (the cap per credential)."""
    return f"memento:streams:{who}"


def resource_subscribers(tenant_id: str, workspace: str, uri: str) -> str:
    """The sessions (2025 revisions) subscribed to one resource; the URI hashed, since it is free text."""
    digest = hashlib.sha256(f"{workspace}\x1f{uri}".encode()).hexdigest()
    return f"memento:resource-subscribers:{tag(tenant_id)}:{digest}"


def resource_subscriptions(tenant_id: str, session_id: str) -> str:
    """The resources one session subscribed to (its cap)."""
    return f"memento:resource-subscriptions:{tag(tenant_id)}:{session_id}"


# --- no tenant yet, no tag: hashed whole ---

OAUTH_PREFIX = "memento:oauth:"  # + client:<id>, pending:<id>, code:<sha256>, refresh:<sha256>, revoked:<jti>, ...
CONSOLE_SESSION_PREFIX = "console:session:"  # + the cookie's random id
CONSOLE_FLOW_PREFIX = "console:oauth:"  # + an OAuth state
TASK_PREFIXES = ("memento:task:", "memento:task-lease:", "memento:task-cancel:")  # + a task's random id, as a tag


# Every key the state Redis may hold, as a regular expression over the whole key, and the tag it must carry
# ("tenant": a tenant's; a literal: that tag; None: no tag, hashed whole). tests/ check every key a run leaves.
_T = r"\{[^{}]+\}"
PATTERNS: list[tuple[str, str | None]] = [
    (rf"memento:l1:{_T}:[^:]+:[^:]+:.*", "tenant"),
    (r"memento:\{l1\}:(ready|rebuilding|generation|wanted)", "{l1}"),
    (rf"memento:wm:{_T}:.+", "tenant"),
    (rf"memento:seen:{_T}:.+", "tenant"),
    (rf"memento:pages:{_T}:.+", "tenant"),
    (rf"memento:pages-open:{_T}:.+", "tenant"),
    (rf"memento:consolidation:{_T}:.+:progress", "tenant"),
    (rf"memento:progress:{_T}:.+", "tenant"),
    (rf"memento:session:{_T}:.+", "tenant"),
    (r"memento:sessions:\{sessions\.\d+\}", "{sessions.n}"),
    (rf"memento:stream-owner:{_T}:.+", "tenant"),
    (rf"memento:sse:{_T}:.+:.+", "tenant"),
    (rf"memento:rate:{_T}:.*", "tenant"),
    (r"memento:rate:ip:[^{}]+", None),
    (rf"memento:streams:{_T}:.*", "tenant"),
    (rf"memento:resource-subscribers:{_T}:[0-9a-f]{{64}}", "tenant"),
    (rf"memento:resource-subscriptions:{_T}:.+", "tenant"),
    (r"memento:task(-lease|-cancel)?:\{[^{}]+\}", "{task id}"),
    (r"memento:oauth:[a-z-]+:[^{}]+", None),
    (r"console:session:[^{}]+", None),
    (r"console:oauth:[^{}]+", None),
]
_COMPILED = [(re.compile(pattern), tagged) for pattern, tagged in PATTERNS]


def known(key: str) -> bool:
    """The key is one of PATTERNS: named here, with the tag its kind must carry."""
    return any(pattern.fullmatch(key) for pattern, _ in _COMPILED)
