"""What seed 000's reference project added since the seed (issue 30), through memory-api's tool route on real
Postgres and Valkey: batch_remember, fragment_history, and recall's filters (minImportance, isAnchor, caseId,
timeRange), asOf, sparse fields, pages with a snapshot cursor, and excludeSeen; each across tenants and agents."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest


async def remember(api, tenant, content, **extra):
    call = extra.pop("call", {})
    args = {"content": content, "topic": extra.pop("topic", "t"), "type": extra.pop("type", "fact"), **extra}
    answer = await api.call("remember", args, tenant=tenant, **call)
    return answer["result"]["id"]


async def recall(api, tenant, **args):
    call = args.pop("call", {})
    answer = await api.call("recall", {"includeLinks": False, **args}, tenant=tenant, **call)
    return answer


def ids(answer) -> list[str]:
    return [f["id"] for f in answer["result"]["fragments"]]


async def count_rows(owner_pool, tenant) -> int:
    return await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE tenant_id = $1", tenant)


# --- batch_remember ---------------------------------------------------------------------------------------------
async def test_a_batch_stores_the_good_entries_names_the_bad_and_stores_a_repeat_once(memory_api, tenant, owner_pool):
    entries = [{"content": f"billing fact number {i}", "topic": "billing", "type": "fact"} for i in range(20)]
    entries[3] = {"content": "no type given", "topic": "billing"}
    entries[7] = {"content": "x", "topic": "billing", "type": "rumour"}
    entries[11] = "not an object"
    entries[15] = {"content": "billing fact number 0", "topic": "billing", "type": "fact"}  # the first one again
    entries[16] = {"content": "bad\x00byte", "topic": "billing", "type": "fact"}
    answer = (await memory_api.call("batch_remember", {"fragments": entries}, tenant=tenant))["result"]
    results = answer["results"]
    assert [r["index"] for r in results] == list(range(20))
    errors = {r["index"]: r["error"] for r in results if r.get("error")}
    assert set(errors) == {3, 7, 11, 16}
    assert errors[3]["field"] == "fragments.3.type" and errors[3]["code"] == "INVALID_PARAMETER"
    assert errors[7]["field"] == "fragments.7.type"
    assert errors[11]["field"] == "fragments.11"
    assert errors[16]["field"] == "fragments.16.content"
    assert results[15]["id"] == results[0]["id"] and results[15]["created"] is False
    assert (answer["created"], answer["duplicates"], answer["failed"]) == (15, 1, 4)
    assert await count_rows(owner_pool, tenant) == 15
    events = await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.outbox WHERE tenant_id = $1 AND event_type = 'fragment.stored'", tenant
    )
    assert events == 15  # one event a stored fragment
    found = await recall(memory_api, tenant, keywords=["billing"], tokenBudget=10_000)
    assert len(ids(found)) == 15


@pytest.mark.parametrize(
    ("arguments", "field"),
    [({"fragments": []}, "fragments"), ({"fragments": [{}] * 201}, "fragments"), ({}, "fragments")],
)
async def test_a_batch_of_none_or_too_many_is_refused_whole(memory_api, tenant, owner_pool, arguments, field):
    answer = await memory_api.call("batch_remember", arguments, tenant=tenant)
    assert answer["error"]["code"] == "INVALID_PARAMETER" and answer["error"]["field"] == field
    assert await count_rows(owner_pool, tenant) == 0


async def test_a_batch_goes_to_the_callers_namespace_only(memory_api, tenant, owner_pool):
    entry = {"content": "agent scoped batch entry", "topic": "t", "type": "fact"}
    await memory_api.call("batch_remember", {"fragments": [entry], "agentId": "alpha"}, tenant=tenant)
    assert await owner_pool.fetchval("SELECT agent_id FROM agent_memory.fragments WHERE tenant_id = $1", tenant) == (
        "alpha"
    )
    other = tenant + "-other"
    assert ids(await recall(memory_api, other, keywords=["agent"])) == []


# --- fragment_history -------------------------------------------------------------------------------------------
async def test_history_of_a_fragment_amended_twice_then_superseded(memory_api, tenant):
    first = await remember(memory_api, tenant, "the api runs on port 8080", keywords=["api", "port"])
    await memory_api.call("amend", {"id": first, "content": "the api runs on port 9090"}, tenant=tenant)
    await memory_api.call("amend", {"id": first, "importance": 0.9, "agentId": "default"}, tenant=tenant)
    replaced = await memory_api.call(
        "amend", {"id": first, "content": "the api runs on port 7070", "supersedes": True}, tenant=tenant
    )
    newest = replaced["result"]["id"]

    history = (await memory_api.call("fragment_history", {"id": first}, tenant=tenant))["result"]
    assert history["current"]["id"] == first
    changes = history["history"]
    assert [c["version"] for c in changes] == [1, 2, 3]
    assert changes[0]["before"]["content"] == "the api runs on port 8080"
    assert changes[0]["after"]["content"] == "the api runs on port 9090"
    assert changes[1]["before"]["importance"] != changes[1]["after"]["importance"] == 0.9
    assert changes[1]["after"] == changes[2]["before"]  # each amend starts from where the last one left it
    assert changes[2]["after"]["content"] == history["current"]["content"]  # the original keeps its text
    assert all(c["amended_by"] == "default" for c in changes)
    assert history["supersededBy"] == [newest] and history["supersedes"] == []

    of_newest = (await memory_api.call("fragment_history", {"id": newest}, tenant=tenant))["result"]
    assert of_newest["supersedes"] == [first] and of_newest["supersededBy"] == [] and of_newest["history"] == []


async def test_history_of_an_unknown_or_invisible_fragment_is_not_found(memory_api, tenant):
    mine = await remember(memory_api, tenant, "private history", call={"agents": ("alpha",)}, agentId="alpha")
    for caller, fragment_id in ((tenant + "-x", mine), (tenant, "no-such-id")):
        answer = await memory_api.call("fragment_history", {"id": fragment_id}, tenant=caller)
        assert answer["error"]["code"] == "MEMORY_NOT_FOUND"
    answer = await memory_api.call("fragment_history", {"id": mine, "agentId": "beta"}, tenant=tenant, agents=("beta",))
    assert answer["error"]["code"] == "MEMORY_NOT_FOUND"
    answer = await memory_api.call("fragment_history", {"id": mine, "agentId": "alpha"}, tenant=tenant, workspace="w2")
    assert answer["error"]["code"] == "MEMORY_NOT_FOUND"


# --- recall's filters ---------------------------------------------------------------------------------------------
async def test_min_importance_anchor_and_case_filters_apply_to_keywords_text_and_newest(memory_api, tenant):
    low = await remember(memory_api, tenant, "cache warmup script is slow", keywords=["cache"], importance=0.2)
    high = await remember(
        memory_api, tenant, "cache keys expire after ten minutes", keywords=["cache"], importance=0.9, caseId="c-1"
    )
    anchor = await remember(memory_api, tenant, "cache cluster lives in eu-west", keywords=["cache"], isAnchor=True)
    for how in ({"keywords": ["cache"]}, {"text": "cache"}, {}):
        assert set(ids(await recall(memory_api, tenant, minImportance=0.8, **how))) == {high}
        assert set(ids(await recall(memory_api, tenant, isAnchor=True, **how))) == {anchor}
        assert set(ids(await recall(memory_api, tenant, isAnchor=False, **how))) == {low, high}
        case = await recall(memory_api, tenant, caseId="c-1", **how)
        assert ids(case) == [high] and case["result"]["fragments"][0]["caseId"] == "c-1"


async def test_time_range_in_both_languages_on_crafted_timestamps(memory_api, tenant, owner_pool):
    now = datetime.now(UTC)
    ages = {"today": 0, "two days ago": 2, "ten days ago": 10, "sixty days ago": 60}
    made = {}
    for label, days in ages.items():
        made[label] = await remember(memory_api, tenant, f"deploy note from {label}", keywords=["deploy"])
        await owner_pool.execute(
            "UPDATE agent_memory.fragments SET created_at = $2 WHERE id = $1", made[label], now - timedelta(days=days)
        )

    async def within(**time_range) -> set[str]:
        return set(ids(await recall(memory_api, tenant, keywords=["deploy"], timeRange=time_range)))

    assert await within(**{"from": "3 days ago"}) == {made["today"], made["two days ago"]}
    assert await within(**{"from": "3일 전"}) == {made["today"], made["two days ago"]}
    assert await within(to="어제") == {made["two days ago"], made["ten days ago"], made["sixty days ago"]}
    month_ago = (now - timedelta(days=30)).date().isoformat()
    assert await within(**{"from": month_ago, "to": "yesterday"}) == {made["two days ago"], made["ten days ago"]}
    for bad, field in (({"from": "whenever"}, "timeRange.from"), ({"from": "today", "to": "last year"}, "timeRange")):
        answer = await memory_api.call("recall", {"keywords": ["deploy"], "timeRange": bad}, tenant=tenant)
        assert answer["error"]["code"] == "INVALID_PARAMETER" and answer["error"]["field"] == field


async def test_as_of_gives_the_content_of_then_and_nothing_newer(memory_api, tenant, owner_pool):
    old = await remember(memory_api, tenant, "the queue is rabbitmq", keywords=["queue"])
    await owner_pool.execute(
        "UPDATE agent_memory.fragments SET created_at = now() - interval '2 days' WHERE id = $1", old
    )
    await memory_api.call("amend", {"id": old, "content": "the queue is kafka", "keywords": ["queue"]}, tenant=tenant)
    await owner_pool.execute(
        "UPDATE agent_memory.fragment_versions SET amended_at = now() - interval '1 day' WHERE fragment_id = $1", old
    )
    newer = await remember(memory_api, tenant, "the queue has three partitions", keywords=["queue"])
    await owner_pool.execute(
        "UPDATE agent_memory.fragments SET created_at = now() - interval '12 hours' WHERE id = $1", newer
    )
    before_amend = (datetime.now(UTC) - timedelta(days=1, hours=6)).isoformat()
    then = await recall(memory_api, tenant, keywords=["queue"], asOf=before_amend)
    assert [(f["id"], f["content"]) for f in then["result"]["fragments"]] == [(old, "the queue is rabbitmq")]
    later = (datetime.now(UTC) - timedelta(hours=18)).isoformat()
    assert [
        f["content"] for f in (await recall(memory_api, tenant, keywords=["queue"], asOf=later))["result"]["fragments"]
    ] == ["the queue is kafka"]
    assert set(ids(await recall(memory_api, tenant, keywords=["queue"]))) == {old, newer}
    bad = await memory_api.call("recall", {"keywords": ["queue"], "asOf": "last tuesday"}, tenant=tenant)
    assert bad["error"]["field"] == "asOf"


async def test_as_of_before_a_supersede_shows_the_original_and_not_its_replacement(memory_api, tenant, owner_pool):
    first = await remember(memory_api, tenant, "the region is us-east-1", keywords=["region"])
    await owner_pool.execute(
        "UPDATE agent_memory.fragments SET created_at = now() - interval '2 days' WHERE id = $1", first
    )
    replaced = await memory_api.call(
        "amend",
        {"id": first, "content": "the region is eu-west-1", "keywords": ["region"], "supersedes": True},
        tenant=tenant,
    )
    now_ids = ids(await recall(memory_api, tenant, keywords=["region"]))
    assert now_ids == [replaced["result"]["id"]]  # superseded ones leave recall
    yesterday = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    assert ids(await recall(memory_api, tenant, keywords=["region"], asOf=yesterday)) == [first]


async def test_fields_narrow_each_fragment_to_what_was_asked(memory_api, tenant):
    await remember(memory_api, tenant, "sparse fields please", keywords=["sparse"])
    answer = await recall(memory_api, tenant, keywords=["sparse"], fields=["content", "importance"])
    assert [set(f) for f in answer["result"]["fragments"]] == [{"id", "content", "importance"}]
    bad = await memory_api.call("recall", {"keywords": ["sparse"], "fields": ["password"]}, tenant=tenant)
    assert bad["error"]["field"] == "fields.0"


# --- pages --------------------------------------------------------------------------------------------------------
def note(content: str) -> dict:
    return {"content": content, "topic": "pg", "type": "fact", "keywords": ["paging"]}


async def test_pages_follow_the_first_snapshot_while_others_write(memory_api, tenant):
    entries = [note(f"paging note {i:03d}") for i in range(120)]
    await memory_api.call("batch_remember", {"fragments": entries}, tenant=tenant)
    seen: list[str] = []
    late: set[str] = set()
    answer = await recall(memory_api, tenant, keywords=["paging"], pageSize=50, tokenBudget=100_000)
    pages = 0
    while True:
        pages += 1
        seen += ids(answer)
        # writes between pages: new matches never enter this walk, nor shift it
        extra = [note(f"late paging note {pages}-{i}") for i in range(10)]
        written = await memory_api.call("batch_remember", {"fragments": extra}, tenant=tenant)
        late |= {r["id"] for r in written["result"]["results"]}
        cursor = answer["result"].get("nextCursor")
        if cursor is None:
            break
        answer = await recall(memory_api, tenant, cursor=cursor)
    assert pages == 3 and len(seen) == 120 and len(set(seen)) == 120
    assert not late & set(seen)
    assert len(ids(await recall(memory_api, tenant, keywords=["paging"], pageSize=50))) == 50  # a new walk sees them


async def test_a_cursor_is_refused_to_another_principal_and_when_it_is_not_one(memory_api, tenant):
    entries = [{"content": f"cursor note {i}", "topic": "c", "type": "fact", "keywords": ["cursor"]} for i in range(5)]
    await memory_api.call("batch_remember", {"fragments": entries}, tenant=tenant)
    first = await recall(memory_api, tenant, keywords=["cursor"], pageSize=2)
    cursor = first["result"]["nextCursor"]
    for caller, agent in (
        ({"tenant": tenant + "-b"}, "default"),
        ({"tenant": tenant, "agents": ("beta",)}, "beta"),
        ({"tenant": tenant, "workspace": "w2"}, "default"),
    ):
        refused = await memory_api.call("recall", {"cursor": cursor, "agentId": agent}, **caller)
        assert refused["error"]["code"] == "INVALID_PARAMETER" and refused["error"]["field"] == "cursor"
    mine = await recall(memory_api, tenant, cursor=cursor)
    assert len(ids(mine)) == 2 and not set(ids(mine)) & set(ids(first))
    garbage = await memory_api.call("recall", {"cursor": "not-a-cursor"}, tenant=tenant)
    assert garbage["error"]["field"] == "cursor"


# --- excludeSeen ----------------------------------------------------------------------------------------------------
async def test_exclude_seen_leaves_out_what_context_loaded_in_this_session(memory_api, tenant):
    pref = await remember(memory_api, tenant, "prefers short answers", type="preference", keywords=["style"])
    fact = await remember(memory_api, tenant, "style guide is in the wiki", keywords=["style"])
    session = {"session_id": "sess-" + tenant}
    loaded = await memory_api.call("context", {}, tenant=tenant, **session)
    assert pref in [f["id"] for f in loaded["result"]["coreMemory"]]
    assert set(ids(await recall(memory_api, tenant, keywords=["style"], excludeSeen=True, call=session))) == {fact}
    assert set(ids(await recall(memory_api, tenant, keywords=["style"], call=session))) == {pref, fact}
    other = {"session_id": "other-" + tenant}
    assert set(ids(await recall(memory_api, tenant, keywords=["style"], excludeSeen=True, call=other))) == {pref, fact}


async def test_as_of_leaves_out_links_made_to_later_fragments_and_refuses_instants_past_the_calendar(
    memory_api, tenant, owner_pool
):
    old = await remember(memory_api, tenant, "the broker is rabbitmq", keywords=["broker"])
    await owner_pool.execute(
        "UPDATE agent_memory.fragments SET created_at = now() - interval '2 days' WHERE id = $1", old
    )
    await remember(memory_api, tenant, "the broker moved to a new host today", linkedTo=[old])
    yesterday = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    then = await memory_api.call(
        "recall", {"keywords": ["broker"], "asOf": yesterday, "includeLinks": True}, tenant=tenant
    )
    assert [f["id"] for f in then["result"]["fragments"]] == [old]  # the later fragment is not there as a link
    for instant in ("9999-12-31T23:59:59.999999", "0001-01-01T00:00:00+05:00"):
        bad = await memory_api.call("recall", {"keywords": ["broker"], "asOf": instant}, tenant=tenant)
        assert bad["error"]["code"] == "INVALID_PARAMETER" and bad["error"]["field"] == "asOf"


async def test_a_principal_keeps_a_bounded_number_of_page_snapshots(memory_api, tenant):
    from memento_memory_api.recall.pages import MAX_OPEN

    await memory_api.call("batch_remember", {"fragments": [note(f"bounded note {i}") for i in range(3)]}, tenant=tenant)
    cursors = []
    for _ in range(MAX_OPEN + 1):
        cursors.append((await recall(memory_api, tenant, keywords=["paging"], pageSize=1))["result"]["nextCursor"])
    oldest = await memory_api.call("recall", {"cursor": cursors[0]}, tenant=tenant)
    assert oldest["error"]["field"] == "cursor"  # dropped when the 21st opened
    for cursor in cursors[1:]:
        assert len(ids(await recall(memory_api, tenant, cursor=cursor))) == 1
