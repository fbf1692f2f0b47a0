"""Per-tenant API keys: made and revoked with `memento-admin keys`, stored as hashes, checked by memory-api for the
gateway, and bound to a tenant, workspaces, agents, scopes and profiles."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys

import httpx

from memento_memory_api.repositories import api_keys
from memento_shared.db.rls import set_system
from memento_shared.principal import HEADER, Principal, encode_principal
from tests.gateway.conftest import initialize


async def admin(servers, *args: str) -> str:
    """`memento-admin` as an operator runs it, in its own process."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "memento_memory_api.cli", *args,
        env={"DATABASE_URL": servers.database_url, "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def cli_key(servers, tenant: str, *extra: str) -> tuple[str, str]:
    printed = await admin(servers, "keys", "create", "--tenant", tenant, "--name", "tests", *extra)
    fields = {name: value.strip() for name, _, value in (line.partition(":") for line in printed.splitlines())}
    return fields["id"], fields["key"]


async def new_key(app_pool, tenant: str, **binding) -> str:
    """Through the repository `memento-admin keys create` uses, without starting a process each time."""
    values = {"workspaces": ["*"], "agents": ["*"], "scopes": ["read", "write"], "profiles": [], **binding}
    async with app_pool.acquire() as conn, conn.transaction():
        await set_system(conn)
        created = await api_keys.insert(conn, tenant_id=tenant, name="tests", expires_at=None, **values)
    return created.key


async def call(client, tool: str, arguments: dict) -> tuple[bool, dict]:
    result = await client.call_tool(tool, arguments)
    return result.is_error, json.loads(result.content[0].text)


async def test_a_key_acts_in_its_own_tenant_and_is_stored_only_as_a_hash(servers, gateway, owner_pool, tenant):
    key_id, key = await cli_key(servers, tenant)
    assert key.startswith(f"mk_{key_id}_")
    stored = await owner_pool.fetchrow("SELECT * FROM agent_memory.api_keys WHERE id = $1", key_id)
    assert bytes(stored["key_hash"]) == hashlib.sha256(key.encode()).digest()
    assert key not in json.dumps({k: str(v) for k, v in stored.items()})
    listed = await admin(servers, "keys", "list", "--tenant", tenant)
    assert key_id in listed and key not in listed and "active" in listed

    async with gateway.client(key=key) as client:
        failed, _ = await call(client, "remember", {"content": "tenant-only fact", "topic": "keys", "type": "fact"})
        assert not failed
        _, found = await call(client, "recall", {"topic": "keys"})
        assert [f["content"] for f in found["fragments"]] == ["tenant-only fact"]
    async with gateway.client() as operator:  # the operator's default tenant does not see it
        _, found = await call(operator, "recall", {"topic": "keys"})
        assert "tenant-only fact" not in [f["content"] for f in found["fragments"]]


async def test_scopes_agents_and_profiles_bound_to_the_key(app_pool, gateway, tenant):
    reader = await new_key(app_pool, tenant, scopes=["read"], agents=["alice"])
    async with gateway.client(key=reader) as client:
        failed, body = await call(client, "remember", {"content": "nope", "topic": "t", "type": "fact"})
        assert failed and body["error"]["code"] == "FORBIDDEN"
        failed, body = await call(client, "recall", {"topic": "t", "agentId": "bob"})
        assert failed and body["error"]["code"] == "FORBIDDEN"
        failed, _ = await call(client, "recall", {"topic": "t", "agentId": "alice"})
        assert not failed

    simple = await new_key(app_pool, tenant, profiles=["simple"])
    async with gateway.client(key=simple) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["store_memory", "supersede_memory", "search_memories", "list_recent_memories"]
    async with gateway.http(Authorization=f"Bearer {simple}") as http:
        widened = await http.post("/mcp?profile=fragments", json=initialize())
        assert widened.status_code == 403 and "limited to simple" in widened.json()["error"]["message"]


async def test_revoked_and_unknown_keys_are_refused(servers, gateways, tenant):
    key_id, key = await cli_key(servers, tenant)
    assert "revoked" in await admin(servers, "keys", "revoke", key_id)
    gateway = await gateways()  # a fresh replica: nothing cached from before the revocation
    for bad in (key, f"mk_{key_id}_forged", "mk_nothing"):
        async with gateway.http(Authorization=f"Bearer {bad}") as http:
            refused = await http.post("/mcp", json=initialize())
            assert refused.status_code == 401 and "API key" in refused.json()["error_description"]


async def test_the_rate_limit_counts_each_key_separately(app_pool, gateways, tenant):
    gateway = await gateways(MEMENTO_RATE_LIMIT_PER_MINUTE="2")
    first, second = await new_key(app_pool, tenant), await new_key(app_pool, tenant)
    async with gateway.http(Authorization=f"Bearer {first}") as a, gateway.http(Authorization=f"Bearer {second}") as b:
        assert [(await a.post("/mcp", json=initialize())).status_code for _ in range(3)] == [200, 200, 429]
        assert (await b.post("/mcp", json=initialize())).status_code == 200


async def test_only_the_gateway_may_ask_memory_api_about_keys(servers, app_pool, memory_api_url, tenant):
    key = await new_key(app_pool, tenant)
    secret = servers.settings().internal_secret
    async with httpx.AsyncClient(base_url=memory_api_url, trust_env=False) as http:
        assert (await http.post("/internal/keys/verify", json={"key": key})).status_code == 401
        agent = encode_principal(Principal(tenant_id=tenant, subject="key:x"), secret)
        assert (await http.post("/internal/keys/verify", json={"key": key}, headers={HEADER: agent})).status_code == 401
        gateway = encode_principal(Principal(tenant_id="", subject="gateway"), secret)
        answer = (await http.post("/internal/keys/verify", json={"key": key}, headers={HEADER: gateway})).json()
        assert answer["valid"] and answer["key"]["tenant_id"] == tenant and answer["key"]["scopes"] == ["read", "write"]
