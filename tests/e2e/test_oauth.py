"""OAuth 2.0 through the whole system with the MCP SDK's own OAuth client: dynamic registration, PKCE login on the
gateway's page with the access key, tokens, refresh; and the 401s for missing, bad, expired and wrong-audience
tokens (forged with the system's own signing key, so only the claim under test is wrong)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from jose import jwt
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.e2e.conftest import ACCESS_KEY, another_gateway, wait_for
from tests.gateway.oauth_client import Browser, MemoryStorage, oauth

pytestmark = pytest.mark.e2e
MCP = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}},
}


def oauth_client(mcp_url: str, browser: Browser, storage: MemoryStorage) -> Client:
    http = create_mcp_http_client(auth=oauth(mcp_url, browser, storage))
    return Client(streamable_http_client(mcp_url, http_client=http))


def post_with(url: str, token: str | None) -> httpx.Response:
    headers = {**MCP, **({"Authorization": f"Bearer {token}"} if token else {})}
    return httpx.post(url, json=INITIALIZE, headers=headers, trust_env=False)


async def test_sdk_oauth_client_signs_in_with_the_access_key_and_calls_tools(system):
    browser, storage = Browser(ACCESS_KEY), MemoryStorage()
    async with oauth_client(system.mcp_url, browser, storage) as client:
        stored = await client.call_tool("remember", {"content": "via OAuth, e2e", "topic": "e2e-oauth", "type": "fact"})
        assert not stored.is_error
    claims = jwt.get_unverified_claims(storage.tokens.access_token)
    assert claims["aud"] == system.mcp_url and claims["iss"] == system.base_url
    assert storage.client.client_id and storage.tokens.refresh_token and len(browser.pages) == 1
    # replicas share MEMENTO_PUBLIC_URL and the signing key: a token from one is good on another
    with another_gateway(system, MEMENTO_PUBLIC_URL=system.base_url) as replica:
        assert post_with(replica + "/mcp", storage.tokens.access_token).status_code == 200


async def test_the_sdk_refreshes_expired_tokens_and_refresh_tokens_rotate(system):
    with another_gateway(system, MEMENTO_OAUTH_ACCESS_TOKEN_SECONDS="1") as gateway:
        browser, storage = Browser(ACCESS_KEY), MemoryStorage()
        async with oauth_client(gateway + "/mcp", browser, storage) as client:
            first = storage.tokens
            wait_for(lambda: post_with(gateway + "/mcp", first.access_token).status_code == 401, 10, "token expiry")
            assert (await client.list_tools()).tools
            assert storage.tokens.refresh_token != first.refresh_token and len(browser.pages) == 1


def _forge(system, **changes) -> str:
    private_pem = Path(system.data_dir / "oauth" / "signing-key.pem").read_text()
    kid = httpx.get(system.base_url + "/.well-known/jwks.json", trust_env=False).json()["keys"][0]["kid"]
    now = int(time.time())
    claims = {"iss": system.base_url, "aud": system.mcp_url, "sub": "operator", "client_id": "e2e", "scope": "read"}
    claims |= {"iat": now, "exp": now + 60, "jti": f"e2e-{now}", "fam": "e2e"}
    claims["mem"] = {"tenant_id": "default", "workspaces": ["*"], "agents": ["*"], "profiles": []}
    return jwt.encode({**claims, **changes}, private_pem, algorithm="ES256", headers={"kid": kid})


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (None, "required"),
        ("not-a-token", "invalid access key"),
        ("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "invalid access token"),
        ("expired", "expired"),
        ("wrong-audience", "another resource"),
    ],
)
def test_missing_bad_expired_and_wrong_audience_tokens_are_401(system, token, why):
    assert post_with(system.mcp_url, _forge(system)).status_code == 200  # the control: a well-made token passes
    if token == "expired":
        token = _forge(system, exp=int(time.time()) - 10)
    elif token == "wrong-audience":
        token = _forge(system, aud="https://other.example/mcp")
    answer = post_with(system.mcp_url, token)
    assert answer.status_code == 401 and why in answer.json()["error_description"]
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and f'resource_metadata="{system.base_url}/.well-known/' in challenge


def test_authorization_server_metadata(system):
    metadata = httpx.get(system.base_url + "/.well-known/oauth-authorization-server", trust_env=False).json()
    assert metadata["issuer"] == system.base_url  # no trailing slash
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert {"authorization_endpoint", "token_endpoint", "registration_endpoint", "jwks_uri"} <= set(metadata)
