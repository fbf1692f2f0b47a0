"""`memento-admin annotate`: what a write records of a memory since migration 0019 (issue 28), given to the fragments
stored before it (or bulk-loaded without it): the thread and place a source such as "D1:3" names, the time the text
is about, resolved against the fragment's own creation time, and the words searched beside it (speaker, names, dates
spelled out). Recall by text reads them for its context list, time boost and neighbour lift.

A fragment written since 0019 always has `event_said` (the moment its text was said: its header's, else its write
time), so the fragments without one are exactly those to annotate, and a second run finds none. The content, its
embedding and keywords are not touched. Run once after upgrading; batches commit one by one, so the service keeps
serving meanwhile and an interrupted run resumes where it stopped.

Fragments written before migration 0025 get the entities they link by (text.links; issue 53's second hop) in a pass
of their own: those whose `entities` is NULL (a fragment naming none gets an empty list, so a second run finds none).

`--stems` (issue 53) writes every fragment's expansion afresh, now ending with the stems its words do not spell
(text.stems), and the stems of its LLM facts, so a question's "camped" finds a memory stored before the upgrade that
says "camping"; only rows whose expansion changes are written, so a second run writes none.

`--kinds` (issue 53) gives every fragment's entities the markers of the kinds that are not names its words (and its
LLM facts') hold as the word lists read them now (text.links.word_kinds: `=activity`, `=event`...): a marker they gain
is added, one the lists no longer give (a software word left out since) is taken away; only rows whose kinds change
are written, so a second run writes none.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from memento_memory_api.store import ANNOTATION, annotation_fields
from memento_shared.db.pool import create_pool
from memento_shared.db.rls import set_system
from memento_shared.settings import cli_settings
from memento_shared.text.links import WORD_KINDS, entity_tokens, fact_tokens, word_kinds

_UNANNOTATED = """
SELECT id, content, source, created_at FROM agent_memory.fragments
WHERE event_said IS NULL AND id > $1 ORDER BY id LIMIT $2
"""
# thread and seq only where the row has none: a row placed by its MCP session keeps that place
_UPDATE = """
UPDATE agent_memory.fragments f
SET thread = coalesce(f.thread, u.thread), seq = CASE WHEN f.thread IS NULL THEN u.seq ELSE f.seq END,
    event_from = u.event_from, event_to = u.event_to, event_said = u.event_said, expansion = u.expansion,
    entities = coalesce(f.entities, ARRAY(SELECT jsonb_array_elements_text(u.entities::jsonb)))
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[], $7::text[],
            $8::text[])
    AS u(id, thread, seq, event_from, event_to, event_said, expansion, entities)
WHERE f.id = u.id AND f.event_said IS NULL
"""
_UNLINKED = (
    "SELECT id, content, facts FROM agent_memory.fragments WHERE entities IS NULL AND id > $1 ORDER BY id LIMIT $2"
)
_ENTITIES = """
UPDATE agent_memory.fragments f SET entities = ARRAY(SELECT jsonb_array_elements_text(u.entities::jsonb))
FROM unnest($1::text[], $2::text[]) AS u(id, entities)
WHERE f.id = u.id AND f.entities IS NULL
"""
KIND_MARKERS = frozenset(WORD_KINDS)  # `=activity`, `=event`...: the markers the word lists give
_LINKED = (
    "SELECT id, content, content_hash, facts, entities FROM agent_memory.fragments WHERE entities IS NOT NULL"
    " AND id > $1 ORDER BY id LIMIT $2"
)
# a row's word kinds as the lists give them now, in place of those it holds (a marker the lists no longer give, such
# as `=event` for "race condition" before the software words were left out, goes), its other entities kept as they
# are now; only if its content is still the one read (an amend since wrote its entities afresh)
_KINDS = """
UPDATE agent_memory.fragments f SET entities = ARRAY(
    SELECT DISTINCT t FROM unnest(
        ARRAY(SELECT e FROM unnest(f.entities) AS e WHERE e <> ALL($4::text[]))
        || ARRAY(SELECT jsonb_array_elements_text(u.kinds::jsonb))) AS t
    ORDER BY t)
