"""Recall's lexical side stays bounded in a large store: at most `candidates` matches of any term are ranked, and
when that cap is reached the matches of every term are gathered too and come first, so the best matches are not
lost to the cap. Below the cap the ranking is the full one. The trigram side only runs when full text under-serves
an identifier-like query."""

from __future__ import annotations

from memento_memory_api.recall import lexical
from memento_memory_api.uow import Scope, UnitOfWorkFactory


async def _store(owner_pool, tenant: str, rows: list[tuple[str, str]]) -> None:
    await owner_pool.executemany(
        "INSERT INTO agent_memory.fragments (id, tenant_id, workspace, agent_id, content, topic, type, importance,"
        " content_hash, ttl_tier) VALUES ($1, $2, 'default', 'default', $3, 't', 'fact', 0.5, $1, 'warm')",
        [(frag_id, tenant, content) for frag_id, content in rows],
    )


async def test_the_cap_keeps_matches_of_every_term_first(app_pool, owner_pool, tenant):
    # 30 fragments mention only "alpha" and are inserted first (a capped scan meets them first); two mention both
    common = [(f"frag-a{tenant[-6:]}{i:04d}", f"alpha note number {i}") for i in range(30)]
    best = [(f"frag-b{tenant[-6:]}{i:04d}", f"alpha and beta together {i}") for i in range(2)]
    await _store(owner_pool, tenant, common + best)
    async with UnitOfWorkFactory(app_pool)(Scope(tenant, "default", "default")) as uow:
        capped = await lexical.search(uow.conn, "alpha beta", None, 5, candidates=10)
        full = await lexical.search(uow.conn, "alpha beta", None, 5, candidates=1000)
    assert set(capped[:2]) == {frag_id for frag_id, _ in best}, "matches of every term must survive the cap"
    assert len(capped) == 5
    assert set(full[:2]) == {frag_id for frag_id, _ in best}, "below the cap the full ranking puts them first too"


async def test_trigram_is_a_fallback_for_identifiers_full_text_misses(app_pool, owner_pool, tenant):
    await _store(owner_pool, tenant, [(f"frag-t{tenant[-6:]}0001", "the client saw ERR_CONN_RESET twice")])
    async with UnitOfWorkFactory(app_pool)(Scope(tenant, "default", "default")) as uow:
        # full text splits nothing useful out of the partial identifier; trigram similarity finds it
        found = await lexical.search(uow.conn, "ERR_CONN_RESE", None, 5)
        # inside a question, the identifier is what is looked up by trigram (the question's other words would
        # dilute the similarity below the threshold, and their common trigrams made the lookup slow)
        asked = await lexical.search(uow.conn, "why do we keep getting ERR_CONN_RESE errors", None, 5)
    assert found == [f"frag-t{tenant[-6:]}0001"]
    assert asked == [f"frag-t{tenant[-6:]}0001"]


def test_the_trigram_lookup_takes_the_longest_identifier_of_the_query():
    assert lexical._identifier("edit pg_hba.conf or postgresql.conf") == "postgresql.conf"
    assert lexical._identifier("what broke in v2.3.1?") == "v2.3.1"
    assert lexical._identifier("who owns billing-worker") == "billing-worker"
    assert lexical._identifier("steps before a release 2") is None  # plain words and a lone number
    assert lexical._identifier("error 404") is None  # full text already matches "404"


async def test_capped_scans_start_at_the_table_start_so_the_same_question_meets_the_same_candidates(app_pool):
    # a synchronised scan of a large table starts wherever the previous one was: the first N matches would change
    # from call to call (seen at a million fragments), so the services' connections turn it off
    assert await app_pool.fetchval("SHOW synchronize_seqscans") == "off"
