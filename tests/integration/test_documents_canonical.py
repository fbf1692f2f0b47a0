"""The `documents` dialect's canonical documents (seed 001 Part 5, docs/dialects.md "documents") through memory-api's
tool route on real Postgres: versions only when content changes, both idempotency rules, outline anchors right after an
upsert, a section with its subsections, limits, isolation."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import asyncpg
import pytest

from memento_shared.db.rls import set_principal

SPEC = """# App Spec

Intro to the app.

## Auth

How users sign in.

### Token Refresh

Refresh tokens rotate every 30 days.

```python
def refresh(token):
    # not a heading
    return rotate(token)
```

## Billing

Invoices go out monthly.
"""


async def upsert(api, tenant, content=SPEC, key="app", **extra):
    args = {
        "canonicalKey": key,
        "docClass": "app_spec",
        "title": "App",
        "contentMarkdown": content,
        "idempotencyKey": str(uuid.uuid4()),
        **extra,
    }
    return await api.call("canonical.upsert", args, tenant=tenant), args


async def test_upsert_then_outline_sections_and_versions(memory_api, tenant, owner_pool):
    first, _ = await upsert(memory_api, tenant)
    assert first["result"]["versionNum"] == 1 and first["result"]["created"] is True
    outline = await memory_api.call("canonical.outline", {"canonicalKey": "app"}, tenant=tenant)
    anchors = [s["anchor"] for s in outline["result"]["sections"]]
    assert anchors == ["h1:app-spec", "h2:app-spec.auth", "h3:app-spec.auth.token-refresh", "h2:app-spec.billing"]
    section = await memory_api.call(
        "canonical.get_section", {"canonicalKey": "app", "sectionAnchor": "h2:app-spec.auth"}, tenant=tenant
    )
    text = section["result"]["contentMarkdown"]
    assert text.startswith("## Auth") and "### Token Refresh" in text and "return rotate(token)" in text
    assert "Billing" not in text
    # the code fence is one chunk's, whole
    chunks = await owner_pool.fetch(
        "SELECT text, anchor FROM agent_memory.doc_chunks WHERE tenant_id = $1 ORDER BY chunk_index", tenant
    )
    fenced = [c for c in chunks if "def refresh" in c["text"]]
    assert len(fenced) == 1 and "return rotate(token)" in fenced[0]["text"]
    same, _ = await upsert(memory_api, tenant)  # the same content under a new key: no new version
    # no worker here: the version's chunks have no vectors yet
    assert same["result"] == {"itemId": first["result"]["itemId"], "versionNum": 1, "created": False, "indexed": False}
    changed, _ = await upsert(memory_api, tenant, SPEC.replace("monthly", "weekly"))
    assert changed["result"]["versionNum"] == 2
    old = await memory_api.call("canonical.get", {"canonicalKey": "app", "versionNum": 1}, tenant=tenant)
    new = await memory_api.call("canonical.get", {"canonicalKey": "app"}, tenant=tenant)
    assert "monthly" in old["result"]["contentMarkdown"] and "weekly" in new["result"]["contentMarkdown"]
    versions = await owner_pool.fetchval("SELECT count(*) FROM agent_memory.doc_versions WHERE tenant_id = $1", tenant)
    assert versions == 2


async def test_idempotency_keys(memory_api, tenant, owner_pool):
    first, args = await upsert(memory_api, tenant)
    again = await memory_api.call("canonical.upsert", args, tenant=tenant)
    assert again["result"] == first["result"]
    other = await memory_api.call("canonical.upsert", {**args, "contentMarkdown": "# Other"}, tenant=tenant)
    assert other["error"]["code"] == "CONFLICT" and other["error"]["field"] == "idempotencyKey"
    assert await owner_pool.fetchval("SELECT count(*) FROM agent_memory.doc_versions WHERE tenant_id = $1", tenant) == 1


@pytest.mark.parametrize(
    ("arguments", "field", "code"),
    [
        ({"idempotencyKey": "not-a-uuid"}, "idempotencyKey", "INVALID_PARAMETER"),
        ({"docClass": "novel"}, "docClass", "INVALID_PARAMETER"),
        ({"canonicalKey": "has space"}, "canonicalKey", "INVALID_PARAMETER"),
        ({"contentMarkdown": "x" * (512 * 1024 + 1)}, "contentMarkdown", "PAYLOAD_TOO_LARGE"),
    ],
)
async def test_bad_input_names_the_field_and_writes_nothing(memory_api, tenant, owner_pool, arguments, field, code):
    base = {"canonicalKey": "app", "docClass": "app_spec", "title": "App", "contentMarkdown": SPEC,
            "idempotencyKey": str(uuid.uuid4())}  # fmt: skip
    answer = await memory_api.call("canonical.upsert", {**base, **arguments}, tenant=tenant)
    assert (answer["error"]["code"], answer["error"]["field"]) == (code, field)
    for table in ("doc_items", "doc_versions", "doc_chunks", "doc_commits"):
        assert await owner_pool.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant) == 0


async def test_another_tenant_or_workspace_finds_nothing(memory_api, tenant, app_pool):
    await upsert(memory_api, tenant)
    for who, where in ((tenant + "-b", {}), (tenant, {"workspace": "elsewhere"})):
        for tool, args in (
            ("canonical.get", {"canonicalKey": "app"}),
            ("canonical.outline", {"canonicalKey": "app"}),
            ("canonical.get_section", {"canonicalKey": "app", "sectionAnchor": "h1:app-spec"}),
        ):
            answer = await memory_api.call(tool, args, tenant=who, **where)
            assert answer["error"]["code"] == "MEMORY_NOT_FOUND", (tool, who, where)
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant + "-b", workspace="default", agent_id="default")
        for table in ("doc_items", "doc_versions", "doc_chunks", "doc_commits"):
            assert await conn.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant) == 0


async def test_resources_page_pinned_first_then_newest(memory_api, tenant, owner_pool):
    from memento_shared.principal import HEADER, SCOPES, Principal, encode_principal

    for n in range(55):
        await upsert(memory_api, tenant, f"# Doc {n}\n\nText {n}.", key=f"doc-{n}")
    await owner_pool.execute(
        "UPDATE agent_memory.doc_items SET pinned = true WHERE tenant_id = $1 AND canonical_key = 'doc-3'", tenant
    )
    headers = {HEADER: encode_principal(Principal(tenant_id=tenant, scopes=SCOPES), memory_api.secret)}

    async def listed(params: dict) -> dict:
        response = await memory_api.client.post("/v1/resources/list", json={"params": params}, headers=headers)
        return response.json()

    first = (await listed({}))["result"]
    assert len(first["resources"]) == 50
    assert first["resources"][0]["description"] == "spec (doc-3)"  # pinned first
    assert first["resources"][1]["description"] == "spec (doc-54)"  # then the newest
    second = (await listed({"cursor": first["nextCursor"]}))["result"]
    assert len(second["resources"]) == 5 and "nextCursor" not in second
    seen = [r["uri"] for r in first["resources"] + second["resources"]]
    assert len(set(seen)) == 55
    assert (await listed({"cursor": "bogus"}))["error"]["code"] == "INVALID_PARAMETER"


async def test_commit_versions_canonical_documents_and_is_idempotent(memory_api, tenant, owner_pool):
    key = str(uuid.uuid4())
    entries = [
        {"kind": "decision", "title": "Use Postgres", "content": "We use Postgres 18 for everything."},
        {"kind": "spec", "title": "App", "content": SPEC, "canonicalKey": "app"},
    ]
    first = await memory_api.call("memory.commit", {"idempotencyKey": key, "entries": entries}, tenant=tenant)
    again = await memory_api.call("memory.commit", {"idempotencyKey": key, "entries": entries}, tenant=tenant)
    assert again["result"] == first["result"] and len(first["result"]["items"]) == 2
    other = await memory_api.call("memory.commit", {"idempotencyKey": key, "entries": entries[:1]}, tenant=tenant)
    assert other["error"]["code"] == "CONFLICT"
    outline = await memory_api.call("canonical.outline", {"canonicalKey": "app"}, tenant=tenant)
    assert outline["result"]["sections"][0]["anchor"] == "h1:app-spec"
    too_many = await memory_api.call(
        "memory.commit", {"idempotencyKey": str(uuid.uuid4()), "entries": entries[:1] * 51}, tenant=tenant
    )
    assert (too_many["error"]["code"], too_many["error"]["field"]) == ("INVALID_PARAMETER", "entries")
    commits = await owner_pool.fetchval(
        "SELECT count(DISTINCT commit_id) FROM agent_memory.doc_versions WHERE tenant_id = $1", tenant
    )
    assert commits == 1


async def test_context_pack_keeps_to_max_chars_in_document_order(memory_api, tenant):
    await upsert(memory_api, tenant)
    full = await memory_api.call(
        "canonical.context_pack", {"canonicalKey": "app", "goal": "token refresh billing invoices"}, tenant=tenant
    )
    anchors = [s["anchor"] for s in full["result"]["sections"]]
    assert anchors == ["h3:app-spec.auth.token-refresh", "h2:app-spec.billing"]  # document order
    small = await memory_api.call(
        "canonical.context_pack",
        {"canonicalKey": "app", "goal": "token refresh billing", "maxChars": 150},
        tenant=tenant,
    )
    assert small["result"]["totalChars"] <= 150 and len(small["result"]["sections"]) == 1


async def test_restore_is_byte_identical_and_within_its_limits(memory_api, tenant, owner_pool):
    await upsert(memory_api, tenant)
    await owner_pool.execute("UPDATE agent_memory.doc_items SET pinned = true WHERE tenant_id = $1", tenant)
    entries = [
        {"kind": "troubleshooting", "title": "Login loop", "content": "Clearing the refresh cookie fixed the loop."},
        {"kind": "note", "title": "Session notes", "content": "Working on billing exports."},
        {"kind": "decision", "title": "Exports", "content": "Billing exports are CSV, one file per month."},
    ]
    await memory_api.call("memory.commit", {"idempotencyKey": str(uuid.uuid4()), "entries": entries}, tenant=tenant)
    args = {"goal": "billing exports csv", "maxItems": 4, "maxChars": 2000}
    one = await memory_api.call("memory.restore", args, tenant=tenant)
    two = await memory_api.call("memory.restore", args, tenant=tenant)
    assert one["result"]["bundle"] == two["result"]["bundle"] and len(one["result"]["bundle"]) <= 2000
    reasons = [i["reason"] for i in one["result"]["items"]]
    assert reasons == ["pinned", "latest_snapshot", "recent_troubleshooting", "goal"]
    tiny = await memory_api.call("memory.restore", {**args, "maxChars": 300}, tenant=tenant)
    assert tiny["result"]["totalChars"] <= 300


DOCS = {
    "auth": ("feature_spec", "# Auth\n\n## Sessions\n\nSession cookies expire after 12 hours of inactivity.\n"),
    "billing": ("feature_spec", "# Billing\n\n## Invoices\n\nInvoices are generated on the first day of the month.\n"),
    "ops": ("implementation_plan", "# Ops\n\n## Errors\n\nThe worker logs ERR_QUEUE_STALLED when Redis is away.\n"),
}


async def test_search_ranks_by_bm25_at_once_filters_and_boosts_canonical(memory_api, tenant):
    for key, (doc_class, content) in DOCS.items():
        await upsert(memory_api, tenant, content, key=key, docClass=doc_class)
    note = {"kind": "note", "title": "Cookie note", "content": "Session cookies expire after 12 hours, says the spec."}
    await memory_api.call("memory.commit", {"idempotencyKey": str(uuid.uuid4()), "entries": [note]}, tenant=tenant)

    async def search(**args) -> list[dict]:
        answer = await memory_api.call("memory.search", args, tenant=tenant)
        return answer["result"]["results"]

    invoices = await search(query="when are invoices generated")
    assert invoices[0]["sectionAnchor"] == "h2:billing.invoices" and invoices[0]["isCanonical"] is True
    # the same words in a canonical spec and in a plain note: the spec first (test_document_fusion: prefer_canonical)
    cookies = await search(query="session cookies expire 12 hours")
    assert [h["isCanonical"] for h in cookies[:2]] == [True, False]
    assert [h["kind"] for h in await search(query="session cookies", kinds=["note"])] == ["note"]
    stalled = await search(query="what does ERR_QUEUE_STALLED mean")
    assert stalled[0]["title"] == "App" and "ERR_QUEUE_STALLED" in stalled[0]["excerpt"]
    bad = await memory_api.call("memory.search", {"query": "x", "limit": 101}, tenant=tenant)
    assert bad["error"]["field"] == "limit"
    zero = await memory_api.call("memory.search", {"query": "x", "limit": 0}, tenant=tenant)
    assert zero["error"]["field"] == "limit"
    # a new version replaces the old one in the index and the statistics
    await upsert(memory_api, tenant, DOCS["billing"][1].replace("first day", "fifteenth day"), key="billing")
    again = await search(query="fifteenth day invoices")
    assert again[0]["excerpt"].count("fifteenth") == 1 and all("first day" not in h["excerpt"] for h in again)


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("memory.commit", {"entries": [{"kind": "novel", "title": "t", "content": "c"}]}, "entries.0.kind"),
        ("memory.commit", {"entries": []}, "entries"),
        (
            "memory.commit",
            {"idempotencyKey": "key-1", "entries": [{"kind": "note", "title": "t", "content": "c"}]},
            "idempotencyKey",
        ),
        ("memory.search", {"query": "x", "kinds": ["novel"]}, "kinds.0"),
        ("memory.restore", {"maxItems": 0}, "maxItems"),
        ("canonical.context_pack", {"canonicalKey": "app", "goal": "g", "maxChars": 0}, "maxChars"),
    ],
)
async def test_other_tools_refuse_bad_input_naming_the_field(memory_api, tenant, owner_pool, tool, arguments, field):
    if tool == "memory.commit":
        arguments = {"idempotencyKey": str(uuid.uuid4()), **arguments}
    answer = await memory_api.call(tool, arguments, tenant=tenant)
    assert (answer["error"]["code"], answer["error"]["field"]) == ("INVALID_PARAMETER", field), answer
    for table in ("doc_items", "doc_versions", "doc_chunks", "doc_commits"):
        assert await owner_pool.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant) == 0


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "restore_bundle.md"


async def test_restore_matches_its_golden_file(memory_api, tenant, owner_pool):
    """A store laid out row by row (fixed ids, fixed ages) restores to the exact bytes of tests/golden/."""
    items = [  # id, kind, title, canonical key, pinned, hours ago, content
        ("doc-g1", "spec", "App Spec", "app", True, 50, "# App\n\nThe app syncs notes across devices."),
        ("doc-g2", "note", "Session notes", None, False, 1, "Working on conflict resolution for sync."),
        ("doc-g3", "troubleshooting", "Sync loop", None, False, 30, "A stale vector clock caused the sync loop."),
        ("doc-g4", "decision", "Last writer wins", None, False, 70, "Conflicts resolve by last writer wins."),
        ("doc-g5", "plan", "Old plan", None, False, 90, "An unrelated plan about billing."),
    ]
    for item_id, kind, title, key, pinned, hours, content in items:
        await owner_pool.execute(
            "INSERT INTO agent_memory.doc_items (id, tenant_id, workspace, kind, title, canonical_key, is_canonical,"
            " pinned, latest_version, updated_at) VALUES ($1, $2, 'default', $3, $4, $5::text, $5::text IS NOT NULL,"
            " $6, 1, now() - make_interval(hours => $7::int))",
            item_id + tenant,
            tenant,
            kind,
            title,
            key,
            pinned,
            hours,
        )
        await owner_pool.execute(
            "INSERT INTO agent_memory.doc_versions (tenant_id, workspace, item_id, version_num, content, content_hash)"
            " VALUES ($1, 'default', $2, 1, $3, 'h')",
            tenant,
            item_id + tenant,
            content,
        )
    answer = await memory_api.call("memory.restore", {"goal": "sync conflicts", "maxChars": 1000}, tenant=tenant)
    bundle = answer["result"]["bundle"].replace(tenant, "")  # ids carry the test's tenant to stay unique
    assert bundle == GOLDEN.read_text()


async def test_bm25_finds_an_identifier_by_the_words_postgres_splits_it_into(memory_api, tenant, app_pool):
    from memento_memory_api.repositories import documents as docs
    from memento_memory_api.uow import Scope

    await upsert(memory_api, tenant, DOCS["ops"][1], key="ops", docClass="implementation_plan")
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="default")
        scope = Scope(tenant, "default", "default")
        found, coverage = await docs.bm25(conn, scope, "ERR_QUEUE_STALLED", None, False, 5)
    assert len(found) == 1  # the lexical list itself, not the trigram fallback
    assert coverage == [pytest.approx(1.0)]  # it holds all three words


async def test_commits_naming_the_same_documents_in_other_orders_wait_for_each_other(memory_api, tenant, servers):
    # canonical documents are locked in key order: a commit of [b, a] waiting for `a` (held by another writer) must
    # hold no lock on `b` meanwhile (it did, and the other writer reaching for `b` deadlocked with it)
    item = {}
    for key in ("doc-a", "doc-b"):
        item[key] = (await upsert(memory_api, tenant, f"# {key}\n\nfirst", key=key))[0]["result"]["itemId"]
    entries = [
        {"kind": "spec", "title": key, "content": f"# {key}\n\nsecond", "canonicalKey": key}
        for key in ("doc-b", "doc-a")
    ]
    lock = "SELECT 1 FROM agent_memory.doc_items WHERE tenant_id = $1 AND canonical_key = $2 FOR UPDATE"
    other = await asyncpg.connect(servers.owner_url)
    try:
        async with other.transaction():
            await other.execute(lock, tenant, "doc-a")
            args = {"idempotencyKey": str(uuid.uuid4()), "entries": entries}
            committing = asyncio.create_task(memory_api.call("memory.commit", args, tenant=tenant))
            await asyncio.sleep(0.5)  # the commit now waits for doc-a
            async with asyncio.timeout(5):
                await other.execute(lock, tenant, "doc-b")
        async with asyncio.timeout(5):
            body = await committing
    finally:
        await other.close()
    items = body["result"]["items"]  # in the entries' order
    assert [(i["itemId"], i["versionNum"]) for i in items] == [(item["doc-b"], 2), (item["doc-a"], 2)]
