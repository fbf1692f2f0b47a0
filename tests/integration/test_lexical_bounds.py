"""Recall's lexical side weighs each term by how rarely the caller's matches hold it, and stays bounded in a large
store: at most `candidates` matches of any term are ranked. Past that cap the capped matches are only a sample
(table order), so the best ones are gathered besides it: the matches of every term first, the matches of the
query's rare terms, and the newest matches. The trigram side only runs when full text under-serves an
identifier-like query."""

from __future__ import annotations

from memento_memory_api.recall import lexical
from memento_memory_api.recall.filters import Filters
from memento_memory_api.uow import Scope, UnitOfWorkFactory
from tests.fixtures.rows import store_fragments


async def _store(owner_pool, tenant: str, rows: list[tuple[str, str]], days_old: float = 0, **kind: str) -> None:
    await store_fragments(owner_pool, tenant, [(frag_id, content, []) for frag_id, content in rows], days_old, **kind)


async def test_the_cap_keeps_matches_of_every_term_first(app_pool, owner_pool, tenant):
    # 30 fragments mention only "alpha" and are inserted first (a capped scan meets them first); two mention both
    common = [(f"frag-a{tenant[-6:]}{i:04d}", f"alpha note number {i}") for i in range(30)]
    best = [(f"frag-b{tenant[-6:]}{i:04d}", f"alpha and beta together {i}") for i in range(2)]
    await _store(owner_pool, tenant, common + best)
    async with UnitOfWorkFactory(app_pool)(Scope(tenant, "default", "default")) as uow:
        capped = await lexical.search(uow.conn, "alpha beta", uow.scope, None, 5, candidates=10)
        full = await lexical.search(uow.conn, "alpha beta", uow.scope, None, 5, candidates=1000)
    assert set(capped[:2]) == {frag_id for frag_id, _ in best}, "matches of every term must survive the cap"
    assert len(capped) == 5
    assert set(full[:2]) == {frag_id for frag_id, _ in best}, "below the cap the full ranking puts them first too"


async def test_a_rare_term_outranks_a_common_one(app_pool, owner_pool, tenant):
    # below the cap: the one "zeta" fragment is the oldest, and ts_rank_cd scores every one-term match the same
    rare = f"frag-z{tenant[-6:]}0001"
    await _store(owner_pool, tenant, [(rare, "the zeta incident report")], days_old=10)
    await _store(owner_pool, tenant, [(f"frag-a{tenant[-6:]}{i:04d}", f"alpha note number {i}") for i in range(8)])
    scope = Scope(tenant, "default", "default")
    async with UnitOfWorkFactory(app_pool)(scope) as uow:
        found = await lexical.search(uow.conn, "alpha zeta", scope, None, 5)
    assert found[0] == rare
    assert len(found) == 5


async def test_past_the_cap_the_newest_matches_are_candidates_too(app_pool, owner_pool, tenant):
    # 30 month-old fragments fill the capped sample; the one stored just now comes last in table order
    old = [(f"frag-o{tenant[-6:]}{i:04d}", f"alpha note number {i}") for i in range(30)]
    await _store(owner_pool, tenant, old, days_old=30)
    fresh = f"frag-f{tenant[-6:]}0001"
    await _store(owner_pool, tenant, [(fresh, "alpha note stored just now")])
    scope = Scope(tenant, "default", "default")
    async with UnitOfWorkFactory(app_pool)(scope) as uow:
        admin = await lexical.search(uow.conn, "alpha note", scope, None, 5, candidates=10)
        agent = await lexical.search(uow.conn, "alpha note", scope, ["default", "other"], 5, candidates=10)
    assert admin[0] == fresh, "an admin's search spans every namespace and still meets the newest"
    assert agent[0] == fresh, "an agent's search walks each of its namespaces newest first"


