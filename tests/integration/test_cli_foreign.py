"""`memento import --from mcp-memory` and `--from mem0` (issue 32, item 2): the official MCP memory server's
memory.jsonl and a mem0 export (samples in tests/data/) become memories and links of the one store, written with
their outbox events; once the embedder has run (the real offline model), `memento search` finds them by meaning.
Importing again adds nothing; into another tenant, whose ids are taken, everything is remapped with its links.
Bad input names its line (or entry) and field, and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_cli_support import embed_queued, memento, query_embedder, system_env

DATA = Path(__file__).resolve().parents[1] / "data"
KG, MEM0 = DATA / "mcp-memory.jsonl", DATA / "mem0-export.json"


async def rows(owner_pool, table: str, tenant: str) -> int:
    return await owner_pool.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant)


async def search(servers, embedder, tenant: str, workspace: str, query: str) -> list[dict]:
    env = system_env(servers, EMBEDDER_URL=embedder.url)
    ran = await memento(env, "search", query, "--tenant", tenant, "--workspace", workspace, "--json", "--limit", "3")
    assert ran.code == 0, ran.err
    return ran.json()["fragments"]


async def test_the_memory_servers_graph_becomes_linked_searchable_memories(
    servers, app_pool, owner_pool, settings, tenant
):
    env = system_env(servers)
    ran = await memento(env, "import", str(KG), "--from", "mcp-memory", "--tenant", tenant, "--workspace", "kg",
                        "--json")  # fmt: skip
    assert ran.code == 0, ran.err
    # 4 entities, 9 observations, 3 relations; each observation part_of its entity, each relation linked to both
    # entities, which are linked to each other
    assert ran.json()["counts"] == {"fragment added": 16, "link added": 18}
    relation = await owner_pool.fetchrow(
        "SELECT id, type, linked_to FROM agent_memory.fragments WHERE tenant_id = $1 AND content = $2",
        tenant,
        "John_Smith works_at Anthropic",
    )
    assert relation["type"] == "relation" and len(relation["linked_to"]) == 2
    part_of = await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.fragment_links l JOIN agent_memory.fragments o ON o.id = l.from_id"
        " JOIN agent_memory.fragments e ON e.id = l.to_id WHERE l.tenant_id = $1 AND l.relation_type = 'part_of'"
        " AND o.content = 'John_Smith: Speaks fluent Spanish' AND e.content = 'John_Smith is a person'",
        tenant,
    )
    assert part_of == 1
    assert await rows(owner_pool, "outbox", tenant) == 16  # one fragment.stored each: the embedder's work

    again = await memento(env, "import", str(KG), "--from", "mcp-memory", "--tenant", tenant, "--workspace", "kg",
                          "--json")  # fmt: skip
    assert again.json()["counts"] == {"fragment kept": 16, "link kept": 18}
    assert await rows(owner_pool, "fragments", tenant) == 16 and await rows(owner_pool, "outbox", tenant) == 16

    assert await embed_queued(app_pool, owner_pool, settings, tenant) == 16
    with query_embedder() as embedder:
        found = await search(servers, embedder, tenant, "kg", "Which languages can John talk in?")
    assert "John_Smith: Speaks fluent Spanish" in [f["content"] for f in found], found


async def test_a_mem0_export_becomes_searchable_memories_with_their_dates(
    servers, app_pool, owner_pool, settings, tenant
):
    ran = await memento(system_env(servers), "import", str(MEM0), "--from", "mem0", "--tenant", tenant, "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["counts"] == {"fragment added": 3}
    row = await owner_pool.fetchrow(
        "SELECT workspace, created_at, updated_at, tags, source, topic FROM agent_memory.fragments"
        " WHERE tenant_id = $1 AND content = 'Is a vegetarian and avoids dairy products'",
        tenant,
    )
    assert row["workspace"] == "default" and row["created_at"].isoformat() == "2025-03-14T16:26:53.123456+00:00"
    assert row["updated_at"].isoformat() == "2025-04-03T01:05:11.654321+00:00"
    assert {"mem0", "food", "health", "user:alex"} <= set(row["tags"]) and row["topic"] == "food"
    assert row["source"] == "mem0:3c90c3cc-0d44-4b50-8888-8dd25736052a"

    # a question sharing no word with the memory: nothing until the embedder has written their vectors
    question = "what sport does he play at the weekend"
    with query_embedder() as embedder:
        assert await search(servers, embedder, tenant, "default", question) == []
        assert await embed_queued(app_pool, owner_pool, settings, tenant) == 3
        found = await search(servers, embedder, tenant, "default", question)
    assert "Plays tennis every Saturday morning with his brother" in [f["content"] for f in found], found


async def test_ids_another_tenant_holds_are_remapped_and_the_links_follow(servers, owner_pool, tenant):
    env = system_env(servers)
    first = await memento(env, "import", str(KG), "--from", "mcp-memory", "--tenant", tenant, "--json")
    assert first.code == 0, first.err
    other = tenant + "-b"
    ran = await memento(env, "import", str(KG), "--from", "mcp-memory", "--tenant", other, "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["counts"] == {"fragment remapped": 16, "link added": 18}
    crossing = await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.fragment_links l"
        " JOIN agent_memory.fragments f ON f.id IN (l.from_id, l.to_id) WHERE l.tenant_id = $1 AND f.tenant_id <> $1",
        other,
    )
    stale = await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.fragments f, unnest(f.linked_to) t WHERE f.tenant_id = $1"
        " AND NOT EXISTS (SELECT FROM agent_memory.fragments g WHERE g.id = t AND g.tenant_id = $1)",
        other,
    )
    assert crossing == 0 and stale == 0 and await rows(owner_pool, "fragment_links", other) == 18
    again = await memento(env, "import", str(KG), "--from", "mcp-memory", "--tenant", other, "--json")
    assert again.json()["counts"] == {"fragment kept": 16, "link kept": 18}


def export_lines(*lines: dict) -> str:
    header = {"kind": "header", "format": "memento-export", "version": 1}
    return "\n".join(json.dumps(line) for line in (header, *lines)) + "\n"


FRAGMENT = {"kind": "fragment", "id": "frag-00000000000000a1", "content": "A valid memory", "topic": "t",
            "type": "fact", "importance": 0.5, "content_hash": "h-a1", "ttl_tier": "warm"}  # fmt: skip


@pytest.mark.parametrize(
    ("source", "name", "text", "named"),
    [
        ("memento", "x.jsonl", export_lines(FRAGMENT, {"kind": "fragmentx", "id": "y"}), "line 3: kind"),
        (
            "memento",
            "x.jsonl",
            export_lines(FRAGMENT, {**FRAGMENT, "id": "frag-b2", "content_hash": "h-b2", "type": "bogus"}),
            "line 3: fragment",
        ),  # fmt: skip
        ("memento", "x.jsonl", export_lines({**FRAGMENT, "colour": "red"}), "line 2: fragment.colour: unknown field"),
        (
            "memento",
            "x.jsonl",
            export_lines(FRAGMENT, {"kind": "link", "from_id": FRAGMENT["id"], "to_id": "frag-elsewhere"}),
            "line 3: link.to_id",
        ),  # fmt: skip
        ("memento", "x.jsonl", export_lines(FRAGMENT) + "{not json\n", "line 3: line: not JSON"),
        ("memento", "x.jsonl", json.dumps(FRAGMENT) + "\n", "line 1: kind"),
        (
            "mcp-memory",
            "memory.jsonl",
            '{"type":"entity","name":"A","entityType":"t","observations":["o"]}\n'
            '{"type":"entity","name":"B","entityType":"t","observations":"o"}\n',
            "line 2: observations: must be a list of strings",
        ),  # fmt: skip
        ("mcp-memory", "memory.jsonl", '{"type":"edge","from":"A","to":"B"}\n', "line 1: type"),
        (
            "mem0",
            "mem0.json",
            json.dumps({"results": [{"id": "1", "memory": "ok"}, {"id": "2", "memory": ""}]}),
            "results[1]: memory: must be a non-empty string",
        ),  # fmt: skip
        (
            "mem0",
            "mem0.json",
            json.dumps([{"id": "1", "memory": "ok", "created_at": "yesterday"}]),
            "[0]: created_at: must be an ISO 8601 date-time",
        ),  # fmt: skip
    ],
)
async def test_bad_input_names_the_line_and_field_and_writes_nothing(
    servers, owner_pool, tenant, tmp_path, source, name, text, named
):
    path = tmp_path / name
    path.write_text(text)
    ran = await memento(system_env(servers), "import", str(path), "--from", source, "--tenant", tenant)
    assert ran.code == 1 and ran.out == ""
    assert ran.err.count("\n") == 1 and named in ran.err and "nothing was imported" in ran.err, ran.err
    for table in ("fragments", "fragment_links", "outbox"):
        assert await rows(owner_pool, table, tenant) == 0, table
