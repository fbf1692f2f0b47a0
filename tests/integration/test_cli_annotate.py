"""`memento-admin annotate` (issue 28): fragments stored before migration 0019 get what a write records today, from
their own source and creation time; a fragment an MCP session placed keeps its place; a second run writes nothing,
and neither run touches content or `updated_at` (the evaluator would score it again)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from tests.integration.test_cli_support import memento, system_env
from tests.integration.test_recall_relevance import SAID, remember

COLUMNS = "thread, seq, event_from, event_to, event_said, expansion, entities, content, created_at, updated_at"


async def test_annotate_gives_old_fragments_their_place_time_and_names(memory_api, servers, owner_pool, tenant):
    turn = await remember(memory_api, tenant, f"Caroline {SAID}: I went to the support group yesterday", "D9:4")
    undated = await remember(memory_api, tenant, "Deploys freeze on Fridays after noon", "runbook")
    placed = await remember(memory_api, tenant, "Melanie paints on Sundays", "notes")
    written = {r["id"]: r for r in await owner_pool.fetch(
        f"SELECT id, {COLUMNS} FROM agent_memory.fragments WHERE id = ANY($1)", [turn, undated, placed])}  # fmt: skip
    # as a fragment stored before 0019 was: none of its columns; the third as an MCP session placed it since
    await owner_pool.execute(
        "UPDATE agent_memory.fragments SET thread = NULL, seq = NULL, event_from = NULL, event_to = NULL,"
        " event_said = NULL, expansion = NULL, entities = NULL WHERE id = ANY($1)",
        [turn, undated, placed],
    )
    await owner_pool.execute("UPDATE agent_memory.fragments SET thread = 'session-1', seq = 7 WHERE id = $1", placed)
    old = {r["id"]: r for r in await owner_pool.fetch(
        f"SELECT id, {COLUMNS} FROM agent_memory.fragments WHERE id = ANY($1)", [turn, undated, placed])}  # fmt: skip

    ran = await memento(system_env(servers), "admin", "annotate", "--batch", "2")
    assert ran.code == 0, ran.err
    assert re.fullmatch(r"annotated \d+ fragment\(s\) in [\d.]+ s\nentities written for \d+ fragment\(s\)\n", ran.out)
    now = {r["id"]: r for r in await owner_pool.fetch(
        f"SELECT id, {COLUMNS} FROM agent_memory.fragments WHERE id = ANY($1)", [turn, undated, placed])}  # fmt: skip

    assert (now[turn]["thread"], now[turn]["seq"]) == ("D9", 4)  # from its source, as a write places it
    assert now[turn]["event_said"] == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # its header's moment
    assert (now[turn]["event_from"], now[turn]["event_to"]) == (written[turn]["event_from"], written[turn]["event_to"])
    assert now[turn]["expansion"] == written[turn]["expansion"] and "caroline" in now[turn]["expansion"].split()
    assert now[undated]["thread"] is None  # "runbook" names no place
    assert now[undated]["event_said"] == now[undated]["created_at"]  # no header: said when it was stored
    assert (now[placed]["thread"], now[placed]["seq"]) == ("session-1", 7)  # its session's place stays
    assert now[placed]["expansion"] == written[placed]["expansion"] == "sundays melani paint sunday"  # then stems
    for i in (turn, undated, placed):  # the entities a write gives it (issue 53), an empty list when it names none
        assert now[i]["entities"] == written[i]["entities"]
    assert now[turn]["entities"] == ["s:caroline"] and now[undated]["entities"] == []
    for i in (turn, undated, placed):
        assert (now[i]["content"], now[i]["updated_at"]) == (old[i]["content"], old[i]["updated_at"])

    again = await memento(system_env(servers), "admin", "annotate")
    assert again.code == 0, again.err
    after = {r["id"]: r for r in await owner_pool.fetch(
        f"SELECT id, {COLUMNS} FROM agent_memory.fragments WHERE id = ANY($1)", [turn, undated, placed])}  # fmt: skip
    assert after == now


async def test_annotate_stems_writes_the_expansion_of_fragments_stored_before_stems(
    memory_api, servers, owner_pool, tenant
):
    old = await remember(memory_api, tenant, "We went camping by the lake", "notes")
    fresh = await remember(memory_api, tenant, "The paintings dried overnight", "notes")
    await owner_pool.execute("UPDATE agent_memory.fragments SET expansion = NULL WHERE id = $1", old)  # before 53
    written = await owner_pool.fetchval("SELECT expansion FROM agent_memory.fragments WHERE id = $1", fresh)
    asked = {"text": "Where did they camp?", "includeLinks": False}
    found = await memory_api.call("recall", asked, tenant=tenant)
    assert old not in [f["id"] for f in found["result"]["fragments"]]  # "camp" is not a word it holds

    ran = await memento(system_env(servers), "admin", "annotate", "--stems")
    assert ran.code == 0, ran.err
    assert re.search(r"expansion written afresh for [1-9]\d* fragment\(s\)", ran.out)
    rows = {r["id"]: r["expansion"] for r in await owner_pool.fetch(
        "SELECT id, expansion FROM agent_memory.fragments WHERE id = ANY($1)", [old, fresh])}  # fmt: skip
    assert "camp" in rows[old].split() and rows[fresh] == written  # the fresh one already had its stems
    found = await memory_api.call("recall", asked, tenant=tenant)
    assert found["result"]["fragments"][0]["id"] == old

    again = await memento(system_env(servers), "admin", "annotate", "--stems")
    assert "expansion written afresh for 0 fragment(s)" in again.out


async def test_annotate_gives_fragments_stored_before_0025_their_entities(memory_api, servers, owner_pool, tenant):
    trip = await remember(memory_api, tenant, f"Jon {SAID}: Took a short trip last week to Rome with Gina", "D2:1")
    await owner_pool.execute("UPDATE agent_memory.fragments SET entities = NULL WHERE id = $1", trip)  # before 0025
    updated = await owner_pool.fetchval("SELECT updated_at FROM agent_memory.fragments WHERE id = $1", trip)

    ran = await memento(system_env(servers), "admin", "annotate")
    assert ran.code == 0, ran.err
    assert re.search(r"entities written for [1-9]\d* fragment\(s\)", ran.out)
    row = await owner_pool.fetchrow("SELECT entities, updated_at FROM agent_memory.fragments WHERE id = $1", trip)
    assert row["entities"] == ["=named", "=place", "n:gina", "p:rome", "s:jon"] and row["updated_at"] == updated

    again = await memento(system_env(servers), "admin", "annotate")
    assert "entities written for 0 fragment(s)" in again.out


async def test_annotate_kinds_marks_fragments_written_before_the_word_kinds(memory_api, servers, owner_pool, tenant):
    swim = await remember(memory_api, tenant, f"Mel {SAID}: I'm off to go swimming with the kids", "D3:1")
    plain = await remember(memory_api, tenant, f"Mel {SAID}: Thanks, that means a lot", "D3:2")
    assert await owner_pool.fetchval("SELECT entities FROM agent_memory.fragments WHERE id = $1", swim) == [
        "=activity",
        "s:mel",
    ]  # written so since
    await owner_pool.execute("UPDATE agent_memory.fragments SET entities = '{s:mel}' WHERE id = ANY($1)", [swim, plain])

    ran = await memento(system_env(servers), "admin", "annotate", "--kinds")
    assert ran.code == 0, ran.err
    assert re.search(r"kinds marked for [1-9]\d* fragment\(s\)", ran.out)
    rows = {r["id"]: r["entities"] for r in await owner_pool.fetch(
        "SELECT id, entities FROM agent_memory.fragments WHERE id = ANY($1)", [swim, plain])}  # fmt: skip
    assert rows == {swim: ["=activity", "s:mel"], plain: ["s:mel"]}

    again = await memento(system_env(servers), "admin", "annotate", "--kinds")
    assert "kinds marked for 0 fragment(s)" in again.out


async def test_annotate_kinds_takes_away_a_marker_the_word_lists_no_longer_give(
    memory_api, servers, owner_pool, tenant
):
    """A row marked before the software words left the lists ("race condition" was an `=event`) loses the marker;
    its other entities stay."""
    race = await remember(memory_api, tenant, f"Mel {SAID}: the race condition in the scheduler is fixed", "D4:1")
    swim = await remember(memory_api, tenant, f"Mel {SAID}: I went swimming after the release", "D4:2")
    await owner_pool.execute(
        "UPDATE agent_memory.fragments SET entities = entities || '{=event}' WHERE id = ANY($1)", [race, swim]
    )

    ran = await memento(system_env(servers), "admin", "annotate", "--kinds")
    assert ran.code == 0, ran.err
    rows = {r["id"]: r["entities"] for r in await owner_pool.fetch(
        "SELECT id, entities FROM agent_memory.fragments WHERE id = ANY($1)", [race, swim])}  # fmt: skip
    assert "=event" not in rows[race] and "s:mel" in rows[race]
    assert "=event" not in rows[swim] and "=activity" in rows[swim]


async def test_annotate_refuses_a_batch_below_one(servers):
    ran = await memento(system_env(servers), "admin", "annotate", "--batch", "0")
    assert ran.code == 2 and "--batch" in ran.err
