"""OAuth clients identified by a Client ID Metadata Document: the metadata says so, the official SDK's OAuth client
signs in end to end with its document URL as client_id (no registration), the sign-in page names the client and
the host vouching for it, documents are cached as their headers say, and every rule a document or its URL breaks
is refused with a 400 naming it. The documents come from a loopback HTTPS server with a CA made for the test
(tests/fixtures/client_documents.py), which these gateways trust and may reach on loopback by operator setting."""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Iterator
from urllib.parse import urlencode, urljoin

import httpx
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientMetadata

from tests.fixtures.client_documents import DocumentServer, TestCA, make_ca
from tests.gateway.conftest import ACCESS_KEY
from tests.gateway.oauth_client import REDIRECT_URI, Browser, MemoryStorage


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return make_ca(tmp_path_factory.mktemp("cimd-tls"))


@pytest.fixture(scope="module")
def site(tls: TestCA) -> Iterator[DocumentServer]:
    server = DocumentServer(tls)
    server.start()
    yield server
    server.stop()


def trusting(tls: TestCA, **extra: str) -> dict[str, str]:
    return {
        "MEMENTO_OAUTH_CIMD_CA_FILE": str(tls.ca_file),
        "MEMENTO_OAUTH_CIMD_ALLOW_PRIVATE_ADDRESSES": "true",
        "MEMENTO_OAUTH_CIMD_TIMEOUT_SECONDS": "1",
        **extra,
    }


@pytest.fixture
async def gateway(gateways, tls: TestCA):
    return await gateways(**trusting(tls))


def document(url: str, **changes) -> dict:
    """A valid metadata document for `url`, with `changes` (None removes a field)."""
    body = {
        "client_id": url,
        "client_name": "Acme Notes",
        "client_uri": "https://localhost/",
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def path() -> str:
    return f"/clients/{secrets.token_hex(4)}.json"


def authorize_query(client_id: str, redirect_uri: str = REDIRECT_URI) -> str:
    verifier = secrets.token_urlsafe(32)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "s1",
        }
    )


async def authorize(gateway, client_id: str, redirect_uri: str = REDIRECT_URI) -> httpx.Response:
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False, timeout=10) as http:
        return await http.get("/authorize?" + authorize_query(client_id, redirect_uri))


async def refusal(gateway, client_id: str) -> str:
    answer = await authorize(gateway, client_id)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "invalid_client"
    return answer.json()["error_description"]


async def metadata(gateway) -> dict:
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False) as http:
        return (await http.get("/.well-known/oauth-authorization-server")).json()


async def test_the_metadata_says_documents_are_accepted_unless_switched_off(gateway, gateways, site):
    assert (await metadata(gateway))["client_id_metadata_document_supported"] is True
    off = await gateways(MEMENTO_OAUTH_CIMD="false")
    assert "client_id_metadata_document_supported" not in await metadata(off)
    assert "does not accept" in await refusal(off, site.put(path(), {}))


async def test_the_sdk_signs_in_with_its_document_url_as_client_id(gateway, site, tenant):
    where = path()
    url = site.put(where, document(site.url(where)), headers={"Cache-Control": "max-age=60"})
    browser, storage = Browser(ACCESS_KEY), MemoryStorage()
    metadata = OAuthClientMetadata(client_name="Acme Notes", redirect_uris=[REDIRECT_URI])
    auth = OAuthClientProvider(
        gateway.mcp_url, metadata, storage, browser.open, browser.callback, client_metadata_url=url
    )
    async with Client(streamable_http_client(gateway.mcp_url, http_client=create_mcp_http_client(auth=auth))) as c:
        stored = await c.call_tool("remember", {"content": "signed in by CIMD", "topic": tenant, "type": "fact"})
        assert not stored.is_error
    assert storage.client.client_id == url and storage.tokens.access_token and storage.tokens.refresh_token
    page = browser.pages[0]
    assert "<strong>Acme Notes</strong>" in page and "from <strong>localhost</strong>" in page
    assert "goes back to <strong>127.0.0.1</strong>" in page and "started this client yourself" in page
    assert site.hits[where] == 1  # /authorize fetched it, /token found it in the cache
    assert not await gateway.state.redis.exists("memento:oauth:client:" + url)  # nothing was registered


async def test_documents_are_cached_as_their_headers_say(gateway, site):
    # two sign-ins each: kept for its max-age, or the default 300 s when it says nothing; with no-store fetched at
    # every look, which is twice per sign-in (the check before the SDK's handler, then the handler's own)
    for headers, fetches in [({"Cache-Control": "max-age=60"}, 1), ({"Cache-Control": "no-store"}, 4), ({}, 1)]:
        where = path()
        url = site.put(where, document(site.url(where)), headers=headers)
        for _ in range(2):
            answer = await authorize(gateway, url)
            assert answer.status_code == 302 and "/oauth/login?request=" in answer.headers["location"]
        assert site.hits[where] == fetches, (headers, site.hits[where])


async def test_redirect_uris_are_matched_exactly(gateway, site):
    where = path()
    url = site.put(where, document(site.url(where)))
    for other in (REDIRECT_URI + "/x", REDIRECT_URI.replace("33418", "33419"), "http://127.0.0.1:33418/callback?x=1"):
        answer = await authorize(gateway, url, other)
        assert answer.status_code == 400 and "not registered" in answer.json()["error_description"], other


