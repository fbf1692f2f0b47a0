"""What keeps searches as fast while the workers digest a burst of writes as once they are idle (issue 46,
migration 0023): every GIN index the searches read merges its pending list early, and the writes every stored
fragment gets afterwards (the evaluator's score, the access flush's counts) change no indexed column, so Postgres
rewrites those rows in place instead of adding an entry to every index of the table."""

from __future__ import annotations

import re

from memento_evaluator.handlers import _WRITE_SQL as EVALUATION
from memento_memory_api.repositories.fragments import TOUCH_SQL

INDEXED_COLUMNS = """
SELECT DISTINCT a.attname FROM pg_index i
JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum > 0
WHERE n.nspname = 'agent_memory' AND t.relname = 'fragments'
  AND (a.attnum = ANY(i.indkey)
       OR pg_get_expr(i.indexprs, i.indrelid) ~ ('\\m' || a.attname || '\\M')
       OR pg_get_expr(i.indpred, i.indrelid) ~ ('\\m' || a.attname || '\\M'))
"""


def assigned(statement: str) -> set[str]:
    """The columns an UPDATE's SET clause writes."""
    clause = re.search(r"\bSET\b(.*?)(?:\bFROM\b|\bWHERE\b)", statement, re.S).group(1)
    return set(re.findall(r"(?:^|,)\s*(\w+)\s*=", clause))


async def test_the_writes_after_a_store_change_no_indexed_column(owner_pool):
    indexed = {r["attname"] for r in await owner_pool.fetch(INDEXED_COLUMNS)}
    assert {"content", "tsv", "tenant_id"} <= indexed  # the query sees the indexes (a check that could fail)
    for name, statement in (("the evaluator's score", EVALUATION), ("the access flush", TOUCH_SQL)):
        written = assigned(statement)
        assert written, name
        assert not written & indexed, f"{name} writes indexed columns {sorted(written & indexed)}: no in-place update"


async def test_every_gin_index_keeps_a_small_pending_list(owner_pool):
    rows = await owner_pool.fetch(
        "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_am am ON am.oid = c.relam"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'agent_memory' AND am.amname = 'gin'"
    )
    assert len(rows) >= 6
    for row in rows:
        options = dict(o.split("=", 1) for o in row["reloptions"] or [])
        limit = int(options.get("gin_pending_list_limit", 4096))  # kB; unset: the server's 4 MB
        assert limit <= 256, f"{row['relname']}: a {limit} kB pending list, which every search scans until merged"


async def test_fragments_leave_room_on_each_page_for_in_place_updates(owner_pool):
    options = await owner_pool.fetchval(
        "SELECT reloptions FROM pg_class WHERE oid = 'agent_memory.fragments'::regclass"
    )
    assert "fillfactor=90" in (options or [])