FROM unnest($1::text[], $2::text[], $3::text[]) AS u(id, kinds, hash)
WHERE f.id = u.id AND f.entities IS NOT NULL AND f.content_hash = u.hash
"""
_EVERY = "SELECT id, content, source, created_at, facts FROM agent_memory.fragments WHERE id > $1 ORDER BY id LIMIT $2"
_EXPANSION = """
UPDATE agent_memory.fragments f SET expansion = u.expansion
FROM unnest($1::text[], $2::text[]) AS u(id, expansion)
WHERE f.id = u.id AND f.event_said IS NOT NULL AND f.expansion IS DISTINCT FROM u.expansion
"""


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "annotate", help="give fragments stored before migration 0019 their thread, time and expansion"
    )
    parser.add_argument("--batch", type=int, default=1000, help="fragments per transaction (default 1000)")
    parser.add_argument(
        "--stems", action="store_true", help="also write every fragment's expansion afresh, with its stems (issue 53)"
    )
    parser.add_argument(
        "--kinds",
        action="store_true",
        help="also mark every fragment's entities with the kinds its words name: activities, events... (issue 53)",
    )
    parser.set_defaults(handler=lambda args: asyncio.run(annotate_all(args.batch, args.stems, args.kinds)))


async def _in_batches(pool: Any, select: str, batch: int, write: Callable[[Any, list[Any]], Awaitable[str]]) -> int:
    """`select`'s rows (after an id, at most `batch`, in id order) handed to `write` a batch per committed
    transaction, as the system; the rows its statements changed, summed from their status ("UPDATE n")."""
    after, changed = "", 0
    while True:
        async with pool.acquire() as conn, conn.transaction():
            await set_system(conn)
            rows = await conn.fetch(select, after, batch)
            if not rows:
                return changed
            changed += int((await write(conn, rows)).split()[-1])
        after = rows[-1]["id"]


async def _annotate_rows(conn: Any, rows: list[Any]) -> str:
    """Thread, time, expansion and entities of rows stored before migration 0019."""
    noted = [annotation_fields(r["content"], r["source"], None, r["created_at"]) for r in rows]
    columns = [[r["id"] for r in rows]] + [[n[f] for n in noted] for f in ANNOTATION if f != "entities"]
    return str(await conn.execute(_UPDATE, *columns, [json.dumps(n["entities"]) for n in noted]))


async def _link_rows(conn: Any, rows: list[Any]) -> str:
    """The entities of rows stored before migration 0025, with those their LLM facts give."""
    tokens = [json.dumps(fact_tokens(r["facts"] or "", entity_tokens(r["content"]))) for r in rows]
    return str(await conn.execute(_ENTITIES, [r["id"] for r in rows], tokens))


async def _kind_rows(conn: Any, rows: list[Any]) -> str:
    """Every linked row's word kinds as its words and facts name them now (--kinds); only rows whose kinds change."""
    changed = []
    for r in rows:
        kinds = {*word_kinds(r["content"]), *word_kinds(r["facts"] or "")}
        if kinds != set(r["entities"]) & KIND_MARKERS:
            changed.append((r["id"], json.dumps(sorted(kinds)), r["content_hash"]))
    if not changed:
        return "UPDATE 0"
    ids, marked, hashes = (list(column) for column in zip(*changed, strict=True))
    return str(await conn.execute(_KINDS, ids, marked, hashes, sorted(KIND_MARKERS)))


async def _restem_rows(conn: Any, rows: list[Any]) -> str:
    """Every row's expansion afresh, with its stems (--stems)."""
    expansions = [annotation_fields(r["content"], r["source"], None, r["created_at"])["expansion"] for r in rows]
    return str(await conn.execute(_EXPANSION, [r["id"] for r in rows], expansions))


async def annotate_all(batch: int, stems: bool = False, kinds: bool = False) -> int:
    if batch < 1:
        sys.stderr.write("memento-admin annotate: --batch must be at least 1\n")
        return 2
    started = time.monotonic()
    pool = await create_pool(cli_settings(), "admin", max_size=1)
    try:
        done = await _in_batches(pool, _UNANNOTATED, batch, _annotate_rows)
        linked = await _in_batches(pool, _UNLINKED, batch, _link_rows)
        restemmed = await _in_batches(pool, _EVERY, batch, _restem_rows) if stems else 0
        marked = await _in_batches(pool, _LINKED, batch, _kind_rows) if kinds else 0
    finally:
        await pool.close()
    sys.stdout.write(f"annotated {done} fragment(s) in {time.monotonic() - started:.1f} s\n")
    sys.stdout.write(f"entities written for {linked} fragment(s)\n")
    if stems:
        sys.stdout.write(f"expansion written afresh for {restemmed} fragment(s)\n")
    if kinds:
        sys.stdout.write(f"kinds marked for {marked} fragment(s)\n")
    return 0