async def test_past_the_cap_a_rare_term_outranks_a_common_one(app_pool, owner_pool, tenant):
    # "alpha" fills the sample; "zeta" is in none of it and only in one older fragment, stored after the sample's
    # rows and older than the newest ones (so neither the sample nor the recent walk holds it)
    await _store(owner_pool, tenant, [(f"frag-a{tenant[-6:]}{i:04d}", f"alpha note number {i}") for i in range(20)], 3)
    rare = f"frag-z{tenant[-6:]}0001"
    await _store(owner_pool, tenant, [(rare, "the zeta incident report")], days_old=10)
    await _store(owner_pool, tenant, [(f"frag-n{tenant[-6:]}{i:04d}", f"alpha fresh note {i}") for i in range(5)])
    scope = Scope(tenant, "default", "default")
    async with UnitOfWorkFactory(app_pool)(scope) as uow:
        capped = await lexical.search(uow.conn, "alpha zeta", scope, None, 5, candidates=10, recent=3)
    assert capped[0] == rare, "the term the sample lacks says most about the question"
    assert len(capped) == 5


async def test_trigram_is_a_fallback_for_identifiers_full_text_misses(app_pool, owner_pool, tenant):
    await _store(owner_pool, tenant, [(f"frag-t{tenant[-6:]}0001", "the client saw ERR_CONN_RESET twice")])
    async with UnitOfWorkFactory(app_pool)(Scope(tenant, "default", "default")) as uow:
        # full text splits nothing useful out of the partial identifier; trigram similarity finds it
        found = await lexical.search(uow.conn, "ERR_CONN_RESE", uow.scope, None, 5)
        # inside a question, the identifier is what is looked up by trigram (the question's other words would
        # dilute the similarity below the threshold, and their common trigrams made the lookup slow)
        asked = await lexical.search(uow.conn, "why do we keep getting ERR_CONN_RESE errors", uow.scope, None, 5)
    assert found == [f"frag-t{tenant[-6:]}0001"]
    assert asked == [f"frag-t{tenant[-6:]}0001"]


def test_the_trigram_lookup_takes_the_longest_identifier_of_the_query():
    assert lexical.identifier_in("edit pg_hba.conf or postgresql.conf") == "postgresql.conf"
    assert lexical.identifier_in("what broke in v2.3.1?") == "v2.3.1"
    assert lexical.identifier_in("who owns billing-worker") == "billing-worker"
    assert lexical.identifier_in("steps before a release 2") is None  # plain words and a lone number
    assert lexical.identifier_in("error 404") is None  # full text already matches "404"


async def test_capped_scans_start_at_the_table_start_so_the_same_question_meets_the_same_candidates(app_pool):
    # a synchronised scan of a large table starts wherever the previous one was: the first N matches would change
    # from call to call (seen at a million fragments), so the services' connections turn it off
    assert await app_pool.fetchval("SHOW synchronize_seqscans") == "off"


async def test_past_the_cap_a_topic_or_type_searches_its_own_matches(app_pool, owner_pool, tenant):
    # 30 matches of topic t fill the capped sample and 5 fresh ones the recent walk; a topic-b fact and a topic-t
    # decision, stored between them, are in neither, so filtering after the search would find nothing
    await _store(owner_pool, tenant, [(f"frag-a{tenant[-6:]}{i:04d}", f"alpha note number {i}") for i in range(30)], 3)
    in_b = f"frag-b{tenant[-6:]}0001"
    await _store(owner_pool, tenant, [(in_b, "alpha note of topic b")], days_old=2, topic="b")
    decision = f"frag-d{tenant[-6:]}0001"
    await _store(owner_pool, tenant, [(decision, "alpha note decided")], days_old=2, ftype="decision")
    await _store(owner_pool, tenant, [(f"frag-n{tenant[-6:]}{i:04d}", f"alpha fresh note {i}") for i in range(5)])
    scope = Scope(tenant, "default", "default")
    async with UnitOfWorkFactory(app_pool)(scope) as uow:
        everything = await lexical.search(uow.conn, "alpha note", scope, None, 5, candidates=10, recent=5)
        by_topic = await lexical.search(
            uow.conn, "alpha note", scope, None, 5, candidates=10, recent=5, filters=Filters(topic="b")
        )
        by_type = await lexical.search(
            uow.conn, "alpha note", scope, ["default"], 5, candidates=10, recent=5, filters=Filters(type="decision")
        )
        neither = await lexical.search(
            uow.conn, "alpha note", scope, None, 5, filters=Filters(topic="b", type="decision")
        )
    assert len(everything) == 5 and not {in_b, decision} & set(everything)
    assert by_topic == [in_b]
    assert by_type == [decision]
    assert neither == []