@pytest.mark.parametrize(
    ("url_of", "named"),
    [
        (lambda site: site.url(path()).replace("https://", "http://"), "must use https"),
        (lambda site: site.url("/"), "must have a path"),
        (lambda site: site.url(path()) + "?v=1", "must not have a query"),
        (lambda site: site.url(path()) + "#frag", "must not have a fragment"),
        (lambda site: site.url(path()).replace("https://", "https://user:pw@"), "user name or password"),
        (lambda site: site.url("/a/../b.json"), ". or .. segments"),
    ],
)
async def test_client_id_urls_that_break_the_rules_are_refused_unfetched(gateway, site, url_of, named):
    url = url_of(site)
    before = sum(site.hits.values())
    assert named in await refusal(gateway, url)
    assert sum(site.hits.values()) == before


@pytest.mark.parametrize(
    ("serve", "named"),
    [
        (lambda site, url, where: site.put(where, document(site.url(where) + "x")), "client_id must equal"),
        (lambda site, url, where: site.put(where, document(url, client_name=None)), "client_name is required"),
        (lambda site, url, where: site.put(where, document(url, redirect_uris=None)), "redirect_uris"),
        (lambda site, url, where: site.put(where, document(url, redirect_uris=["javascript:alert(1)"])), "not allowed"),
        (
            lambda site, url, where: site.put(where, document(url, token_endpoint_auth_method="client_secret_basic")),
            "shared secret",
        ),
        (lambda site, url, where: site.put(where, document(url, client_secret="s3cret")), "shared secret"),
        (
            lambda site, url, where: site.put(where, document(url, token_endpoint_auth_method="private_key_jwt")),
            "not supported",
        ),
        (lambda site, url, where: site.put(where, document(url, grant_types=["client_credentials"])), "grant_types"),
        (lambda site, url, where: site.put(where, [url]), "JSON object"),
        (lambda site, url, where: site.put(where, raw=b"<html>not json</html>"), "not JSON"),
        (lambda site, url, where: site.put(where, document(url, client_uri="x" * 6000)), "larger than 5120 bytes"),
        (lambda site, url, where: site.put(where, document(url), status=404), "HTTP 404"),
        (
            lambda site, url, where: site.put(where, document(url), status=302, headers={"Location": "/elsewhere"}),
            "HTTP 302",
        ),
        (lambda site, url, where: site.put(where, document(url), delay_s=3), "did not arrive in time"),
    ],
)
async def test_documents_that_break_the_rules_are_refused(gateway, site, serve, named):
    where = path()
    url = site.url(where)
    serve(site, url, where)
    assert named in await refusal(gateway, url)
    assert site.hits[where] == 1


async def test_private_addresses_and_untrusted_certificates_are_refused_by_default(gateways, tls, site):
    where = path()
    site.put(where, document(site.url(where)))
    strict = await gateways(MEMENTO_OAUTH_CIMD_CA_FILE=str(tls.ca_file))
    assert "private or loopback" in await refusal(strict, f"https://localhost{where}")  # resolves to 127.0.0.1
    assert "private or loopback" in await refusal(strict, f"https://127.0.0.1{where}")
    # another port than https's is never fetched either: the gateway is no way to find which ports of a host answer
    assert "port (443)" in await refusal(strict, site.url(where))
    assert site.hits[where] == 0
    untrusting = await gateways(MEMENTO_OAUTH_CIMD_ALLOW_PRIVATE_ADDRESSES="true")
    assert "TLS certificate" in await refusal(untrusting, site.url(where))


async def test_a_self_registered_client_is_shown_as_unverified(gateway):
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False, timeout=10) as http:
        registered = await http.post(
            "/register", json={"client_name": "Acme Notes", "redirect_uris": ["https://app.example/cb"]}
        )
        client_id = registered.json()["client_id"]
        to_login = await http.get("/authorize?" + authorize_query(client_id, "https://app.example/cb"))
        page = (await http.get(urljoin(gateway.url, to_login.headers["location"]))).text
    assert "<strong>Acme Notes</strong> (a client that registered itself: its name is not verified)" in page
    assert "goes back to <strong>app.example</strong>" in page and "started this client yourself" not in page


async def test_a_posted_authorization_request_is_checked_the_same_way(gateway, site):
    where = path()
    good = site.put(where, document(site.url(where)))
    bad = site.put(path(), document(site.url(where)))  # names another URL as its client_id
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False, timeout=10) as http:
        for url, status in ((good, 302), (bad, 400)):
            form = dict(pair.split("=", 1) for pair in authorize_query(url).split("&"))
            answer = await http.post("/authorize", content="&".join(f"{k}={v}" for k, v in form.items()),
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
            assert answer.status_code == status, answer.text
    assert "client_id must equal" in answer.json()["error_description"]


async def test_a_refused_document_is_not_fetched_again_for_a_minute(gateway, site):
    where = path()
    url = site.url(where)
    site.put(where, document(url + "x"))  # names another URL as its client_id
    for _ in range(3):
        assert "client_id must equal" in await refusal(gateway, url)
    assert site.hits[where] == 1
