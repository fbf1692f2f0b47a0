"""What a workspace export holds: one `kind` per table of a workspace's memories, in the order an import needs them
(a row's references come before it), and how each is keyed on import.

Left out, because the system derives them again: document chunks, their term statistics and vectors (made from each
version's content by the documents pipeline and the embedder), the outbox and dead letters, consolidation runs.
Session working memory (seed 000 scope "session") lives in Redis and ends with its MCP session, so it is not
exported; the persistent working memory of seed 003 (sections, items, skip list, identity) is."""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg

FORMAT = "memento-export"
VERSION = 1


@dataclass(frozen=True)
class Kind:
    kind: str
    table: str
    order: str  # the export's ORDER BY: the same rows give the same file
    key: str = "natural"  # natural: its primary key names it; id: a global id, remapped on collision; serial: deduped
    refs: dict[str, str] = field(default_factory=dict)  # column -> the kind whose (remapped) id it holds
    narrow: str | None = None  # serial kinds: the column a duplicate shares, so the check reads few rows
    vectors: tuple[str, ...] = ()  # columns exported only with --vectors
    vectors_only: bool = False


KINDS = (
    Kind("fragment", "fragments", "created_at, id", key="id"),
    Kind(
        "fragment_version",
        "fragment_versions",
        "fragment_id, amended_at, id",
        key="serial",
        refs={"fragment_id": "fragment"},
        narrow="fragment_id",
    ),  # fmt: skip
    Kind("link", "fragment_links", "created_at, id", key="serial", refs={"from_id": "fragment", "to_id": "fragment"}),
    Kind(
        "vector", "fragment_embeddings", "fragment_id, profile_id", refs={"fragment_id": "fragment"}, vectors_only=True
    ),  # fmt: skip
    Kind("tool_feedback", "tool_feedback", "created_at, id", key="serial", narrow="created_at"),
    Kind("task_feedback", "task_feedback", "created_at, id", key="serial", narrow="created_at"),
    Kind("wm_section", "wm_sections", "section_key"),
    Kind("wm_item", "wm_items", "created_at, id", key="id"),
    Kind("skip_entry", "skip_entries", "created_at, id", key="id", vectors=("profile_id", "embedding")),
    Kind("identity_snapshot", "identity_snapshots", "created_at, id", key="id"),
    Kind("protocol_decay", "protocol_decay", "tenant_id"),
    Kind("session_meta", "session_meta", "session_id"),
    Kind("session_event", "session_events", "id", key="serial", narrow="session_id"),
    Kind("session_archive", "session_archives", "session_id, day"),
    Kind("turn_guard", "turn_guards", "session_id, turn_id"),
    Kind("document", "doc_items", "created_at, id", key="id"),
    Kind("document_version", "doc_versions", "item_id, version_num", refs={"item_id": "document"}),
    Kind("doc_commit", "doc_commits", "created_at, idempotency_key"),
)
BY_NAME = {k.kind: k for k in KINDS}
SCOPE_COLUMNS = ("tenant_id", "workspace")
OWN_KIND = "document_kind"  # a document's `kind` column in an export line, whose `kind` is the line's


@dataclass
class Columns:
    """Per table: the columns a row is written with (generated ones never are) and its serial id column, if any."""

    writable: dict[str, list[str]]
    serial: dict[str, str]
    generated: dict[str, list[str]]

    def dropped(self, kind: Kind, vectors: bool) -> list[str]:
        """What an exported row leaves out: its scope, a serial id (the target numbers its own), vector columns."""
        out = [*SCOPE_COLUMNS, *self.generated.get(kind.table, [])]
        if kind.table in self.serial:
            out.append(self.serial[kind.table])
        if not vectors:
            out.extend(kind.vectors)
        return out


async def columns(conn: asyncpg.Connection) -> Columns:
    rows = await conn.fetch(
        "SELECT table_name::text AS t, column_name::text AS c, coalesce(column_default LIKE 'nextval(%', false) AS s,"
        " is_generated <> 'NEVER' AS g FROM information_schema.columns WHERE table_schema = 'agent_memory'"
        " ORDER BY table_name, ordinal_position"
    )
    writable: dict[str, list[str]] = {}
    serial: dict[str, str] = {}
    generated: dict[str, list[str]] = {}
    for r in rows:
        if r["g"]:
            generated.setdefault(r["t"], []).append(r["c"])
        elif r["s"]:
            serial[r["t"]] = r["c"]
        else:
            writable.setdefault(r["t"], []).append(r["c"])
    if "fragments" not in writable:
        from memento_memory_api.cli.system import CliError

        raise CliError("the database holds no Memento schema: apply the migrations first (memento-migrate)")
    return Columns(writable, serial, generated)
