"""The files `memento import` reads, as import records (load.Record), every line checked before anything is written:
a bad one is named (its line, or its place in a JSON list, and the field) and nothing is imported.

- memento: what `memento export` writes.
- mcp-memory: the official MCP memory server's `memory.jsonl` (a knowledge graph): lines
  {"type": "entity", "name", "entityType", "observations": [...]} and {"type": "relation", "from", "to",
  "relationType"}. Each entity becomes a memory ("<name> is a <entityType>"), each observation a memory
  ("<name>: <observation>") linked part_of its entity, each relation a memory of type relation ("<from>
  <relationType> <to>") linked to both entities, which are linked to each other.
- mem0: a mem0 export, a JSON list of memories or {"results": [...]}, each {"id", "memory", "metadata",
  "created_at", "updated_at", "user_id", "agent_id", "categories", ...}: one memory each, its dates kept.

Foreign memories get ids derived from what they are (the entity name, the observation, the mem0 id), so importing
the same file again finds them instead of storing them twice; their text is PII-masked and refused over
MEMORY_MAX_CHARS, as every dialect's stored text is."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memento_memory_api.cli import kinds
from memento_memory_api.cli.load import Record
from memento_memory_api.cli.system import CliError
from memento_shared.domain.fragments import DEFAULT_IMPORTANCE, content_hash, infer_ttl
from memento_shared.text.keywords import extract_keywords, normalise_keywords
from memento_shared.text.redaction import redact_pii
from memento_shared.text.tokenizer import count_tokens

SOURCES = ("memento", "mcp-memory", "mem0")
FRAGMENT, LINK = kinds.BY_NAME["fragment"], kinds.BY_NAME["link"]


def bad(where: str, field: str, message: str) -> CliError:
    return CliError(f"{where}: {field}: {message}; nothing was imported")


def read(path: Path, source: str, max_chars: int) -> list[Record]:
    if not path.is_file():
        raise CliError(f"FILE: {path}: no such file")
    if source == "memento":
        return read_memento(path)
    if source == "mcp-memory":
        return read_mcp_memory(path, max_chars)
    return read_mem0(path, max_chars)


def _lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    with path.open(encoding="utf-8") as handle:
        try:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    where = f"line {number}"
                    try:
                        value = json.loads(line)
                    except ValueError as exc:
                        raise bad(where, "line", f"not JSON ({exc.msg})") from None
                    if not isinstance(value, dict):
                        raise bad(where, "line", "must be a JSON object")
                    yield where, value
        except UnicodeDecodeError:
            raise CliError(f"FILE: {path} is not UTF-8 text; nothing was imported") from None


def read_memento(path: Path) -> list[Record]:
    records: list[Record] = []
    header = None
    for where, value in _lines(path):
        kind = value.pop("kind", None)
        if header is None:
            if kind != "header" or value.get("format") != kinds.FORMAT:
                raise bad(where, "kind", f"a {kinds.FORMAT} file starts with its header line (made by memento export)")
            if value.get("version") != kinds.VERSION:
                raise bad(where, "version", f"{value.get('version')!r} is not a version this Memento reads")
            header = value
            continue
        if kind not in kinds.BY_NAME:
            raise bad(where, "kind", f"{kind!r} is not one of {', '.join(kinds.BY_NAME)}")
        if kinds.OWN_KIND in value:
            value["kind"] = value.pop(kinds.OWN_KIND)
        records.append(Record(where, kinds.BY_NAME[kind], value))
    if header is None:
        raise CliError(f"FILE: {path} is empty; nothing was imported")
    _complete(header, records)
    return records


def _complete(header: dict[str, Any], records: list[Record]) -> None:
    """The rows of each kind the header counted are all there: a file cut short is refused, not half imported."""
    counted = header.get("counts")
    if not isinstance(counted, dict):
        return
    found: dict[str, int] = {}
    for record in records:
        found[record.kind.kind] = found.get(record.kind.kind, 0) + 1
    for kind, n in counted.items():
        if found.get(kind, 0) != n:
            raise bad("line 1", "counts", f"the header counts {n} {kind} rows, the file holds {found.get(kind, 0)}"
                      " (cut short or edited?)")  # fmt: skip


# --------------------------------------------------------------------------------------------------


def _derived_id(*parts: str) -> str:
    return "frag-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _text(where: str, field: str, value: Any, max_chars: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise bad(where, field, "must be a non-empty string")
    if len(value) > max_chars:
        raise bad(where, field, f"{len(value)} characters, more than the {max_chars} allowed (MEMORY_MAX_CHARS)")
    return value


def memory(
    content: str,
    frag_id: str,
    *,
    topic: str,
    source: str,
    ftype: str = "fact",
    keywords: list[str] = (),
    tags: list[str] = (),
    created_at: datetime | None = None,
    updated_at: datetime | None = None,
) -> dict[str, Any]:
    """A row of the one store for foreign text, built as the dialects build theirs (masked, hashed, keywords)."""
    content = redact_pii(content)
    importance = DEFAULT_IMPORTANCE.get(ftype, 0.5)
    row = {
        "id": frag_id,
        "agent_id": "default",
        "content": content,
        "content_hash": content_hash(content),
        "topic": topic[:200],
        "keywords": normalise_keywords([*keywords, *extract_keywords(content)])[:10],
        "keywords_given": bool(keywords),
        "type": ftype,
        "importance": importance,
        "ttl_tier": infer_ttl(ftype, importance),
        "estimated_tokens": count_tokens(content),
        "source": source,
        "tags": list(dict.fromkeys(tags)),
        "linked_to": [],
    }
    if created_at is not None:
        row["created_at"] = created_at.isoformat()
        row["updated_at"] = (updated_at or created_at).isoformat()
    return row


def read_mcp_memory(path: Path, max_chars: int) -> list[Record]:
    entities: dict[str, Record] = {}
    observations: dict[str, Record] = {}
    relations: dict[str, Record] = {}
    links: list[tuple[str, str, str, str]] = []  # (where, from id, to id, relation type)
    pending: list[tuple[str, dict[str, Any]]] = []
    for where, value in _lines(path):
        kind = value.get("type")
        if kind == "entity":
            name = _text(where, "name", value.get("name"), 200)
            entity_type = _text(where, "entityType", value.get("entityType"), 200)
            found = value.get("observations", [])
            if not isinstance(found, list) or not all(isinstance(o, str) for o in found):
                raise bad(where, "observations", "must be a list of strings")
            entity_id = _derived_id("mcp-memory", "entity", name)
            if name not in entities:
                row = memory(f"{name} is a {entity_type}", entity_id, topic=name, source="mcp-memory",
                             keywords=[name, entity_type], tags=["mcp-memory", f"entity:{name}"])  # fmt: skip
                entities[name] = Record(where, FRAGMENT, row)
            for index, text in enumerate(found):
                _text(where, f"observations[{index}]", text, max_chars)
                obs_id = _derived_id("mcp-memory", "observation", name, text)
                if obs_id not in observations:
                    row = memory(f"{name}: {text}", obs_id, topic=name, source="mcp-memory", keywords=[name],
                                 tags=["mcp-memory", f"entity:{name}"])  # fmt: skip
                    row["linked_to"] = [entity_id]
                    observations[obs_id] = Record(where, FRAGMENT, row)
                    links.append((where, obs_id, entity_id, "part_of"))
        elif kind == "relation":
            ends = [_text(where, f, value.get(f), 200) for f in ("from", "to")]
            relation = _text(where, "relationType", value.get("relationType"), 200)
            pending.append((where, {"from": ends[0], "to": ends[1], "relationType": relation}))
        else:
            raise bad(where, "type", f"{kind!r}: the memory server's lines are of type entity or relation")
    for where, rel in pending:  # after every entity: a relation may come before the entities it joins
        rel_id = _derived_id("mcp-memory", "relation", rel["from"], rel["relationType"], rel["to"])
        if rel_id in relations:
            continue
        content = _text(where, "relationType", f"{rel['from']} {rel['relationType']} {rel['to']}", max_chars)
        row = memory(content, rel_id, topic=rel["from"], source="mcp-memory", ftype="relation",
                     keywords=[rel["from"], rel["to"], rel["relationType"]],
                     tags=["mcp-memory", f"relation:{rel['relationType']}"])  # fmt: skip
        ends = [entities[n].row["id"] for n in (rel["from"], rel["to"]) if n in entities]
        row["linked_to"] = ends
        relations[rel_id] = Record(where, FRAGMENT, row)
        links.extend((where, rel_id, end, "related") for end in ends)
        if len(ends) == 2 and ends[0] != ends[1]:
            entities[rel["from"]].row["linked_to"].append(ends[1])
            links.append((where, ends[0], ends[1], "related"))
    records = [*entities.values(), *observations.values(), *relations.values()]
    seen = set()
    for where, from_id, to_id, relation_type in links:
        if (from_id, to_id) not in seen:
            seen.add((from_id, to_id))
            row = {"from_id": from_id, "to_id": to_id, "relation_type": relation_type, "agent_id": "default"}
            records.append(Record(where, LINK, row))
    for record in records:
        if record.kind is FRAGMENT:
            record.row["linked_to"] = list(dict.fromkeys(record.row["linked_to"]))
    return records


def _when(where: str, field: str, value: Any) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise bad(where, field, "must be an ISO 8601 date-time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def read_mem0(path: Path, max_chars: int) -> list[Record]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CliError(f"FILE: {path} is not JSON ({exc}); nothing was imported") from None
    field = "results"
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        entries = data["results"]
    elif isinstance(data, list):
        entries, field = data, ""
    else:
        raise CliError('FILE: a mem0 export is a JSON list of memories or {"results": [...]}; nothing was imported')
    records: dict[str, Record] = {}
    for index, entry in enumerate(entries):
        where = f"{field}[{index}]"
        if not isinstance(entry, dict):
            raise bad(where, "entry", "must be a JSON object")
        text = _text(where, "memory", entry.get("memory"), max_chars)
        mem0_id = entry.get("id")
        if mem0_id is not None and not isinstance(mem0_id, str | int):
            raise bad(where, "id", "must be a string")
        metadata = entry.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise bad(where, "metadata", "must be an object")
        categories = entry.get("categories") or metadata.get("categories") or []
        if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
            raise bad(where, "categories", "must be a list of strings")
        tags = ["mem0", *categories]
        tags += [f"{k.removesuffix('_id')}:{entry[k]}" for k in ("user_id", "agent_id", "run_id")
                 if isinstance(entry.get(k), str) and entry[k]]  # fmt: skip
        created = _when(where, "created_at", entry.get("created_at"))
        updated = _when(where, "updated_at", entry.get("updated_at"))
        frag_id = _derived_id("mem0", str(mem0_id) if mem0_id is not None else text)
        row = memory(text, frag_id, topic=categories[0] if categories else "mem0",
                     source=f"mem0:{mem0_id}" if mem0_id is not None else "mem0",
                     keywords=categories, tags=tags, created_at=created, updated_at=updated)  # fmt: skip
        records.setdefault(frag_id, Record(where, FRAGMENT, row))
    return list(records.values())
