"""memory.search's neighbour lift (issue 28 item 8, recall.documents.lift) on real Postgres: with
DOCUMENT_NEIGHBOUR_LIFT on, the chunks beside the best hits join the results (read by key, though no list found them)
at the lift's share of their hit's score, below every direct hit that scores more; with it at 0, the results are the
lists' alone."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from memento_memory_api.recall.documents import Weights, lift
from memento_memory_api.settings import MemoryApiSettings as Settings
from tests.fixtures.apps import memory_api_on

# "zorblax" is in two sections of two documents: twice in a short one (the best hit), once in a long one (the second)
RUNBOOK = """# Runbook

Steps for the nightly jobs.

## Symptom

The zorblax queue stalls: zorblax backlog grows.

## Fix

Restart the worker and drain the backlog.

## Notes

Nothing else here.
"""
GLOSSARY = """# Glossary

Terms the operators use.

## Queues

Every queue has an owner, a retention period, a dead-letter target and an alert threshold; the zorblax one is the
oldest, kept for the billing exports that still read it on the first day of every month.

## Workers

Workers pull jobs in order.
"""


def settings(servers, **extra: str) -> Settings:
    # no embedder answers at port 1: the semantic list stays empty, so the lexical list alone orders the hits
    return servers.settings(EMBEDDER_URL="http://127.0.0.1:1", **extra)


async def search(servers, tenant: str, query: str, **extra: str) -> list[tuple[str, str, float]]:
    async with memory_api_on(settings(servers, **extra)) as api:
        answer = await api.call("memory.search", {"query": query}, tenant=tenant)
    return [(hit["title"], hit["sectionAnchor"], hit["score"]) for hit in answer["result"]["results"]]


@pytest.fixture
async def stored(servers, tenant) -> str:
    async with memory_api_on(settings(servers)) as api:
        for key, title, content in (("runbook", "Runbook", RUNBOOK), ("glossary", "Glossary", GLOSSARY)):
            args = {"canonicalKey": key, "docClass": "app_spec", "title": title, "contentMarkdown": content}
            answer = await api.call("canonical.upsert", args | {"idempotencyKey": str(uuid.uuid4())}, tenant=tenant)
            assert answer["result"]["created"] is True
    return tenant


async def test_off_the_results_are_the_lists_hits_alone(servers, stored):
    found = await search(servers, stored, "zorblax", DOCUMENT_NEIGHBOUR_LIFT="0")
    assert [(title, anchor) for title, anchor, _ in found] == [
        ("Runbook", "h2:runbook.symptom"),
        ("Glossary", "h2:glossary.queues"),
    ]


async def test_on_the_chunks_beside_the_best_hits_join_below_the_direct_hits(servers, stored):
    off = await search(servers, stored, "zorblax", DOCUMENT_NEIGHBOUR_LIFT="0")
    on = await search(servers, stored, "zorblax", DOCUMENT_NEIGHBOUR_LIFT="0.5", DOCUMENT_NEIGHBOUR_TOP="5")
    (_, _, best), (_, _, second) = off
    assert on[:2] == off  # the direct hits keep their places and scores
    lifted = {(title, anchor): score for title, anchor, score in on[2:]}
    assert lifted == pytest.approx(
        {
            ("Runbook", "h1:runbook"): best * 0.5,  # chunk 0, before the best hit
            ("Runbook", "h2:runbook.fix"): best * 0.5,  # chunk 2, after it: the answer to the symptom
            ("Glossary", "h1:glossary"): second * 0.5,
            ("Glossary", "h2:glossary.workers"): second * 0.5,
        },
        abs=2e-6,  # scores are rounded to 6 places
    )
    assert ("Runbook", "h2:runbook.notes") not in lifted  # two chunks away from any hit
    # only the best chunk lifts when the top is 1: the second hit's neighbours stay out
    top1 = await search(servers, stored, "zorblax", DOCUMENT_NEIGHBOUR_LIFT="0.5", DOCUMENT_NEIGHBOUR_TOP="1")
    assert {anchor for _, anchor, _ in top1} == {
        "h2:runbook.symptom",
        "h2:glossary.queues",
        "h1:runbook",
        "h2:runbook.fix",
    }


def test_lift_keeps_a_hit_ahead_of_the_neighbour_it_lifts_and_reads_only_present_chunks():
    weights = Weights(k=10, lexical=1, semantic=1, trigram=0, canonical_boost=0, coverage_power=0, lift=0.7, lift_top=1)
    fused = [(("d", 1, 0), 0.2), (("e", 1, 4), 0.1), (("d", 1, 1), 0.05)]
    after = lift(fused, {("d", 1, 0), ("d", 1, 1), ("e", 1, 4)}, weights)  # ("d", 1, -1) names no chunk
    assert after == [(("d", 1, 0), 0.2), (("d", 1, 1), pytest.approx(0.14)), (("e", 1, 4), 0.1)]
    # a neighbour already scoring more than its share keeps its own score
    assert dict(lift([(("d", 1, 0), 0.2), (("d", 1, 1), 0.15)], {("d", 1, 1)}, weights))[("d", 1, 1)] == 0.15
    assert lift(fused, {("d", 1, 1)}, Weights(**{**weights.__dict__, "lift": 0.0})) == fused


def test_a_lift_of_one_or_more_is_refused_naming_the_setting():
    with pytest.raises(ValidationError, match="DOCUMENT_NEIGHBOUR_LIFT"):
        Settings(DOCUMENT_NEIGHBOUR_LIFT="1.0")