async def test_a_topic_applies_in_the_newest_matches_too(app_pool, owner_pool, tenant):
    # past the cap the just-stored fragment is found by the recent walk; with a filter, only if it satisfies it
    await _store(owner_pool, tenant, [(f"frag-o{tenant[-6:]}{i:04d}", f"alpha note number {i}") for i in range(30)], 30)
    fresh = f"frag-f{tenant[-6:]}0001"
    await _store(owner_pool, tenant, [(fresh, "alpha note stored just now")], topic="b")
    scope = Scope(tenant, "default", "default")
    async with UnitOfWorkFactory(app_pool)(scope) as uow:
        in_b = await lexical.search(
            uow.conn, "alpha note", scope, ["default"], 5, candidates=10, filters=Filters(topic="b")
        )
        in_t = await lexical.search(
            uow.conn, "alpha note", scope, ["default"], 5, candidates=10, filters=Filters(topic="t")
        )
    assert in_b == [fresh]
    assert len(in_t) == 5 and fresh not in in_t


async def test_the_trigram_fallback_keeps_to_the_topic(app_pool, owner_pool, tenant):
    # eight closer trigram matches of topic t, one further of topic b: filtered afterwards, the five closest leave
    # none of topic b
    await _store(
        owner_pool, tenant, [(f"frag-t{tenant[-6:]}{i:04d}", f"the client saw ERR_CONN_RESET {i}") for i in range(8)]
    )
    in_b = f"frag-b{tenant[-6:]}0001"
    await _store(owner_pool, tenant, [(in_b, "the proxy logged ERR_CONN_RES")], topic="b", ftype="error")
    scope = Scope(tenant, "default", "default")
    async with UnitOfWorkFactory(app_pool)(scope) as uow:
        everything = await lexical.search(uow.conn, "ERR_CONN_RESE", scope, None, 5)
        by_topic = await lexical.search(uow.conn, "ERR_CONN_RESE", scope, None, 5, filters=Filters(topic="b"))
        by_type = await lexical.search(uow.conn, "ERR_CONN_RESE", scope, None, 5, filters=Filters(type="error"))
    assert len(everything) == 5 and in_b not in everything
    assert by_topic == by_type == [in_b]


async def test_rewritten_rows_do_not_change_the_answer(app_pool, owner_pool, tenant):
    # 250 matches: all of them ranked (below the cap), their terms weighed over a 200-row sample. 100 older "alpha"
    # rows are written first, then 150 newer "beta" ones; rewriting the alpha rows (as an access flush rewrites the
    # rows a recall returned) moves them to the end of the table. A sample taken in table order then holds other
    # rows, the terms weigh differently and other rows come first; taken by id, it is the same sample.
    alpha = [(f"frag-a{tenant[-6:]}{i:04d}", f"alpha note number {i}") for i in range(100)]
    beta = [(f"frag-b{tenant[-6:]}{i:04d}", f"beta note number {i}") for i in range(150)]
    await _store(owner_pool, tenant, alpha, days_old=2)
    await _store(owner_pool, tenant, beta, days_old=1)
    scope = Scope(tenant, "default", "default")

    async def ask() -> list[str]:
        async with UnitOfWorkFactory(app_pool)(scope) as uow:
            return await lexical.search(uow.conn, "alpha beta", scope, None, 5)

    before = await ask()
    moved = await owner_pool.fetchval(
        "WITH u AS (UPDATE agent_memory.fragments SET access_count = access_count + 1"
        " WHERE tenant_id = $1 AND id LIKE 'frag-a%' RETURNING ctid) SELECT count(*) FROM u",
        tenant,
    )
    assert moved == 100
    assert await ask() == before
