"""`memento export` and `memento import` (issue 32, item 2): a workspace filled through the tools of every dialect is
exported, imported into a fresh data dir and exported again: the same rows, line for line (vectors too). Imported
again, nothing is added. Imported into another workspace of the same installation, where every id is taken, each
is remapped and every reference follows, and the documents' chunks and search statistics are rebuilt alike."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest

from tests.integration.test_cli_support import embed_queued, memento, read_export, system_env

SOURCE = "src"
RUNBOOK = (
    "# Runbook\n\n## Failover\n\nPromote the standby, then repoint the pooler.\n\n## Backups\n\nNightly at 02:00.\n"
)


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


async def populate(api, tenant: str) -> dict[str, str]:
    async def call(tool: str, arguments: dict) -> dict:
        body = await api.call(tool, arguments, tenant=tenant, workspace=SOURCE)
        assert "result" in body, body
        return body["result"]

    ids = {}
    for name, content, keywords in [
        ("tuesday", "Releases go to production every Tuesday after the standup", ["release", "tuesday"]),
        ("rollback", "Rollbacks use the previous container image tag, never a rebuild", ["rollback"]),
        ("flags", "Feature flags older than ninety days are removed during cleanup week", ["flags"]),
    ]:
        found = await call("remember", {"content": content, "topic": "ops", "type": "procedure", "keywords": keywords})
        ids[name] = found["id"]
    await call("link", {"fromId": ids["rollback"], "toId": ids["tuesday"], "relationType": "resolved_by"})
    await call("amend", {"id": ids["flags"], "content": "Feature flags older than sixty days are removed"})
    ids["seattle"] = (await call("store_memory", {"content": "User lives in Seattle"}))["created"]["id"]
    ids["austin"] = (await call("store_memory", {"content": "User moved to Austin"}))["created"]["id"]
    await call("supersede_memory", {"old_memory_id": ids["seattle"], "new_memory_id": ids["austin"]})
    stored = await call("memento_store", {"content": "Deploy freezes start on Fridays at noon", "tags": ["deploy"],
                                          "linkages": [{"type": "memory", "id": ids["tuesday"]}]})  # fmt: skip
    ids["freeze"] = stored["id"]
    await call("memento_item_create", {"category": "active_work", "title": "Ship the exporter", "priority": 7})
    await call("memento_skip_add", {"item": "friday deploys", "reason": "freeze", "expires": "2099-01-01"})
    await call("memento_update", {"section": "standing_decisions", "content": "Report in UTC"})
    await call("memento_identity_update", {"crystal": "I keep the release train on time."})
    await call("memory_after_turn", {"session_id": "s1", "turn_id": "t1", "input_items": [user("I prefer dark roast")],
                                     "output_items": [assistant("Noted: dark roast.")]})  # fmt: skip
    for content in (RUNBOOK, RUNBOOK + "\n## Restore\n\nFrom the latest nightly.\n"):
        await call("canonical.upsert", {"canonicalKey": "runbook", "docClass": "app_spec", "title": "Runbook",
                                        "contentMarkdown": content, "idempotencyKey": str(uuid.uuid4())})  # fmt: skip
    note = {"kind": "decision", "title": "Use Postgres", "content": "We use Postgres 18 for everything."}
    await call("memory.commit", {"idempotencyKey": str(uuid.uuid4()), "entries": [note]})
    await call("tool_feedback", {"tool_name": "recall", "relevant": True, "sufficient": False})
    return ids


def remapped(tenant: str, workspace: str, old: str) -> str:
    """The id an import gives a row whose id is taken (load.Loader.remapped: derived, the same on every import)."""
    digest = hashlib.sha256(f"{tenant}\0{workspace}\0{old}".encode()).hexdigest()
    return f"{old.split('-', 1)[0]}-{digest[:16]}"


def added(counts: dict[str, int]) -> int:
    return sum(n for name, n in counts.items() if name.endswith((" added", " remapped")))


@pytest.fixture
async def exported(memory_api, servers, app_pool, owner_pool, settings, tenant, tmp_path):
    ids = await populate(memory_api, tenant)
    fragments = await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE tenant_id = $1", tenant)
    assert await embed_queued(app_pool, owner_pool, settings, tenant) == fragments
    path = tmp_path / "src.jsonl"
    ran = await memento(system_env(servers), "export", "--tenant", tenant, "--workspace", SOURCE, "--vectors",
                        "-o", str(path))  # fmt: skip
    assert ran.code == 0, ran.err
    assert ran.out == "" and "exported" in ran.err
    assert path.stat().st_mode & 0o077 == 0
    return ids, path


async def test_the_export_holds_every_row_of_every_dialect(exported, owner_pool, tenant):
    ids, path = exported
    header, records = read_export(path)
    assert header["format"] == "memento-export" and header["tenant"] == tenant and header["workspace"] == SOURCE
    kinds = {}
    for record in records:
        kinds[record["kind"]] = kinds.get(record["kind"], 0) + 1
        assert "tenant_id" not in record and "workspace" not in record
    tables = {
        "fragment": "fragments", "fragment_version": "fragment_versions", "link": "fragment_links",
        "vector": "fragment_embeddings", "wm_item": "wm_items", "wm_section": "wm_sections",
        "skip_entry": "skip_entries", "identity_snapshot": "identity_snapshots",
        "session_event": "session_events", "session_meta": "session_meta", "turn_guard": "turn_guards",
        "document": "doc_items", "document_version": "doc_versions", "doc_commit": "doc_commits",
        "tool_feedback": "tool_feedback",
    }  # fmt: skip
    for kind, table in tables.items():
        in_db = await owner_pool.fetchval(
            f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1 AND workspace = $2", tenant, SOURCE
        )
        assert in_db > 0 and kinds.get(kind) == in_db, (kind, in_db, kinds.get(kind))
    fragments = {r["id"]: r for r in records if r["kind"] == "fragment"}
    assert set(ids.values()) <= set(fragments)
    assert fragments[ids["seattle"]]["superseded_by"] == ids["austin"]
    assert len(fragments[ids["tuesday"]]["keywords"]) >= 2 and fragments[ids["flags"]]["content"].endswith(
        "sixty days are removed"
    )
    versions = [r for r in records if r["kind"] == "document_version"]
    assert sorted(v["version_num"] for v in versions if "Runbook" in v["content"]) == [1, 2]


async def test_a_fresh_data_dir_gets_the_same_rows_and_a_second_import_adds_nothing(exported, tenant, tmp_path):
    _, path = exported
    fresh = {"MEMENTO_DATA_DIR": str(tmp_path / "fresh")}
    first = await memento(fresh, "import", str(path), "--tenant", tenant, "--workspace", SOURCE, "--json")
    assert first.code == 0, first.err
    counts = first.json()["counts"]
    _, records = read_export(path)
    assert added(counts) == len(records) and not any(name.endswith("remapped") for name in counts), counts

    again = await memento(fresh, "import", str(path), "--tenant", tenant, "--workspace", SOURCE, "--json")
    assert again.code == 0, again.err
    assert added(again.json()["counts"]) == 0, again.json()

    cut = tmp_path / "cut.jsonl"  # a copy cut short: refused whole, not half imported
    cut.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    refused = await memento(fresh, "import", str(cut), "--tenant", tenant, "--workspace", "cut")
    assert refused.code == 1 and "line 1: counts: the header counts" in refused.err, refused.err

    back = tmp_path / "back.jsonl"
    ran = await memento(fresh, "export", "--tenant", tenant, "--workspace", SOURCE, "--vectors", "-o", str(back))
    assert ran.code == 0, ran.err
    assert read_export(back)[1] == records  # every row, in the same order, every field equal


async def test_ids_taken_by_another_workspace_are_remapped_with_every_reference(exported, servers, owner_pool, tenant):
    ids, path = exported
    env = system_env(servers)
    ran = await memento(env, "import", str(path), "--tenant", tenant, "--workspace", "copy", "--json")
    assert ran.code == 0, ran.err
    counts = ran.json()["counts"]
    _, records = read_export(path)
    assert counts["fragment remapped"] == sum(1 for r in records if r["kind"] == "fragment")
    assert counts["document remapped"] == 2 and counts["wm_item remapped"] == 1
    again = await memento(env, "import", str(path), "--tenant", tenant, "--workspace", "copy", "--json")
    assert added(again.json()["counts"]) == 0, again.json()

    # the copy's export is the original with every id replaced by its remapped one
    copy = path.with_name("copy.jsonl")
    ran = await memento(env, "export", "--tenant", tenant, "--workspace", "copy", "--vectors", "-o", str(copy))
    assert ran.code == 0, ran.err
    text = path.read_text().split("\n", 1)[1]
    for record in records:
        if "id" in record and isinstance(record["id"], str):
            text = text.replace(f'"{record["id"]}"', f'"{remapped(tenant, "copy", record["id"])}"')

    def rows(records):  # the order of rows that tie on their export order follows their (remapped) ids
        return sorted(json.dumps(r, sort_keys=True) for r in records)

    assert rows(read_export(copy)[1]) == rows(json.loads(line) for line in text.splitlines())

    # links and versions point at the copy's rows only; the documents' chunks and statistics are rebuilt alike
    stray = await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.fragment_links l"
        " JOIN agent_memory.fragments f ON f.id IN (l.from_id, l.to_id)"
        " WHERE l.tenant_id = $1 AND l.workspace = 'copy' AND f.workspace <> 'copy'",
        tenant,
    )
    assert stray == 0
    new_tuesday = remapped(tenant, "copy", ids["tuesday"])
    linked = await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.fragment_links WHERE to_id = $1 AND relation_type = 'resolved_by'",
        new_tuesday,
    )
    assert linked == 1
    for table, columns in [("doc_chunks", "version_num, chunk_index, text, heading_path, anchor, start_char, end_char"),
                           ("doc_term_stats", "term, df"), ("doc_corpus", "chunks, tokens")]:  # fmt: skip
        rows = [
            await owner_pool.fetch(
                f"SELECT {columns} FROM agent_memory.{table} WHERE tenant_id = $1 AND workspace = $2",
                tenant,
                workspace,
            )
            for workspace in (SOURCE, "copy")
        ]
        same = [sorted(repr(tuple(r)) for r in found) for found in rows]  # whichever ids the documents have
        assert same[0] and same[0] == same[1], table
