"""Client ID Metadata Documents (MCP authorization, 2025-11-25 on; draft-ietf-oauth-client-id-metadata-document):
a client with no prior relationship uses an HTTPS URL as its `client_id`, and that URL serves its metadata.

`ClientDocuments.client(url)` fetches the document and checks it before any sign-in trusts it:
- the URL: https, a host, a path other than `/`, no user info, query, fragment or dot segments;
- the fetch: no redirects, at most MAX_DOCUMENT_BYTES, within MEMENTO_OAUTH_CIMD_TIMEOUT_SECONDS, and only to public
  addresses (every address the host resolves to, checked at connect time so DNS cannot change its mind between
  check and use) unless MEMENTO_OAUTH_CIMD_ALLOW_PRIVATE_ADDRESSES says otherwise (tests, a private deployment);
  MEMENTO_OAUTH_CIMD_CA_FILE adds a CA to trust besides the system's;
- the document: a JSON object whose `client_id` equals the URL exactly, a `client_name`, absolute `redirect_uris`
  (matched exactly at /authorize), and no shared secret (`token_endpoint_auth_method` "none", no `client_secret`).

A valid document is kept in Redis (every replica shares it) for as long as its Cache-Control or Expires allows, at
most a day, DEFAULT_CACHE_S when it says nothing; `no-store` or `no-cache` keeps it not at all. A refused one is
remembered for a minute, concurrent asks share one fetch, and only port 443 is fetched from (unless private addresses
are allowed): the gateway fetches whatever URL anyone names, and must not be a way to probe hosts and ports.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import logging
import re
import socket
import ssl
import time
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import ValidationError
from redis.asyncio import Redis

log = logging.getLogger(__name__)
MAX_DOCUMENT_BYTES = 5 * 1024  # the draft's suggestion: a client's metadata is a few hundred bytes
MAX_REDIRECT_URIS = 20
MAX_NAME_CHARS = 100
DEFAULT_CACHE_S = 300
MAX_CACHE_S = 86_400
KEY_PREFIX = "memento:oauth:cimd:"
REFUSED_PREFIX = "memento:oauth:cimd-refused:"
REFUSAL_CACHE_S = 60
SHARED_SECRET_METHODS = {"client_secret_basic", "client_secret_post", "client_secret_jwt"}
BLOCKED_REDIRECT_SCHEMES = {"javascript", "data", "file", "vbscript", "about"}
GRANT_TYPES = {"authorization_code", "refresh_token"}
SCOPES = ("read", "write", "admin")  # oauth/routes.py advertises the same
MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d+)\"?", re.IGNORECASE)


class Refused(Exception):
    """The client_id or its document cannot be trusted; the message says why and is safe to show the client."""


class PrivateAddress(OSError):
    """The document's host resolves to an address this gateway may not fetch from."""


def is_document_id(client_id: str) -> bool:
    """A URL-shaped client_id: a metadata document's, never one we issued (those are opaque tokens)."""
    return "://" in client_id


NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix: the IPv4 address in the last 32 bits


def _address_allowed(address: str, allow_private: bool) -> bool:
    if allow_private:
        return True
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone index names no other address
    # an IPv4 address carried inside an IPv6 one (mapped, NAT64, 6to4, Teredo) is judged as that IPv4 address
    carried = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            carried.append(ip.ipv4_mapped)
        if ip in NAT64:
            carried.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if ip.sixtofour is not None:
            carried.append(ip.sixtofour)
        if ip.teredo is not None:
            carried += list(ip.teredo)
    return all(a.is_global and not a.is_multicast for a in carried)


