"""The evaluator: the offline rules as documented, scoring stored fragments once, and Gemini through the real
google-genai client against a loopback server speaking generateContent: success, 429 with Retry-After, 500 then
success, persistent failure to a dead letter and its replay, and the per-provider concurrency cap and rate."""

from __future__ import annotations

import contextlib
import email.utils
import time

import pytest

from memento_evaluator import service
from memento_evaluator.handlers import HANDLERS, evaluate_fragment
from memento_evaluator.scorers import Fragment, Score
from memento_evaluator.scorers.offline import (
    NOVELTY_PLAN,
    NOVELTY_SQL,
    OfflineScorer,
    actionability,
    quality,
    specificity,
)
from memento_shared.db.rls import system_transaction
from memento_shared.worker import close_runtime, open_runtime
from tests.fixtures.loopback.gemini import gemini_server
from tests.fixtures.waiting import eventually
from tests.workers.conftest import admin_cli, hosted_worker, running_relay, store_fragments

SPECIFIC = "Run `make migrate` before deploying v2.3 to prod-eu: migration 0042 locks the users table for 40s"
VAGUE = "some stuff happened with the thing, maybe"


def test_offline_rules_are_the_documented_ones():
    assert actionability("Always pin numpy below 2.0 because the ABI changed", "procedure") == pytest.approx(1.0)
    assert actionability("The office has a plant", "fact") == pytest.approx(0.2)
    assert actionability("You must rotate the key", "fact") == pytest.approx(0.4)
    assert specificity("ok") == 0.0
    assert specificity(VAGUE) == 0.0, "vague words cost more than the few words earn"
    assert specificity(SPECIFIC) == pytest.approx(1.0)
    scored = quality(SPECIFIC, "procedure", novelty=1.0)
    assert scored.quality == pytest.approx(0.35 * 1.0 + 0.35 * scored.parts["actionability"] + 0.30 * 1.0, abs=1e-3)
    assert quality(SPECIFIC, "procedure", 1.0) == scored, "deterministic"
    assert quality(VAGUE, "fact", 1.0).quality < scored.quality


async def _scores(owner, ids: list[str]) -> dict[str, dict]:
    rows = await owner.fetch(
        "SELECT id, quality_score, utility_score, verified_at, created_at, agent_memory.utility_score(quality_score,"
        " importance, access_count, coalesce(accessed_at, created_at), 30) AS expected_utility"
        " FROM agent_memory.fragments WHERE id = ANY($1)",
        ids,
    )
    return {r["id"]: dict(r) for r in rows}


async def _judged(owner, ids: list[str]) -> bool:
    return all(r["quality_score"] is not None for r in (await _scores(owner, ids)).values())


async def test_offline_evaluator_scores_stored_fragments_once(wenv, tenant):
    settings = wenv.settings()
    async with (
        hosted_worker("evaluator", HANDLERS, settings, setup=service.setup, teardown=service.teardown) as host,
        running_relay(settings),
    ):
        specific = await store_fragments(wenv.app, tenant, [SPECIFIC], kind="procedure")
        vague = await store_fragments(wenv.app, tenant, [VAGUE])
        await eventually(lambda: _judged(wenv.owner, specific + vague), 20, "both fragments to be scored")
        near_copy = await store_fragments(wenv.app, tenant, [SPECIFIC.replace("40s", "41s")], kind="procedure")
        await eventually(lambda: _judged(wenv.owner, near_copy), 20, "the near copy to be scored")
        scores = await _scores(wenv.owner, specific + vague + near_copy)
        first, dull, copy = scores[specific[0]], scores[vague[0]], scores[near_copy[0]]
        assert first["quality_score"] > dull["quality_score"]
        assert copy["quality_score"] < first["quality_score"], "a near copy of what is stored is less novel"
        for row in scores.values():
            assert row["utility_score"] == pytest.approx(row["expected_utility"])
            assert row["verified_at"] >= row["created_at"]

        event = {"payload": {"fragment_id": specific[0]}, "event_type": "fragment.stored"}
        await evaluate_fragment(event, host.rt)  # a re-delivered event
        again = await _scores(wenv.owner, specific)
        assert again[specific[0]]["verified_at"] == first["verified_at"], "judged once per content"


async def test_novelty_keeps_one_plan_that_walks_the_scope_index(wenv, tenant):
    """Planned once per connection (a custom plan per write cost more than the statement ran, issue 50), and that
    plan still reads the newest rows through the scope index: no scan and sort of the writer's whole namespace."""
    async with wenv.app.acquire() as conn, system_transaction(conn):
        await conn.execute(NOVELTY_PLAN)
        await conn.execute(f"PREPARE novelty(text, text, text, text, text, int) AS {NOVELTY_SQL}")
        args = ", ".join(f"'{a}'" for a in ("deploy notes", tenant, "default", "agent-1", "frag-x"))
        rows = await conn.fetch(f"EXPLAIN EXECUTE novelty({args}, 50)")
        await conn.execute("DEALLOCATE novelty")
    plan = "\n".join(r[0] for r in rows)
    assert "$2" in plan, f"a generic plan names its parameters: {plan}"
    assert "fragments_scope_idx" in plan and "Seq Scan" not in plan and "Sort" not in plan, plan


