"""OAuth 2.0 at the gateway: metadata (RFC 8414, RFC 9728, JWKS), the SDK's own OAuth client through dynamic
registration, PKCE login with an access key, tokens and rotated refresh tokens; and every way a token is refused."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
import time
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from jose import jwt
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from memento_memory_api.repositories import api_keys
from memento_shared.db.rls import set_system
from tests.gateway.conftest import ACCESS_KEY, initialize
from tests.gateway.oauth_client import REDIRECT_URI, Browser, MemoryStorage, oauth


def sdk_client(gateway, browser: Browser, storage: MemoryStorage) -> Client:
    http = create_mcp_http_client(auth=oauth(gateway.mcp_url, browser, storage))
    return Client(streamable_http_client(gateway.mcp_url, http_client=http))


async def bearer_status(gateway, token: str) -> httpx.Response:
    async with gateway.http(Authorization=f"Bearer {token}") as http:
        return await http.post("/mcp", json=initialize())


async def test_metadata_documents(gateway):
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False) as http:
        server = (await http.get("/.well-known/oauth-authorization-server")).json()
        resource = (await http.get("/.well-known/oauth-protected-resource/mcp")).json()
        root_resource = (await http.get("/.well-known/oauth-protected-resource")).json()
        keys = (await http.get("/.well-known/jwks.json")).json()["keys"]
    assert server["issuer"] == gateway.url and not server["issuer"].endswith("/")
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["registration_endpoint"] == gateway.url + "/register"
    assert set(server["grant_types_supported"]) == {"authorization_code", "refresh_token"}
    assert server["jwks_uri"] == gateway.url + "/.well-known/jwks.json"
    assert resource == root_resource and resource["resource"] == gateway.mcp_url
    assert resource["authorization_servers"] == [gateway.url]
    assert keys[0]["alg"] == "ES256" and keys[0]["kid"] and "d" not in keys[0]


async def test_the_sdk_oauth_client_registers_logs_in_and_uses_the_tools(gateway, tenant):
    browser, storage = Browser(ACCESS_KEY), MemoryStorage()
    async with sdk_client(gateway, browser, storage) as client:
        stored = await client.call_tool("remember", {"content": "signed in by OAuth", "topic": tenant, "type": "fact"})
        assert not stored.is_error
    assert storage.client.client_id and len(storage.history) == 1
    claims = jwt.get_unverified_claims(storage.tokens.access_token)
    assert claims["aud"] == gateway.mcp_url and claims["iss"] == gateway.url and claims["sub"] == "operator"
    assert set(storage.tokens.scope.split()) == {"read", "write", "admin"} and storage.tokens.refresh_token
    assert "memento-tests" in browser.pages[0]


async def test_refresh_tokens_rotate_and_a_reused_one_revokes_the_sign_in(gateways):
    gateway = await gateways(MEMENTO_OAUTH_ACCESS_TOKEN_SECONDS="1")
    browser, storage = Browser(ACCESS_KEY), MemoryStorage()
    async with sdk_client(gateway, browser, storage) as client:
        first = storage.tokens
        deadline = time.monotonic() + 10
        while (await bearer_status(gateway, first.access_token)).status_code != 401:  # until it expired
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        assert (await client.list_tools()).tools  # the SDK refreshed by itself
        second = storage.tokens
        assert second.refresh_token != first.refresh_token and second.access_token != first.access_token
        assert len(browser.pages) == 1  # no second login
        async with httpx.AsyncClient(trust_env=False) as http:
            reuse = {"grant_type": "refresh_token", "refresh_token": first.refresh_token}
            reuse |= {"client_id": storage.client.client_id, "client_secret": storage.client.client_secret}
            refused = await http.post(gateway.url + "/token", data=reuse)
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
        revoked = await bearer_status(gateway, second.access_token)  # the leaked family is gone entirely
        assert revoked.status_code == 401 and "revoked" in revoked.json()["error_description"]


async def _registered(http: httpx.AsyncClient) -> dict:
    metadata = {"redirect_uris": [REDIRECT_URI], "client_name": "raw", "token_endpoint_auth_method": "none"}
    answer = await http.post("/register", json=metadata)
    assert answer.status_code == 201, answer.text
    return answer.json()


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


async def _authorize(http: httpx.AsyncClient, client_id: str, key: str, **params: str) -> httpx.Response:
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT_URI, "state": "s1", **params}
    to_login = await http.get("/authorize?" + urlencode(query))
    if to_login.status_code != 302 or "/oauth/login" not in to_login.headers["location"]:
        return to_login
    request_id = parse_qs(urlsplit(to_login.headers["location"]).query)["request"][0]
    return await http.post("/oauth/login", data={"request": request_id, "access_key": key, "decision": "allow"})


@pytest.mark.parametrize(
    "params",
    [{}, {"code_challenge": "x" * 43, "code_challenge_method": "plain"}, {"code_challenge_method": "S256"}],
    ids=["no challenge", "plain", "method without challenge"],
)
async def test_pkce_s256_is_required(gateway, params):
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False) as http:
        client = await _registered(http)
        refused = await _authorize(http, client["client_id"], ACCESS_KEY, **params)
    assert refused.status_code == 302
    assert parse_qs(urlsplit(refused.headers["location"]).query)["error"] == ["invalid_request"]


async def test_codes_are_single_use_and_need_the_verifier(gateway):
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False) as http:
        client = await _registered(http)
        verifier = secrets.token_urlsafe(48)
        back = await _authorize(http, client["client_id"], ACCESS_KEY, code_challenge=_challenge(verifier))
        query = parse_qs(urlsplit(back.headers["location"]).query)
        assert query["state"] == ["s1"] and query["iss"] == [gateway.url]
        exchange = {"grant_type": "authorization_code", "code": query["code"][0], "redirect_uri": REDIRECT_URI}
        exchange["client_id"] = client["client_id"]
        wrong = await http.post("/token", data={**exchange, "code_verifier": "w" * 43})
        assert wrong.json()["error"] == "invalid_grant"
        tokens = await http.post("/token", data={**exchange, "code_verifier": verifier})
        assert tokens.status_code == 200 and tokens.json()["token_type"] == "Bearer"
        again = await http.post("/token", data={**exchange, "code_verifier": verifier})
        assert again.json()["error"] == "invalid_grant"


async def test_the_login_page_refuses_bad_keys_and_binds_api_keys(gateway, app_pool, tenant):
    async with app_pool.acquire() as conn, conn.transaction():
        await set_system(conn)
        reader = await api_keys.insert(
            conn, tenant_id=tenant, name="oauth", workspaces=["*"], agents=["*"], scopes=["read"], profiles=[],
            expires_at=None,
        )  # fmt: skip
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False) as http:
        client = await _registered(http)
        challenge = _challenge(secrets.token_urlsafe(48))
        wrong = await _authorize(http, client["client_id"], "not-a-key", code_challenge=challenge)
        assert wrong.status_code == 401 and "not valid" in wrong.text and wrong.headers["x-frame-options"] == "DENY"
        verifier = secrets.token_urlsafe(48)
        back = await _authorize(http, client["client_id"], reader.key, code_challenge=_challenge(verifier))
        code = parse_qs(urlsplit(back.headers["location"]).query)["code"][0]
        exchange = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI}
        tokens = await http.post(
            "/token", data={**exchange, "client_id": client["client_id"], "code_verifier": verifier}
        )
    claims = jwt.get_unverified_claims(tokens.json()["access_token"])
    assert claims["mem"]["tenant_id"] == tenant and claims["scope"] == "read" and claims["sub"] == f"key:{reader.id}"


async def test_a_token_for_another_resource_is_refused_at_authorize(gateway):
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False) as http:
        client = await _registered(http)
        challenge = _challenge(secrets.token_urlsafe(48))
        refused = await _authorize(
            http, client["client_id"], ACCESS_KEY, code_challenge=challenge, resource="https://other.example/mcp"
        )
    assert parse_qs(urlsplit(refused.headers["location"]).query)["error"] == ["invalid_target"]


async def test_missing_bad_expired_and_wrong_audience_tokens_are_401(gateway):
    signer = gateway.state.oauth.signer
    now = int(time.time())
    claims = {"iss": gateway.url, "aud": gateway.mcp_url, "sub": "operator", "client_id": "c", "scope": "read"}
    claims |= {"iat": now, "exp": now + 60, "jti": "j", "fam": "f"}
    claims["mem"] = {"tenant_id": "default", "workspaces": ["*"], "agents": ["*"], "profiles": []}
    assert (await bearer_status(gateway, signer.sign(claims))).status_code == 200  # the control: a good one
    cases = {
        "expired": signer.sign({**claims, "exp": now - 5}),
        "another resource": signer.sign({**claims, "aud": "https://elsewhere.example/mcp"}),
        "invalid access token": jwt.encode(claims, "not our key", algorithm="HS256"),
        "invalid access key": "garbage",
    }
    for expected, token in cases.items():
        answer = await bearer_status(gateway, token)
        assert answer.status_code == 401 and expected in answer.json()["error_description"], expected
        challenge = answer.headers["www-authenticate"]
        assert 'error="invalid_token"' in challenge and "resource_metadata=" in challenge
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False) as http:
        missing = await http.post("/mcp", json=initialize())
    assert missing.status_code == 401 and "error=" not in missing.headers["www-authenticate"].split(",")[0]
