"""The console's read-only pages in the browser: the memory list's filters (type, tier, tags, superseded, expired),
documents with outline and versions, working memory and the skip list, statistics, the API keys page (admins only,
never a key), and workspaces a key is not bound to. One browser for the module; a fresh context per test."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from tests.e2e.conftest import ACCESS_KEY
from tests.e2e.console_screenshots import (
    as_system,
    call_tool,
    create_key,
    fetch,
    remember,
    sign_in,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def workspace() -> str:
    return f"views-{time.time_ns()}"


def listed(page, url: str) -> set[str]:
    page.goto(url)
    page.wait_for_selector("#memories")
    return set(page.locator("tr.memory").evaluate_all("rows => rows.map(r => r.dataset.id)"))


def test_the_memory_list_filters(system, page, workspace, db):
    base = system.base_url
    fact = remember(base, ACCESS_KEY, workspace, "Alpha service runs in eu-west", keywords=["alpha", "region"])
    decision = remember(base, ACCESS_KEY, workspace, "We chose Rust for the parser", type="decision")
    preference = remember(base, ACCESS_KEY, workspace, "Bob likes short answers", type="preference")
    expired = remember(base, ACCESS_KEY, workspace, "The promo code works until Sunday")
    old = remember(base, ACCESS_KEY, workspace, "The office is on floor 3")
    new = call_tool(base, ACCESS_KEY, workspace, "amend", {"id": old, "content": "The office is on floor 5",
                                                           "supersedes": True})["id"]  # fmt: skip

    async def expire(conn):
        await conn.execute("UPDATE agent_memory.fragments SET expires_at = now() - interval '1 day' WHERE id = $1",
                           expired)  # fmt: skip

    as_system(db, expire)
    sign_in(page, base, ACCESS_KEY, workspace)
    url = f"{base}/console/memories"
    assert listed(page, url) == {fact, decision, preference, new}
    assert listed(page, url + "?type=decision") == {decision}
    tiers = fetch(db, "SELECT id, ttl_tier FROM agent_memory.fragments WHERE workspace = $1", workspace)
    permanent = {r["id"] for r in tiers if r["ttl_tier"] == "permanent"} & {fact, decision, preference, new}
    assert preference in permanent and fact not in permanent  # preferences are permanent (§5.2), plain facts not
    assert listed(page, url + "?tier=permanent") == permanent
    assert listed(page, url + "?tags=alpha") == {fact}
    assert listed(page, url + "?expired=only") == {expired}
    assert listed(page, url + "?superseded=only") == {old}
    assert listed(page, url + "?superseded=include&expired=include") == {fact, decision, preference, expired, old, new}
    answer = page.goto(url + "?superseded=sometimes")
    assert answer.status == 400 and "superseded" in page.inner_text(".error")


def test_documents_show_their_outline_and_versions(system, page, workspace):
    first = "# Runbook\n\n## Restart\nsystemctl restart api\n"
    for body in (first, "# Runbook\n\n## Restart\nUse the job.\n\n## Rollback\nRedeploy.\n"):
        entry = {"kind": "troubleshooting", "title": "Runbook", "content": body, "canonicalKey": "runbook"}
        call_tool(system.base_url, ACCESS_KEY, workspace, "memory.commit",
                  {"idempotencyKey": str(uuid.uuid4()), "entries": [entry]})  # fmt: skip
    sign_in(page, system.base_url, ACCESS_KEY, workspace)
    page.goto(f"{system.base_url}/console/documents")
    page.click("#documents a:has-text('Runbook')")
    page.wait_for_selector("#outline")
    outline = page.inner_text("#outline")
    assert "Restart" in outline and "Rollback" in outline
    assert page.locator("#doc-versions tr").count() == 2
    assert "Redeploy." in page.inner_text("pre.doc")


def test_working_memory_items_and_the_skip_list(system, page, workspace):
    call_tool(system.base_url, ACCESS_KEY, workspace, "memento_item_create",
              {"category": "active_work", "title": "Migrate the queue", "next_action": "pick a window"})  # fmt: skip
    later = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    call_tool(system.base_url, ACCESS_KEY, workspace, "memento_skip_add",
              {"item": "flaky canary", "reason": "known noise", "expires": later})  # fmt: skip
    sign_in(page, system.base_url, ACCESS_KEY, workspace)
    page.goto(f"{system.base_url}/console/working")
    page.wait_for_selector("#items")
    assert "Migrate the queue" in page.inner_text("#items") and "pick a window" in page.inner_text("#items")
    assert "flaky canary" in page.inner_text("#skips") and "known noise" in page.inner_text("#skips")


def test_statistics_count_the_workspace(system, page, workspace):
    for i in range(3):
        remember(system.base_url, ACCESS_KEY, workspace, f"Statistic number {i} is a fact", topic=f"s{i}")
    remember(system.base_url, ACCESS_KEY, workspace, "Decided to count things", type="decision")
    sign_in(page, system.base_url, ACCESS_KEY, workspace)
    page.goto(f"{system.base_url}/console/stats")
    page.wait_for_selector("#figures")
    assert page.locator("#figures .card").first.inner_text().split()[0] == "4"
    assert page.locator("svg.bars rect").count() == 1  # all stored today


def test_the_keys_page_is_for_admins_and_never_shows_a_key(system, page, db):
    key = create_key(db, "default", ["read", "write"], name=f"ci-{time.time_ns()}")
    other = create_key(db, "someone-else", ["read"], name="not-yours")
    sign_in(page, system.base_url, ACCESS_KEY)
    page.goto(f"{system.base_url}/console/keys")
    text = page.inner_text("#keys")
    key_id = key.split("_")[1]
    assert key_id in text and key not in page.content()
    assert other.split("_")[1] not in text and "not-yours" not in text
    page.context.clear_cookies()
    sign_in(page, system.base_url, key)
    assert page.locator("nav a:has-text('API keys')").count() == 0
    assert page.goto(f"{system.base_url}/console/keys").status == 403


def test_a_key_bound_to_one_workspace_starts_there_and_cannot_switch_out(system, page, db):
    key = _bound_key(db, ["team-a"])
    sign_in(page, system.base_url, key)
    assert page.input_value("input[name=workspace]") == "team-a"
    page.fill("input[name=workspace]", "team-b")
    page.click("header button:has-text('Switch')")
    page.wait_for_selector(".error")
    assert "not allowed" in page.inner_text(".error")
    page.goto(f"{system.base_url}/console/memories")
    assert page.input_value("input[name=workspace]") == "team-a"


def _bound_key(db: str, workspaces: list[str]) -> str:
    from memento_memory_api.repositories import api_keys

    async def insert(conn):
        return await api_keys.insert(conn, tenant_id="default", name="bound", workspaces=workspaces, agents=["*"],
                                     scopes=["read"], profiles=[], expires_at=None)  # fmt: skip

    return as_system(db, insert).key


def test_memory_content_is_escaped(system, page, workspace):
    fragment_id = remember(system.base_url, ACCESS_KEY, workspace, "<script>window.pwned = 1</script><b>bold</b>")
    sign_in(page, system.base_url, ACCESS_KEY, workspace)
    page.goto(f"{system.base_url}/console/memories/{fragment_id}")
    assert "<script>" in page.inner_text("#content")  # shown as text, not run or rendered
    assert page.evaluate("() => window.pwned") is None and page.locator("#content b").count() == 0