def _gemini_settings(wenv, server, **extra):
    return wenv.settings(GEMINI_API_KEY="test-gemini-key", GEMINI_BASE_URL=server.url, **extra)


async def test_gemini_scores_through_google_genai(wenv, tenant):
    with gemini_server() as server:
        settings = _gemini_settings(wenv, server, GEMINI_MODEL="gemini-2.5-flash")
        async with (
            hosted_worker("evaluator", HANDLERS, settings, setup=service.setup, teardown=service.teardown),
            running_relay(settings),
        ):
            ids = await store_fragments(wenv.app, tenant, [SPECIFIC])
            await eventually(lambda: _judged(wenv.owner, ids), 20, "Gemini's score to be written")
    assert (await _scores(wenv.owner, ids))[ids[0]]["quality_score"] == pytest.approx(0.4 * 0.9 + 0.3 * 0.6 + 0.3 * 0.5)
    [request] = server.requests
    assert request.path.endswith("/models/gemini-2.5-flash:generateContent")
    assert request.headers["x-goog-api-key"] == "test-gemini-key"
    assert request.body["generationConfig"]["responseMimeType"] == "application/json"
    assert SPECIFIC in request.body["contents"][0]["parts"][0]["text"]


def _http_date_in(seconds: float) -> dict[str, str]:
    return {"Retry-After": email.utils.formatdate(time.time() + seconds, usegmt=True)}


@pytest.mark.parametrize(
    ("status", "headers", "min_gap"),
    [
        # waits well above the 1 s the client pauses after a 429 without a usable Retry-After
        (429, lambda: {"Retry-After": "3"}, 2.9),
        (429, lambda: _http_date_in(5), 3.9),  # whole seconds: 4 to 5 s from the answer
        (500, dict, 0.05),
    ],
    ids=["429-retry-after", "429-retry-after-http-date", "500-then-success"],
)
async def test_gemini_failure_then_success(wenv, tenant, status, headers, min_gap):
    with gemini_server() as server:
        server.fail_next(status, headers)
        settings = _gemini_settings(wenv, server)
        async with (
            hosted_worker("evaluator", HANDLERS, settings, setup=service.setup, teardown=service.teardown),
            running_relay(settings),
        ):
            ids = await store_fragments(wenv.app, tenant, [SPECIFIC])
            await eventually(lambda: _judged(wenv.owner, ids), 20, "the retried evaluation")
    first, second = server.requests
    assert second.at - first.at >= min_gap, "Retry-After (or the backoff) is honoured"
    assert await wenv.owner.fetchval("SELECT count(*) FROM agent_memory.dead_letters WHERE tenant_id = $1", tenant) == 0


async def test_gemini_failing_for_good_is_dead_lettered_and_replayed(wenv, tenant):
    with gemini_server() as server:
        server.fail_always(500)
        settings = _gemini_settings(wenv, server, WORKER_MAX_TRIES="3")
        async with (
            hosted_worker("evaluator", HANDLERS, settings, setup=service.setup, teardown=service.teardown),
            running_relay(settings),
        ):
            ids = await store_fragments(wenv.app, tenant, [SPECIFIC])
            row = await eventually(
                lambda: wenv.owner.fetchrow(
                    "SELECT id, error, attempts FROM agent_memory.dead_letters WHERE tenant_id = $1", tenant
                ),
                20,
                "the evaluation to be dead-lettered",
            )
            assert row["error"] == "ScorerError: gemini answered 500" and row["attempts"] == 3
            assert len(server.requests) == 3
            assert not await _judged(wenv.owner, ids)
            server.recover()
            code, out = await admin_cli(wenv, "dead-letters", "replay", str(row["id"]))
            assert code == 0, out
            await eventually(lambda: _judged(wenv.owner, ids), 20, "the replayed evaluation")
    assert len(server.requests) == 4


async def test_gemini_calls_respect_the_concurrency_cap_and_rate(wenv, tenant):
    with gemini_server() as server:
        server.delay_s = 0.2
        settings = _gemini_settings(wenv, server, EVALUATOR_CONCURRENCY="2", EVALUATOR_RATE_LIMIT="10")
        async with (
            hosted_worker("evaluator", HANDLERS, settings, setup=service.setup, teardown=service.teardown),
            running_relay(settings),
        ):
            ids = await store_fragments(wenv.app, tenant, [f"{SPECIFIC} #{i}" for i in range(8)])
            await eventually(lambda: _judged(wenv.owner, ids), 30, "the burst to be scored")
    assert len(server.requests) == 8
    assert server.max_concurrent <= 2, "never more than EVALUATOR_CONCURRENCY calls at once"
    # the limiter spaces starts 0.1 s apart; arrival times carry transport jitter, so look at windows of 5 calls
    starts = sorted(r.at for r in server.requests)
    assert all(later - first >= 0.35 for first, later in zip(starts, starts[4:], strict=False)), "10 calls/s at most"


