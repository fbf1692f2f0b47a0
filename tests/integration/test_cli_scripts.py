"""`memento search`, `show` and `forget` for scripts (issue 32, item 2), and the `admin` group: the same answers as
the tools, as JSON with --json, exit code 1 on an error; another tenant's id is not found, and stays."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json

from memento_memory_api import cli as admin_cli
from tests.integration.test_cli_support import environment, memento, query_embedder, system_env


async def remember(api, tenant: str, content: str, **extra) -> str:
    body = await api.call("remember", {"content": content, "topic": "ops", "type": "fact", **extra}, tenant=tenant)
    return body["result"]["id"]


async def test_show_search_and_forget_answer_as_the_tools_do(memory_api, servers, owner_pool, tenant):
    env = system_env(servers)
    first = await remember(memory_api, tenant, "The staging database is refreshed every Sunday night")
    second = await remember(memory_api, tenant, "Refresh jobs page the on-call engineer when they fail")
    await memory_api.call("link", {"fromId": second, "toId": first}, tenant=tenant)
    await memory_api.call("amend", {"id": first, "content": "The staging database is refreshed every Saturday night"},
                          tenant=tenant)  # fmt: skip

    shown = await memento(env, "show", first, "--tenant", tenant, "--json")
    assert shown.code == 0, shown.err
    answer = shown.json()
    assert answer["kind"] == "fragment" and answer["row"]["content"].endswith("every Saturday night")
    assert [v["content"] for v in answer["versions"]] == ["The staging database is refreshed every Sunday night"]
    assert [(link["from_id"], link["to_id"]) for link in answer["links"]] == [(second, first)]
    text = await memento(env, "show", first, "--tenant", tenant)
    assert text.code == 0 and text.out.startswith(f"fragment {first}\n") and f"{second} -related-> {first}" in text.out

    with query_embedder() as embedder:
        found = await memento({**env, "EMBEDDER_URL": embedder.url}, "search", "staging database refresh",
                              "--tenant", tenant, "--json")  # fmt: skip
        lines = await memento({**env, "EMBEDDER_URL": embedder.url}, "search", "staging database refresh",
                              "--tenant", tenant)  # fmt: skip
    assert found.code == 0, found.err
    assert found.json()["fragments"][0]["id"] == first
    assert lines.out.splitlines()[0].startswith(f"{first}  fact  ops: The staging database")

    gone = await memento(env, "forget", first, "--tenant", tenant, "--json")
    assert gone.code == 0, gone.err
    assert gone.json()["deleted"] == [first]
    assert await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE id = $1", first) == 0

    again = await memento(env, "forget", first, "--tenant", tenant, "--json")
    assert again.code == 1 and again.json()["error"]["code"] == "MEMORY_NOT_FOUND"
    plain = await memento(env, "forget", first, "--tenant", tenant)
    assert plain.code == 1 and plain.out == "" and plain.err.startswith("memento: ") and first in plain.err


async def test_another_tenants_id_is_not_found_and_an_anchor_needs_force(memory_api, servers, owner_pool, tenant):
    env = system_env(servers)
    mine = await remember(memory_api, tenant, "Only the owner may read this", isAnchor=True)
    for command in ("show", "forget"):
        other = await memento(env, command, mine, "--tenant", tenant + "-x", "--json")
        assert other.code == 1 and other.json()["error"]["code"] == "MEMORY_NOT_FOUND", other.out
        elsewhere = await memento(env, command, mine, "--tenant", tenant, "--workspace", "elsewhere", "--json")
        assert elsewhere.code == 1, elsewhere.out
    kept = await memento(env, "forget", mine, "--tenant", tenant)
    assert kept.code == 1 and "--force" in kept.err
    assert await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE id = $1", mine) == 1
    forced = await memento(env, "forget", mine, "--tenant", tenant, "--force")
    assert forced.code == 0 and forced.out == f"forgot {mine}\n"
    assert await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE id = $1", mine) == 0


def _admin(env: dict[str, str], argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with environment(env), contextlib.redirect_stdout(out):
        try:
            admin_cli.main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue()


async def test_the_admin_commands_answer_under_memento_admin_and_memento_alike(servers, tenant):
    env = system_env(servers)
    created = await memento(env, "admin", "keys", "create", "--tenant", tenant, "--name", "cli test")
    assert created.code == 0, created.err
    listed = await memento(env, "admin", "keys", "list", "--tenant", tenant, "--json")
    code, old = await asyncio.to_thread(_admin, env, ["keys", "list", "--tenant", tenant, "--json"])
    assert listed.code == 0 and code == 0
    assert [k["name"] for k in listed.json()] == ["cli test"] and old == listed.out


async def test_export_to_stdout_reads_as_the_service_role_only(memory_api, servers, tenant):
    mine = await remember(memory_api, tenant, "Exports go to stdout when no file is named")
    env = system_env(servers)
    ran = await memento(env, "export", "--tenant", tenant)
    assert ran.code == 0, ran.err
    header, *rows = [json.loads(line) for line in ran.out.splitlines()]
    assert header["kind"] == "header" and [r["id"] for r in rows if r["kind"] == "fragment"] == [mine]
    # as the schema owner, row-level security would not apply: every tenant's rows could leak into an export
    owner = await memento({**env, "DATABASE_URL": servers.owner_url}, "export", "--tenant", tenant)
    assert owner.code == 1 and owner.out == "" and "superuser" in owner.err