def checked_url(url: str, any_port: bool = False) -> str:
    """The URL, if it may be a client_id; Refused naming the rule it breaks. Only https's own port unless `any_port`
    (an operator allowing private addresses): the gateway fetches what anyone names, and must not become a way to
    find out which ports of which hosts answer."""
    if len(url) > 2048:
        raise Refused("client_id: a URL of at most 2048 characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise Refused("client_id: not a valid URL") from None
    if parts.scheme != "https":
        raise Refused("client_id: a metadata document URL must use https")
    if not parts.hostname:
        raise Refused("client_id: the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise Refused("client_id: the URL must not contain a user name or password")
    if parts.path in ("", "/"):
        raise Refused("client_id: the URL must have a path (e.g. https://app.example/client.json)")
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        raise Refused("client_id: the URL's path must not contain . or .. segments")
    if parts.query or url.endswith("?"):
        raise Refused("client_id: the URL must not have a query")
    if parts.fragment or "#" in url:
        raise Refused("client_id: the URL must not have a fragment")
    if port == 0:
        raise Refused("client_id: the URL's port is not valid")
    if port not in (None, 443) and not any_port:
        raise Refused("client_id: the URL must use https's port (443)")
    return url


def cache_seconds(headers: Any) -> int:
    """How long the response may be reused by its own headers: Cache-Control first, then Expires."""
    control = headers.get("Cache-Control", "")
    if re.search(r"(?:^|,)\s*(no-store|no-cache|private)\b", control, re.IGNORECASE):
        return 0
    found = MAX_AGE.search(control)
    if found:
        return min(int(found[1]), MAX_CACHE_S)
    expires = headers.get("Expires")
    if expires:
        try:
            return max(0, min(int(parsedate_to_datetime(expires).timestamp() - time.time()), MAX_CACHE_S))
        except (TypeError, ValueError, OverflowError):
            return 0  # RFC 9111 §5.3: an invalid Expires means already expired
    return DEFAULT_CACHE_S


def client_from(url: str, document: Any) -> OAuthClientInformationFull:
    """The client a valid document describes; Refused naming the first problem."""
    if not isinstance(document, dict):
        raise Refused("client metadata: the document must be a JSON object")
    if document.get("client_id") != url:
        raise Refused("client metadata: client_id must equal the document's URL exactly")
    name = document.get("client_name")
    if not isinstance(name, str) or not name.strip():
        raise Refused("client metadata: client_name is required")
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise Refused("client metadata: redirect_uris must be a non-empty list of URLs")
    if len(uris) > MAX_REDIRECT_URIS:
        raise Refused(f"client metadata: at most {MAX_REDIRECT_URIS} redirect_uris")
    for uri in uris:
        parts = urlsplit(uri)
        if not parts.scheme or parts.scheme.lower() in BLOCKED_REDIRECT_SCHEMES or parts.fragment or "#" in uri:
            raise Refused(f"client metadata: redirect URI {uri[:200]!r} is not allowed")
    method = document.get("token_endpoint_auth_method", "none")
    if method in SHARED_SECRET_METHODS or "client_secret" in document or "client_secret_expires_at" in document:
        raise Refused("client metadata: a metadata document client must not use a shared secret")
    if method != "none":
        raise Refused(f"client metadata: token_endpoint_auth_method {method!r} is not supported; use none (PKCE)")
    grants = document.get("grant_types", ["authorization_code"])
    if not isinstance(grants, list) or not set(grants) <= GRANT_TYPES or "authorization_code" not in grants:
        raise Refused("client metadata: grant_types may be authorization_code and refresh_token only")
    responses = document.get("response_types", ["code"])
    if responses != ["code"]:
        raise Refused('client metadata: response_types must be ["code"]')
    fields = {k: document[k] for k in ("client_uri", "logo_uri") if isinstance(document.get(k), str)}
    # the scopes it may ask for: those it declares, else all of ours (the key typed at sign-in narrows them anyway)
    scope = document.get("scope") if isinstance(document.get("scope"), str) else " ".join(SCOPES)
    try:
        return OAuthClientInformationFull(
            client_id=url,
            scope=scope,
            client_name=" ".join(name.split())[:MAX_NAME_CHARS],
            redirect_uris=uris,
            grant_types=grants,
            response_types=["code"],
            token_endpoint_auth_method="none",
            **fields,
        )
    except ValidationError as exc:
        where = ".".join(str(p) for p in exc.errors()[0]["loc"][:1])
        raise Refused(f"client metadata: {where or 'a field'} is not valid") from None


class _PublicOnly(AbstractResolver):
    """Resolves as usual, then refuses the host if any of its addresses is not allowed: the connection can only go
    to addresses that were checked."""

    def __init__(self, allow_private: bool) -> None:
        self.inner = aiohttp.ThreadedResolver()
        self.allow_private = allow_private

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self.inner.resolve(host, port, family)
        if not all(_address_allowed(entry["host"], self.allow_private) for entry in found):
            raise PrivateAddress(f"{host} resolves to a private or loopback address")
        return found

    async def close(self) -> None:
        await self.inner.close()


class ClientDocuments:
    def __init__(self, redis: Redis, *, allow_private: bool, ca_file: str, timeout_s: float) -> None:
        self.redis = redis
        self.allow_private = allow_private
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.tls = ssl.create_default_context()
        if ca_file:
            self.tls.load_verify_locations(cafile=ca_file)
        self._session: aiohttp.ClientSession | None = None
        self._fetching: dict[str, asyncio.Task[OAuthClientInformationFull]] = {}

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                resolver=_PublicOnly(self.allow_private), use_dns_cache=False, ssl=self.tls, limit=20
            )
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self.timeout, trust_env=False, headers={"Accept": "application/json"}
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def client(self, url: str) -> OAuthClientInformationFull:
        """The client the document at `url` describes, from the cache or fetched now; Refused when it is not good. A
        refusal is kept REFUSAL_CACHE_S (every replica shares it), and concurrent asks for one URL share one fetch:
        naming a URL again and again makes the gateway fetch it at most once a minute."""
        digest = hashlib.sha256(url.encode()).hexdigest()
        kept = await self.redis.get(KEY_PREFIX + digest)
        if kept is not None:
            return OAuthClientInformationFull.model_validate_json(kept)
        refused = await self.redis.get(REFUSED_PREFIX + digest)
        if refused is not None:
            raise Refused(refused.decode() if isinstance(refused, bytes) else refused)
        checked_url(url, any_port=self.allow_private)
        task = self._fetching.get(url)
        if task is None:
            task = asyncio.create_task(self._described(url, digest))
            self._fetching[url] = task
            task.add_done_callback(lambda _: self._fetching.pop(url, None))
        return await asyncio.shield(task)

    async def _described(self, url: str, digest: str) -> OAuthClientInformationFull:
        try:
            document, ttl = await self._fetch(url)
            found = client_from(url, document)
        except Refused as exc:
            await self.redis.set(REFUSED_PREFIX + digest, str(exc), ex=REFUSAL_CACHE_S)
            raise
        if ttl:
            await self.redis.set(KEY_PREFIX + digest, found.model_dump_json(exclude_none=True), ex=ttl)
        log.info("oauth.cimd_fetched", extra={"host": urlsplit(url).hostname, "cached_s": ttl})
        return found

    async def _fetch(self, url: str) -> tuple[Any, int]:
        host = urlsplit(url).hostname or ""
        try:
            literal = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        if literal is not None and not _address_allowed(str(literal), self.allow_private):
            raise Refused("client_id: the document's host is a private or loopback address")
        try:
            async with self._open().get(url, allow_redirects=False) as response:
                if response.status != 200:
                    raise Refused(f"client metadata: the document URL answered HTTP {response.status}, not 200")
                body = b""
                async for chunk in response.content.iter_chunked(1024):
                    body += chunk
                    if len(body) > MAX_DOCUMENT_BYTES:  # stop reading: a big body costs us no more than this
                        raise Refused(f"client metadata: the document is larger than {MAX_DOCUMENT_BYTES} bytes")
                ttl = cache_seconds(response.headers)
        except TimeoutError:
            raise Refused("client metadata: the document did not arrive in time") from None
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, PrivateAddress) or isinstance(exc.__cause__, PrivateAddress):
                raise Refused("client_id: the document's host resolves to a private or loopback address") from None
            if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientConnectorSSLError):
                raise Refused("client metadata: the document's host has no valid TLS certificate") from None
            raise Refused("client metadata: the document's host could not be reached") from None
        except aiohttp.ClientError:
            raise Refused("client metadata: the document could not be fetched") from None
        try:
            return json.loads(body), ttl
        except (ValueError, UnicodeDecodeError):
            raise Refused("client metadata: the document is not JSON") from None
