"""memory.search's canonical preference (seed 001 "Boosting Canonical Documents", recall.documents.prefer_canonical) on
real Postgres: with the weights tuned on the labelled set, the seed's virtual-rank boost alone leaves a note first
when it says what a canonical document says a little more often; the preference puts the canonical chunk first."""

from __future__ import annotations

import uuid

from tests.fixtures.apps import memory_api_on
from tests.integration.test_documents_neighbour_lift import search, settings

# seed 001's "Boosting Canonical Documents": a spec and a note saying the same thing, the note saying it more often
TOKENS = "# App spec\n\n## Token refresh\n\nAccess tokens are refreshed every 15 minutes.\n"
TOKENS_NOTE = (
    "Token refresh: access tokens are refreshed every 15 minutes. Again: access tokens refreshed every 15 minutes."
)


async def test_a_canonical_chunk_ranks_above_a_note_saying_the_same_thing(servers, tenant):
    async with memory_api_on(settings(servers)) as api:
        spec = {"canonicalKey": "app", "docClass": "app_spec", "title": "App", "contentMarkdown": TOKENS}
        await api.call("canonical.upsert", spec | {"idempotencyKey": str(uuid.uuid4())}, tenant=tenant)
        note = {"kind": "note", "title": "Tokens", "content": TOKENS_NOTE}
        await api.call("memory.commit", {"idempotencyKey": str(uuid.uuid4()), "entries": [note]}, tenant=tenant)
    query = "how often are access tokens refreshed"
    # the premise: with the weights tuned on the labelled set the boost alone leaves the note first
    plain = await search(servers, tenant, query, DOCUMENT_CANONICAL_SAME_WORDS="0")
    assert [title for title, _, _ in plain[:2]] == ["Tokens", "App"]
    preferred = await search(servers, tenant, query)
    assert [(title, anchor) for title, anchor, _ in preferred[:2]] == [
        ("App", "h2:app-spec.token-refresh"),
        ("Tokens", "root"),
    ]
    assert preferred[0][2] == preferred[1][2] == plain[0][2]  # the spec takes the note's place and score
