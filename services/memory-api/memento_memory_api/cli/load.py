"""Writing import records into a workspace: one unit of work (one transaction with its outbox events, as `remember`
writes), so a bad line or a refused row leaves nothing behind, and every new fragment's `fragment.stored` and every
new document version's `document.versioned` event reach the embedder, which makes them searchable by meaning.

Idempotent: a row already in the workspace (same id, or a fragment with the same content in its namespace, or a
document with the same canonical key) is mapped to, never written again; serial-keyed rows (versions, events,
feedback) are written only when no equal row exists. An id held by another tenant's or workspace's row (invisible
here: RLS) is remapped to an id derived from the tenant, workspace and old id, the same on every import, and every
reference to it in the file (links, versions, supersession, linked_to, linkages, vectors) is rewritten."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg

from memento_memory_api.cli import kinds
from memento_memory_api.cli.progress import Progress
from memento_memory_api.cli.system import CliError
from memento_memory_api.recall import l1
from memento_memory_api.repositories import documents as docs
from memento_memory_api.uow import Scope, UnitOfWork
from memento_shared import l1 as l1_layout
from memento_shared.domain.fragments import content_hash
from memento_shared.text.chunking import chunk_markdown

MAPPED = ("fragment", "wm_item", "skip_entry", "identity_snapshot", "document")


@dataclass
class Record:
    where: str  # "line 7", "results[3]": how an error names it
    kind: kinds.Kind
    row: dict[str, Any]


class BadRecord(CliError):
    def __init__(self, record: Record, field: str, message: str) -> None:
        super().__init__(f"{record.where}: {record.kind.kind}.{field}: {message}; nothing was imported")


@dataclass
class Loader:
    uow: UnitOfWork
    cols: kinds.Columns
    redis: Any = None
    # (table, id) -> whether any tenant holds the id: keys are unique per tenant only (migration 0022, for a store
    # distributed by tenant), so an imported id another tenant holds takes a remapped one here instead
    taken: Callable[[str, str], Awaitable[bool]] | None = None
    ids: dict[str, dict[str, str]] = field(default_factory=lambda: {k: {} for k in MAPPED})
    counts: Counter[Any] = field(default_factory=Counter)  # "<kind> added|kept|remapped"
    new_fragments: list[tuple[Record, str]] = field(default_factory=list)
    versions: dict[str, list[int]] = field(default_factory=dict)  # item id -> versions added
    latest: dict[str, int | None] = field(default_factory=dict)  # item id -> its wanted latest version

    @property
    def conn(self) -> asyncpg.Connection:
        return self.uow.conn

    @property
    def scope(self) -> Scope:
        return self.uow.scope

    # ------------------------------------------------------------------------------------------------
    def check(self, records: list[Record]) -> None:
        """Every field a column of its table, before anything is written."""
        for record in records:
            if record.kind.table not in self.cols.writable:
                raise CliError(f"{record.where}: kind {record.kind.kind!r} needs a newer schema here (memento-migrate)")
            allowed = set(self.cols.writable[record.kind.table])
            for name in record.row:
                if name not in allowed:
                    raise BadRecord(record, name, "unknown field")
            for name, _ in record.kind.refs.items():
                if not isinstance(record.row.get(name), str) or not record.row[name]:
                    raise BadRecord(record, name, "must be a non-empty string")
            if record.kind.key == "id" and (not isinstance(record.row.get("id"), str) or not record.row["id"]):
                raise BadRecord(record, "id", "must be a non-empty string")

    async def load(self, records: list[Record]) -> Counter[Any]:
        self.check(records)
        order = {k.kind: i for i, k in enumerate(kinds.KINDS)}
        progress = Progress("importing", len(records))
        try:
            for record in sorted(records, key=lambda r: order[r.kind.kind]):  # stable: file order within a kind
                try:
                    await self._one(record)
                except asyncpg.PostgresError as exc:
                    raise BadRecord(record, _field_of(exc, record.kind.table), _first_line(exc)) from None
                progress.step()
        except BaseException:
            progress.abandon()
            raise
        progress.close()
        await self._relink()
        await self._settle_documents()
        await self._emit_fragments()
        self.uow.after_commit.append(self._index_l1)
        return self.counts

    async def _one(self, record: Record) -> None:
        kind = record.kind.kind
        if kind == "fragment":
            await self._mapped(record, by_hash=True)
        elif kind in MAPPED:
            await self._mapped(record)
        elif kind == "document_version":
            await self._document_version(record)
        elif kind == "vector":
            await self._vector(record)
        elif record.kind.key == "serial":
            await self._serial(record)
        else:
            row = self._row(record)
            if kind == "doc_commit" and "answer" in row:  # the answer a replayed commit gives names its documents
                row["answer"] = _renamed(row["answer"], self.ids["document"])
            added = await self._insert(record.kind.table, row, "ON CONFLICT DO NOTHING RETURNING 1")
            self.counts[f"{kind} {'added' if added else 'kept'}"] += 1

    # ------------------------------------------------------------------------------------------------
    def _row(self, record: Record, **changes: Any) -> dict[str, Any]:
        row = {**record.row, **changes, "tenant_id": self.scope.tenant_id, "workspace": self.scope.workspace}
        for name, target in record.kind.refs.items():
            row[name] = self.ids[target].get(row[name], row[name])
        return row

    async def _insert(self, table: str, row: dict[str, Any], tail: str) -> Any:
        names = ", ".join(f'"{c}"' for c in self.cols.writable[table] if c in row)
        return await self.conn.fetchval(
            f"INSERT INTO agent_memory.{table} ({names}) SELECT {names} FROM"
            f" jsonb_populate_record(NULL::agent_memory.{table}, $1::jsonb) {tail}",
            row,
        )

    async def _visible(self, table: str, row_id: str) -> bool:
        return bool(await self.conn.fetchval(f"SELECT true FROM agent_memory.{table} WHERE id = $1", row_id))

    def remapped(self, row_id: str) -> str:
        """The id a colliding row takes here: derived, so a second import of the same file lands on the same one."""
        digest = hashlib.sha256(f"{self.scope.tenant_id}\0{self.scope.workspace}\0{row_id}".encode()).hexdigest()
        prefix = row_id.split("-", 1)[0] if "-" in row_id else "imported"
        return f"{prefix}-{digest[:16]}"

    async def _mapped(self, record: Record, by_hash: bool = False) -> None:
        kind, table, old = record.kind.kind, record.kind.table, record.row["id"]
        if await self._visible(table, old):
            self.ids[kind][old] = old
            self.counts[f"{kind} kept"] += 1
            return
        same = await self._same(record) if by_hash or kind == "document" else None
        if same is not None:
            self.ids[kind][old] = same
            self.counts[f"{kind} kept"] += 1
            return
        for candidate in (old, self.remapped(old)):
            if candidate != old and await self._visible(table, candidate):
                self.ids[kind][old] = candidate
                self.counts[f"{kind} kept"] += 1
                return
            if self.taken is not None and await self.taken(table, candidate):
                continue
            row = self._row(record, id=candidate)
            if kind == "document":
                row["latest_version"] = None  # set once its versions are in (make_latest keeps the statistics)
                self.latest[candidate] = record.row.get("latest_version")
            if await self._insert(table, row, "ON CONFLICT DO NOTHING RETURNING 1"):
                self.ids[kind][old] = candidate
                self.counts[f"{kind} {'added' if candidate == old else 'remapped'}"] += 1
                if kind == "fragment":
                    self.new_fragments.append((record, candidate))
                return
        raise BadRecord(record, "id", f"{old!r} is taken here and so is its remapped id")

    async def _same(self, record: Record) -> str | None:
        """The workspace's own copy of this row under another id: the same content in the fragment's namespace, or
        the canonical document with the same key."""
        row = record.row
        if record.kind.kind == "document":
            if not row.get("canonical_key"):
                return None
            found = await docs.canonical(self.conn, self.scope, row["canonical_key"])
            return found["id"] if found else None
        if not isinstance(row.get("content"), str):
            raise BadRecord(record, "content", "must be a string")
        row.setdefault("content_hash", content_hash(row["content"]))
        return await self.conn.fetchval(
            "SELECT id FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2 AND agent_id = $3"
            " AND content_hash = $4",
            self.scope.tenant_id,
            self.scope.workspace,
            row.get("agent_id") or "default",
            row["content_hash"],
        )

    async def _referenced(self, record: Record) -> None:
        """A reference to a row not in the file must name one of this workspace (a foreign key alone would accept
        another tenant's row)."""
        for name, target in record.kind.refs.items():
            value = record.row[name]
            if value in self.ids[target]:
                continue
            table = kinds.BY_NAME[target].table
            if not await self._visible(table, value):
                raise BadRecord(record, name, f"{value!r} is neither in the file nor in this workspace")
            self.ids[target][value] = value

    async def _serial(self, record: Record) -> None:
        await self._referenced(record)
        table, kind = record.kind.table, record.kind.kind
        if kind == "link":
            added = await self._insert(table, self._row(record), "ON CONFLICT DO NOTHING RETURNING 1")
        else:
            drop = [self.cols.serial[table], *self.cols.generated.get(table, [])]
            narrow = (
                f"AND x.{record.kind.narrow} IS NOT DISTINCT FROM r.{record.kind.narrow}" if record.kind.narrow else ""
            )
            names = ", ".join(f'"{c}"' for c in self.cols.writable[table] if c in self._row(record))
            added = await self.conn.fetchval(
                f"WITH r AS (SELECT * FROM jsonb_populate_record(NULL::agent_memory.{table}, $1::jsonb))"
                f" INSERT INTO agent_memory.{table} ({names}) SELECT {names} FROM r WHERE NOT EXISTS ("
                f"SELECT 1 FROM agent_memory.{table} x WHERE x.tenant_id = r.tenant_id AND x.workspace = r.workspace"
                f" {narrow} AND to_jsonb(x) - $2::text[] = to_jsonb(r) - $2::text[]) RETURNING 1",
                self._row(record),
                drop,
            )
        self.counts[f"{kind} {'added' if added else 'kept'}"] += 1

    async def _vector(self, record: Record) -> None:
        await self._referenced(record)
        if not await self.conn.fetchval(
            "SELECT true FROM agent_memory.embedding_profiles WHERE id = $1", record.row.get("profile_id")
        ):
            self.counts["vector skipped (no such embedding profile here; the embedder computes it)"] += 1
            return
        added = await self._insert(record.kind.table, self._row(record), "ON CONFLICT DO NOTHING RETURNING 1")
        self.counts[f"vector {'added' if added else 'kept'}"] += 1

    async def _document_version(self, record: Record) -> None:
        await self._referenced(record)
        row = self._row(record)
        item, num, content = row["item_id"], row.get("version_num"), row.get("content")
        if not isinstance(num, int) or num < 1:
            raise BadRecord(record, "version_num", "must be a positive integer")
        if not isinstance(content, str):
            raise BadRecord(record, "content", "must be a string")
        exists = await self.conn.fetchval(
            "SELECT true FROM agent_memory.doc_versions WHERE item_id = $1 AND version_num = $2", item, num
        )
        if exists:
            self.counts["document_version kept"] += 1
            return
        digest = row.get("content_hash") or hashlib.sha256(content.encode()).hexdigest()
        # through the documents repository: the version with its chunks, as a commit writes them
        await docs.add_version(
            self.conn, self.scope, item, num, content, digest, chunk_markdown(content), row.get("commit_id")
        )
        if row.get("created_at"):
            await self.conn.execute(
                "UPDATE agent_memory.doc_versions SET created_at = $3::text::timestamptz WHERE item_id = $1"
                " AND version_num = $2",
                item,
                num,
                row["created_at"],
            )
        self.versions.setdefault(item, []).append(num)
        self.uow.emit("document.versioned", {"item_id": item, "version_num": num})
        self.counts["document_version added"] += 1

    # ------------------------------------------------------------------------------------------------
    async def _relink(self) -> None:
        """References inside the new fragments, rewritten once every id is known (they may point forward)."""
        frag, items = self.ids["fragment"], self.ids["wm_item"]
        for record, new_id in self.new_fragments:
            row = record.row
            changes: dict[str, Any] = {}
            for name in ("superseded_by", "supersedes"):
                if row.get(name) and frag.get(row[name], row[name]) != row[name]:
                    changes[name] = frag[row[name]]
            linked = row.get("linked_to") or []
            if any(frag.get(i, i) != i for i in linked):
                changes["linked_to"] = [frag.get(i, i) for i in linked]
            linkages = row.get("linkages") or []
            rewritten = [_relinked(entry, frag, items) for entry in linkages]
            if rewritten != linkages:
                changes["linkages"] = rewritten
            if changes:
                sets = ", ".join(
                    f'"{name}" = (jsonb_populate_record(NULL::agent_memory.fragments, $2::jsonb))."{name}"'
                    for name in changes
                )
                await self.conn.execute(f"UPDATE agent_memory.fragments SET {sets} WHERE id = $1", new_id, changes)

    async def _settle_documents(self) -> None:
        """Each document's latest version, made so through make_latest: the search statistics follow it."""
        for item, added in self.versions.items():
            old = await self.conn.fetchval("SELECT latest_version FROM agent_memory.doc_items WHERE id = $1", item)
            for num in sorted(added):
                if old is None or num > old:
                    await docs.make_latest(self.conn, self.scope, item, old, num)
                    old = num
            wanted = self.latest.get(item)
            if (
                wanted is not None
                and wanted != old
                and await self.conn.fetchval(
                    "SELECT true FROM agent_memory.doc_versions WHERE item_id = $1 AND version_num = $2", item, wanted
                )
            ):
                await docs.make_latest(self.conn, self.scope, item, old, wanted)

    async def _emit_fragments(self) -> None:
        for record, new_id in self.new_fragments:
            row = record.row
            self.uow.emit(
                "fragment.stored",
                {
                    "fragment_id": new_id,
                    "content_hash": row["content_hash"],
                    "agent_id": row.get("agent_id") or "default",
                },
            )

    async def _index_l1(self) -> None:
        """After the commit, as remember does: the new fragments join their L1 keyword sets (best effort; L1 is
        rebuilt from the rows whenever it is found out of step)."""
        if self.redis is None:
            return
        for record, new_id in self.new_fragments:
            row = record.row
            created = row.get("created_at")
            when = datetime.fromisoformat(created) if isinstance(created, str) else datetime.now(UTC)
            score = l1_layout.score(float(row.get("importance") or 0.5), when)
            await l1.index(
                self.redis,
                self.scope.tenant_id,
                self.scope.workspace,
                row.get("agent_id") or "default",
                new_id,
                list(row.get("keywords") or []),
                score,
            )


def _relinked(entry: Any, frag: dict[str, str], items: dict[str, str]) -> Any:
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        return entry
    table = frag if entry.get("type") == "memory" else items if entry.get("type") == "item" else None
    return {**entry, "id": table.get(entry["id"], entry["id"])} if table is not None else entry


def _renamed(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, list):
        return [_renamed(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _renamed(v, ids) for k, v in value.items()}
    return value


def _field_of(exc: asyncpg.PostgresError, table: str) -> str:
    """The column a refused row was refused for: the server names it, or the constraint does
    (fragments_type_check: type)."""
    column = getattr(exc, "column_name", None)
    if column:
        return column
    constraint = getattr(exc, "constraint_name", None) or ""
    if constraint.startswith(f"{table}_"):
        return constraint.removeprefix(f"{table}_").removesuffix("_check").removesuffix("_key").removesuffix("_fkey")
    return "row"


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
