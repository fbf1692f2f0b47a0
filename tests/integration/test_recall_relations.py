"""Before/after questions (issue 53 item 2; text.relations, recall.timeline) on real Postgres with pgvector, through
`recall`: the rows on the asked side of the anchor's stored time come before those on the wrong side, which the
words and the vectors alone rank higher, and the best row stays first."""

from __future__ import annotations

from tests.integration.test_recall_filters import Store, memory_api_with

QUESTION = "What did Caroline paint after the adoption meeting?"
ASKING = {"text": QUESTION, "includeLinks": False, "tokenBudget": 100_000}


async def _ranked(servers, owner_pool, tenant: str, **env: str) -> tuple[list[str], dict[str, str]]:
    """Caroline's turns over two months, each dated by its header (the time it was said): the meeting, two paintings
    before it nearer the question, two after it further from it. One best row is kept in place (RECALL_HOP_KEEP; the
    default three would be half of these six)."""
    async with memory_api_with(servers, query=QUESTION, RECALL_HOP_KEEP="1", **env) as api:
        store = Store(api, owner_pool, tenant)
        turns = {
            "meeting": ("8 May", "The adoption meeting went well today, I'm so relieved", 0.9),
            "lake": ("2 May", "I painted a lake at sunrise, it calmed me", 0.7),
            "horse": ("1 May", "I painted a horse for my friend", 0.65),
            "sunset": ("20 June", "I painted a sunset with the kids", 0.35),
            "mural": ("1 July", "I painted a mural at the community center", 0.3),
            "chat": ("3 May", "We talked for hours about music", 0.2),
        }
        ids = {
            name: await store.remember(f"Caroline (1:56 pm on {day}, 2023): {text}", "chat", cosine=cosine)
            for name, (day, text, cosine) in turns.items()
        }
        body = await api.call("recall", ASKING, tenant=tenant)
    return [f["id"] for f in body["result"]["fragments"]], ids


async def test_the_paintings_after_the_meeting_come_before_those_before_it(servers, owner_pool, tenant):
    found, ids = await _ranked(servers, owner_pool, tenant)
    assert found[0] == ids["meeting"]
    assert max(found.index(ids["sunset"]), found.index(ids["mural"])) < min(
        found.index(ids["lake"]), found.index(ids["horse"])
    )


async def test_off_the_words_and_vectors_put_the_earlier_paintings_first(servers, owner_pool, tenant):
    found, ids = await _ranked(servers, owner_pool, tenant, RECALL_RELATION="0")
    assert found[0] == ids["meeting"]
    assert max(found.index(ids["lake"]), found.index(ids["horse"])) < min(
        found.index(ids["sunset"]), found.index(ids["mural"])
    )


async def test_the_three_best_rows_keep_their_places_by_default(servers, owner_pool, tenant):
    async with memory_api_with(servers, query=QUESTION) as api:
        store = Store(api, owner_pool, tenant)
        for day, text, cosine in [
            ("8 May", "The adoption meeting went well today", 0.9),
            ("2 May", "I painted a lake at sunrise", 0.7),
            ("1 May", "I painted a horse for my friend", 0.65),
            ("20 June", "I painted a sunset with the kids", 0.35),
        ]:
            await store.remember(f"Caroline (1:56 pm on {day}, 2023): {text}", "chat", cosine=cosine)
        on = await api.call("recall", ASKING, tenant=tenant)
    async with memory_api_with(servers, query=QUESTION, RECALL_RELATION="0") as api:
        off = await api.call("recall", ASKING, tenant=tenant)  # the same memories
    assert [f["id"] for f in on["result"]["fragments"]][:3] == [f["id"] for f in off["result"]["fragments"]][:3]