class AmendingScorer:
    """The offline scorer, with a change to the fragment committed while it scores (between load and write)."""

    name = "offline"

    def __init__(self, owner, sql: str, *args, local: bool) -> None:
        self.local = local  # scored inside the evaluator's transaction, or between two (a model's way)
        self.inner = OfflineScorer()
        self.owner, self.sql, self.args = owner, sql, args
        self.seen: list[Fragment] = []

    async def score(self, fragment: Fragment) -> Score:
        if not self.seen:
            await self.owner.execute(self.sql, *self.args)
        self.seen.append(fragment)
        return await self.inner.score(fragment)


def _event(fragment_id: str) -> dict:
    return {"payload": {"fragment_id": fragment_id}, "event_type": "fragment.stored"}


@contextlib.asynccontextmanager
async def _evaluator_runtime(wenv, scorer):
    rt = await open_runtime("evaluator", wenv.settings(), 4)
    rt.state["scorer"] = scorer
    try:
        yield rt
    finally:
        await close_runtime(rt)


@pytest.mark.parametrize("local", [True, False])
async def test_an_amend_of_the_topic_while_scoring_does_not_drop_the_score(wenv, tenant, local):
    """amend of topic, type, importance or isAnchor emits no event: the score of the unchanged content must land."""
    [frag_id] = await store_fragments(wenv.app, tenant, [SPECIFIC], kind="procedure")
    scorer = AmendingScorer(
        wenv.owner,
        "UPDATE agent_memory.fragments SET topic = 'renamed', updated_at = now() WHERE id = $1",
        frag_id,
        local=local,
    )
    async with _evaluator_runtime(wenv, scorer) as rt:
        await evaluate_fragment(_event(frag_id), rt)
    row = (await _scores(wenv.owner, [frag_id]))[frag_id]
    assert len(scorer.seen) == 1
    assert row["quality_score"] == pytest.approx((await OfflineScorer().score(scorer.seen[0])).quality)
    assert row["utility_score"] == pytest.approx(row["expected_utility"])
    topic, judged = await wenv.owner.fetchrow(
        "SELECT topic, verified_at >= updated_at FROM agent_memory.fragments WHERE id = $1", frag_id
    )
    assert topic == "renamed" and judged, "judged in its current form: a re-delivered event is skipped"


@pytest.mark.parametrize("local", [True, False])
async def test_an_amend_of_the_content_while_scoring_keeps_the_stale_score_out(wenv, tenant, local):
    [frag_id] = await store_fragments(wenv.app, tenant, [SPECIFIC], kind="procedure")
    scorer = AmendingScorer(
        wenv.owner,
        "UPDATE agent_memory.fragments SET content = $2, content_hash = $3, updated_at = now() WHERE id = $1",
        frag_id,
        VAGUE,
        "hash-of-the-amended-content",
        local=local,
    )
    async with _evaluator_runtime(wenv, scorer) as rt:
        await evaluate_fragment(_event(frag_id), rt)
        assert (await _scores(wenv.owner, [frag_id]))[frag_id]["quality_score"] is None, "scored the old content"
        # the content amend's own event scores the new content
        await evaluate_fragment({"payload": {"fragment_id": frag_id}, "event_type": "fragment.amended"}, rt)
    assert [f.content for f in scorer.seen] == [SPECIFIC, VAGUE]
    row = (await _scores(wenv.owner, [frag_id]))[frag_id]
    assert row["quality_score"] == pytest.approx((await OfflineScorer().score(scorer.seen[1])).quality)
    assert row["quality_score"] < (await OfflineScorer().score(scorer.seen[0])).quality


async def test_an_anchor_keeps_its_utility_score_and_gets_its_quality_score(wenv, tenant):
    anchor, plain = await store_fragments(wenv.app, tenant, [SPECIFIC, VAGUE], kind="procedure")
    await wenv.owner.execute(
        "UPDATE agent_memory.fragments SET is_anchor = true, utility_score = 0.777 WHERE id = $1", anchor
    )
    await wenv.owner.execute("UPDATE agent_memory.fragments SET utility_score = 0.777 WHERE id = $1", plain)
    async with _evaluator_runtime(wenv, OfflineScorer()) as rt:
        for frag_id in (anchor, plain):
            await evaluate_fragment(_event(frag_id), rt)
    scores = await _scores(wenv.owner, [anchor, plain])
    assert scores[anchor]["quality_score"] is not None and scores[anchor]["verified_at"] is not None
    assert scores[anchor]["utility_score"] == pytest.approx(0.777), "an anchor's utility is left alone"
    assert scores[plain]["quality_score"] is not None
    assert scores[plain]["utility_score"] == pytest.approx(scores[plain]["expected_utility"])
    assert scores[plain]["utility_score"] != pytest.approx(0.777)
